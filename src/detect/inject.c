/*
 * Fault injection for tests: FTW_INJECT=rank=R,at=POINT:N[,sig=NAME]
 * makes world rank R send itself signal NAME (default KILL) on its N-th
 * call (1-based) at POINT; rank=R+S+... arms several ranks alike.  With sig=STOP the process stops there until
 * someone continues it.  At nomem no signal is sent: R's N-th allocation
 * for an agreement fails as if memory had run out; at expose neither: R's
 * N-th persistent rendezvous round finds no transport to expose it.
 */
#define _GNU_SOURCE
#include "detect/detect.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/config.h"
#include "util/log.h"

int ftw_inject_armed;

static struct {
    ftw_inject_point_t point;
    unsigned long count;
    int sig;
    const char *sig_name;
    _Atomic unsigned long calls[FTW_INJECT_NPOINTS];
} inj;

static const char *const point_names[FTW_INJECT_NPOINTS] = {
    [FTW_INJECT_SEND] = "send",
    [FTW_INJECT_RECV] = "recv",
    [FTW_INJECT_WAIT] = "wait",
    [FTW_INJECT_PROBE] = "probe",
    [FTW_INJECT_COLL] = "coll",
    [FTW_INJECT_FINALIZE] = "finalize",
    [FTW_INJECT_PULL] = "pull",
    [FTW_INJECT_AGREE_UP] = "agree_up",
    [FTW_INJECT_AGREE_DOWN] = "agree_down",
    [FTW_INJECT_AGREED] = "agreed",
    [FTW_INJECT_PULLED] = "pulled",
    [FTW_INJECT_SETTLED] = "settled",
    [FTW_INJECT_DUP] = "dup",
    [FTW_INJECT_NOMEM] = "nomem",
    [FTW_INJECT_FRAG] = "frag",
    [FTW_INJECT_EXPOSE] = "expose",
};

int ftw_inject_pulled_rank = -1;

static const struct {
    const char *name;
    int sig;
} sig_table[] = {
    { "KILL", SIGKILL }, { "TERM", SIGTERM }, { "SEGV", SIGSEGV },
    { "ABRT", SIGABRT }, { "STOP", SIGSTOP }, { "INT", SIGINT },
    { "HUP", SIGHUP },   { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 },
    { "QUIT", SIGQUIT }, { "BUS", SIGBUS },   { "FPE", SIGFPE },
    { "ILL", SIGILL },   { "PIPE", SIGPIPE }, { "ALRM", SIGALRM },
};

/* A decimal number >= min, the whole of s. */
static int parse_num(const char *s, long min, long *v_p)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < min)
        return -1;
    *v_p = v;
    return 0;
}

static int parse_sig(const char *s)
{
    if (!strncasecmp(s, "SIG", 3))
        s += 3;
    for (size_t i = 0; i < FTW_ARRAY_SIZE(sig_table); i++) {
        if (!strcasecmp(s, sig_table[i].name)) {
            inj.sig = sig_table[i].sig;
            inj.sig_name = sig_table[i].name;
            return 0;
        }
    }
    return -1;
}

/* "R" or "R+R+...": the ranks to arm (at most 8); *rank_p gets the
 * first. */
static long inj_ranks[8];
static int inj_nranks;

static int parse_ranks(char *s, long *rank_p)
{
    char *save = NULL, *r;

    inj_nranks = 0;
    for (r = strtok_r(s, "+", &save); r; r = strtok_r(NULL, "+", &save)) {
        if (inj_nranks == 8 || parse_num(r, 0, &inj_ranks[inj_nranks]) < 0)
            return -1;
        inj_nranks++;
    }
    if (inj_nranks == 0)
        return -1;
    *rank_p = inj_ranks[0];
    return 0;
}

static int inj_has_rank(long rank)
{
    for (int i = 0; i < inj_nranks; i++)
        if (inj_ranks[i] == rank)
            return 1;
    return 0;
}

/* "POINT:N" */
static int parse_at(char *s)
{
    char *colon = strchr(s, ':');
    long n;

    if (!colon || parse_num(colon + 1, 1, &n) < 0)
        return -1;
    *colon = '\0';
    for (int p = 0; p < FTW_INJECT_NPOINTS; p++) {
        if (!strcasecmp(s, point_names[p])) {
            inj.point = (ftw_inject_point_t)p;
            inj.count = (unsigned long)n;
            return 0;
        }
    }
    return -1;
}

/* One "key=value" item; *rank_p gets the rank. */
static int parse_item(char *item, long *rank_p, int *have_at)
{
    char *eq = strchr(item, '=');

    if (!eq)
        return -1;
    *eq = '\0';
    if (!strcmp(item, "rank"))
        return parse_ranks(eq + 1, rank_p);
    if (!strcmp(item, "at")) {
        *have_at = 1;
        return parse_at(eq + 1);
    }
    if (!strcmp(item, "sig"))
        return parse_sig(eq + 1);
    return -1;
}

static ftw_status_t inject_parse(char *spec, long *rank_p)
{
    char *save = NULL, *item;
    int have_at = 0;

    *rank_p = -1;
    for (item = strtok_r(spec, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        char bad[64];

        strncpy(bad, item, sizeof(bad) - 1);
        bad[sizeof(bad) - 1] = '\0';
        if (parse_item(item, rank_p, &have_at) < 0) {
            ftw_error("FTW_INJECT: cannot parse '%s' (expected rank=R[+R...], "
                      "at=send|recv|wait|probe|coll|finalize|pull|pulled|agree_up|"
                      "agree_down|agreed|settled|dup|nomem|frag|expose:N or "
                      "sig=NAME)", bad);
            return FTW_ST_INVALID_PARAM;
        }
    }
    if (*rank_p < 0 || !have_at) {
        ftw_error("FTW_INJECT='%s' needs both rank=R and at=POINT:N",
                  ftw_cfg.inject);
        return FTW_ST_INVALID_PARAM;
    }
    return FTW_OK;
}

ftw_status_t ftw_inject_init(int world_rank)
{
    ftw_status_t status;
    char *spec;
    long rank;

    ftw_inject_armed = 0;
    if (!ftw_cfg.inject || !ftw_cfg.inject[0])
        return FTW_OK;
    spec = strdup(ftw_cfg.inject);
    if (!spec) {
        ftw_error("out of memory");
        return FTW_ST_NO_MEMORY;
    }
    inj.sig = SIGKILL;
    inj.sig_name = "KILL";
    status = inject_parse(spec, &rank);
    free(spec);
    if (status == FTW_OK && inj.point == FTW_INJECT_PULLED) {
        /* Counted by the processes that pull from the victim. */
        ftw_inject_pulled_rank = (int)rank;
        return status;
    }
    if (status == FTW_OK && inj_has_rank(world_rank)) {
        ftw_debug("armed: SIG%s at %s:%lu", inj.sig_name,
                  point_names[inj.point], inj.count);
        ftw_inject_armed = 1;
    }
    return status;
}

int ftw_inject_hit(ftw_inject_point_t point)
{
    unsigned long n;

    if (point != inj.point)
        return 0;
    n = atomic_fetch_add_explicit(&inj.calls[point], 1,
                                  memory_order_relaxed) + 1;
    if (n != inj.count)
        return 0;
    if (point == FTW_INJECT_NOMEM || point == FTW_INJECT_EXPOSE) {
        ftw_info("injecting a failure at %s:%lu", point_names[point], n);
        return 1;
    }
    ftw_info("injecting SIG%s at %s:%lu", inj.sig_name, point_names[point],
             n);
    kill(getpid(), inj.sig);
    return 1;
}

void ftw_inject_pulled_hit(int peer, int pid)
{
    unsigned long n;

    n = atomic_fetch_add_explicit(&inj.calls[FTW_INJECT_PULLED], 1,
                                  memory_order_relaxed) + 1;
    if (n != inj.count)
        return;
    ftw_info("injecting SIG%s into world rank %d (pid %d) at pulled:%lu",
             inj.sig_name, peer, pid, n);
    if (kill(pid, inj.sig) < 0) {
        ftw_warn("kill %d: %m", pid);
        return;
    }
    /* The victim is to die mid-pull: the pull goes on only once the
     * detector knows, so the puller cannot finish first.  A stopped one
     * is to be away for a while: the pull goes on at once. */
    if (inj.sig == SIGSTOP)
        return;
    for (int i = 0; i < 5000 && !ftw_detect_is_failed(peer); i++)
        usleep(1000);
}
