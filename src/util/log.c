/* Rank-prefixed logging and the fatal-error path. */
#define _GNU_SOURCE
#include "util/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

int ftw_log_level = FTW_LOG_WARN;
static int log_rank = -1;

static const char *const level_names[] = {
    [FTW_LOG_ERROR] = "error",
    [FTW_LOG_WARN]  = "warn",
    [FTW_LOG_INFO]  = "info",
    [FTW_LOG_DEBUG] = "debug",
};

void ftw_log_set_rank(int rank)
{
    log_rank = rank;
}

/* Format one whole line and write it with one write(2), so lines of
 * different ranks and threads do not interleave. */
static void log_vemit(int level, const char *func, const char *fmt,
                      va_list ap)
{
    char line[1024];
    int n;

    if (log_rank >= 0)
        n = snprintf(line, sizeof(line), "[ftwrap r%d pid %d] %s: %s: ",
                     log_rank, (int)getpid(), level_names[level], func);
    else
        n = snprintf(line, sizeof(line), "[ftwrap pid %d] %s: %s: ",
                     (int)getpid(), level_names[level], func);
    if (n < 0 || (size_t)n >= sizeof(line))
        n = 0;
    n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    if ((size_t)n > sizeof(line) - 2)
        n = sizeof(line) - 2;
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* Nowhere left to report it. */
    }
}

void ftw_log_emit(int level, const char *func, const char *fmt, ...)
{
    int saved_errno = errno;
    va_list ap;

    va_start(ap, fmt);
    log_vemit(level, func, fmt, ap);
    va_end(ap);
    errno = saved_errno;
}

void ftw_backtrace_print(void)
{
    unw_context_t ctx;
    unw_cursor_t cursor;
    char name[256];
    int depth = 0;

    if (unw_getcontext(&ctx) != 0 || unw_init_local(&cursor, &ctx) != 0) {
        fprintf(stderr, "  (no backtrace: libunwind failed)\n");
        return;
    }
    do {
        unw_word_t ip, off;

        if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0)
            break;
        if (unw_get_proc_name(&cursor, name, sizeof(name), &off) != 0)
            snprintf(name, sizeof(name), "??");
        fprintf(stderr, "  #%-2d 0x%016lx %s+0x%lx\n", depth,
                (unsigned long)ip, name, (unsigned long)off);
    } while (++depth < 64 && unw_step(&cursor) > 0);
    fflush(stderr);
}

void ftw_fatal_emit(const char *func, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    log_vemit(FTW_LOG_ERROR, func, fmt, ap);
    va_end(ap);
    ftw_backtrace_print();
    abort();
}
