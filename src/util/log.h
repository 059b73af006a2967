/*
 * Logging.  Each macro tests the level before any formatting, leaves errno
 * as it was, and prefixes the line with ftwrap, the MPI rank (once known),
 * the pid and the calling function:
 *
 *   [ftwrap r3 pid 4711] warn: ftw_cma_probe: process_vm_readv: EPERM
 *
 * FTW_LOG selects the level (error, warn, info, debug).
 */
#ifndef FTW_UTIL_LOG_H
#define FTW_UTIL_LOG_H

#include "util/compiler.h"

typedef enum {
    FTW_LOG_ERROR = 0,
    FTW_LOG_WARN  = 1,
    FTW_LOG_INFO  = 2,
    FTW_LOG_DEBUG = 3,
} ftw_log_level_t;

extern int ftw_log_level;

void ftw_log_emit(int level, const char *func, const char *fmt, ...)
    FTW_PRINTF(3, 4);
void ftw_log_set_rank(int rank);

/* Print an error with a backtrace and abort the process. */
FTW_NORETURN void ftw_fatal_emit(const char *func, const char *fmt, ...)
    FTW_PRINTF(2, 3);

/* Print the calling thread's stack to stderr. */
void ftw_backtrace_print(void);

#define ftw_log(level, ...)                                        \
    do {                                                           \
        if (ftw_unlikely((level) <= ftw_log_level))                \
            ftw_log_emit((level), __func__, __VA_ARGS__);          \
    } while (0)

#define ftw_error(...) ftw_log(FTW_LOG_ERROR, __VA_ARGS__)
#define ftw_warn(...)  ftw_log(FTW_LOG_WARN, __VA_ARGS__)
#define ftw_info(...)  ftw_log(FTW_LOG_INFO, __VA_ARGS__)
#define ftw_debug(...) ftw_log(FTW_LOG_DEBUG, __VA_ARGS__)
#define ftw_fatal(...) ftw_fatal_emit(__func__, __VA_ARGS__)

/* For per-peer or per-message repeats: each call site speaks at most
 * FTW_LOG_SPARSE_MAX times, then says once that it goes quiet. */
#define FTW_LOG_SPARSE_MAX 3
#define ftw_log_sparse(level, ...)                                 \
    do {                                                           \
        static int ftw_sparse_count_;                              \
        if (ftw_unlikely((level) <= ftw_log_level) &&              \
            ftw_sparse_count_ <= FTW_LOG_SPARSE_MAX) {             \
            if (++ftw_sparse_count_ <= FTW_LOG_SPARSE_MAX)         \
                ftw_log_emit((level), __func__, __VA_ARGS__);      \
            else                                                   \
                ftw_log_emit((level), __func__,                    \
                             "(further messages suppressed)");     \
        }                                                          \
    } while (0)

#define ftw_warn_sparse(...) ftw_log_sparse(FTW_LOG_WARN, __VA_ARGS__)

#endif
