/*
 * tap.h - a TAP emitter for MPI test programs.
 *
 * Every rank evaluates each check; rank 0 prints one TAP line per check
 * after an MPI_Allreduce has combined the ranks' verdicts, so a check is
 * "ok" only when it held on every rank.  tap_ok_local() prints without
 * communication, from rank 0 only, for checks made where collectives are
 * not possible (after a process failure, say).
 */
#ifndef FTW_TAP_H
#define FTW_TAP_H

#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include "ftwrap.h"

static int tap_count_;
static int tap_failed_;
static int tap_rank_ = -1;

static inline int tap_rank(void)
{
    if (tap_rank_ < 0)
        MPI_Comm_rank(MPI_COMM_WORLD, &tap_rank_);
    return tap_rank_;
}

static inline void tap_plan(int n)
{
    if (tap_rank() == 0) {
        printf("1..%d\n", n);
        fflush(stdout);
    }
}

static inline void tap_vline_(int ok, const char *fmt, va_list ap)
{
    tap_count_++;
    if (!ok)
        tap_failed_++;
    if (tap_rank() != 0)
        return;
    printf("%sok %d - ", ok ? "" : "not ", tap_count_);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
}

/* Collective over comm: ok on rank 0 only if cond held on every rank. */
static inline int tap_ok_comm(MPI_Comm comm, int cond, const char *fmt, ...)
{
    int all = 0;
    va_list ap;

    cond = !!cond;
    if (MPI_Allreduce(&cond, &all, 1, MPI_INT, MPI_LAND, comm) != MPI_SUCCESS)
        all = 0;
    va_start(ap, fmt);
    tap_vline_(all, fmt, ap);
    va_end(ap);
    return all;
}

#define tap_ok(cond, ...) tap_ok_comm(MPI_COMM_WORLD, (cond), __VA_ARGS__)

/* Local: rank 0's own verdict, no communication. */
static inline int tap_ok_local(int cond, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    tap_vline_(!!cond, fmt, ap);
    va_end(ap);
    return !!cond;
}

/* Print a diagnostic line from any rank (TAP ignores "#" lines). */
static inline void tap_diag(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "# [rank %d] ", tap_rank());
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
}

/* Exit status for main(): nonzero if any check failed on this rank. */
static inline int tap_status(void)
{
    return tap_failed_ ? 1 : 0;
}

/* Checksum helpers: fill a buffer with a pattern derived from a seed and
 * verify it, so corruption anywhere in a message is caught. */
static inline uint8_t tap_pattern_byte(uint64_t seed, size_t i)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;

    x ^= x >> 31;
    return (uint8_t)(x ^ (x >> 17));
}

static inline void tap_fill(void *buf, size_t len, uint64_t seed)
{
    uint8_t *p = buf;

    for (size_t i = 0; i < len; i++)
        p[i] = tap_pattern_byte(seed, i);
}

/* Returns 1 if buf holds exactly the pattern tap_fill() wrote. */
static inline int tap_check(const void *buf, size_t len, uint64_t seed)
{
    const uint8_t *p = buf;

    for (size_t i = 0; i < len; i++)
        if (p[i] != tap_pattern_byte(seed, i))
            return 0;
    return 1;
}

/* A status that describes nothing (a null or inactive request's):
 * source MPI_ANY_SOURCE, tag MPI_ANY_TAG, count 0. */
static inline int tap_status_empty(const MPI_Status *st)
{
    int count = -1;

    MPI_Get_count(st, MPI_BYTE, &count);
    return st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG &&
           count == 0;
}

/* 64-bit FNV-1a over a buffer. */
static inline uint64_t tap_fnv1a(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The error class of a return code (MPI_SUCCESS stays itself). */
static inline int tap_class(int rc)
{
    int cls = rc;

    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    return cls;
}

/* 1 if rc is MPI_SUCCESS; otherwise says which call failed, and how. */
static inline int mpi_ok(int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;

    if (rc == MPI_SUCCESS)
        return 1;
    MPI_Error_string(rc, msg, &len);
    tap_diag("%s failed: %s", what, msg);
    return 0;
}

/* The error class of code: MPI_SUCCESS for it, -1 if MPI_Error_class
 * fails. */
static inline int class_of(int code)
{
    int cls = -1;

    if (code == MPI_SUCCESS)
        return MPI_SUCCESS;
    if (MPI_Error_class(code, &cls) != MPI_SUCCESS)
        return -1;
    return cls;
}

/* A name for an error class, for messages. */
static inline const char *class_name(int cls)
{
    static char buf[4][32];
    static int next;
    char *b;

    switch (cls) {
    case MPI_SUCCESS: return "MPI_SUCCESS";
    case MPI_ERR_OTHER: return "MPI_ERR_OTHER";
    case MPI_ERR_ARG: return "MPI_ERR_ARG";
    case MPI_ERR_COMM: return "MPI_ERR_COMM";
    case MPI_ERR_RANK: return "MPI_ERR_RANK";
    case MPI_ERR_PENDING: return "MPI_ERR_PENDING";
    case MPI_ERR_IN_STATUS: return "MPI_ERR_IN_STATUS";
    case MPI_ERR_TRUNCATE: return "MPI_ERR_TRUNCATE";
    case FTW_ERR_PROC_FAIL_STOP: return "FTW_ERR_PROC_FAIL_STOP";
    case FTW_ERR_ANY_SOURCE_DISABLED: return "FTW_ERR_ANY_SOURCE_DISABLED";
    case FTW_ERR_DRAINED: return "FTW_ERR_DRAINED";
    case FTW_ERR_BUFFER_UNUSABLE: return "FTW_ERR_BUFFER_UNUSABLE";
    case FTW_ERR_INTERRUPTED: return "FTW_ERR_INTERRUPTED";
#ifdef MPIX_ERR_REVOKED
    case MPIX_ERR_REVOKED: return "MPIX_ERR_REVOKED";
#endif
    }
    b = buf[next++ % 4];
    snprintf(b, sizeof buf[0], "class %d", cls);
    return b;
}

/* One of ftwrap's counters (FTW_Stat_get), or -1 where ftwrap is not
 * loaded (a native run: the weak reference stays null). */
#pragma weak FTW_Stat_get
static inline long long tap_ftw_stat(const char *key)
{
    unsigned long long v = 0;

    if (FTW_Stat_get == NULL || FTW_Stat_get(key, &v) != MPI_SUCCESS)
        return -1;
    return (long long)v;
}

/* The TAP skip line of a test of ftwrap's verbs transport where verbs
 * does not pull (no RDMA device: run it in the soft-RoCE lab), printed
 * by rank 0 when usable is 0; returns !usable. */
static inline int tap_skip_unless_verbs(int usable)
{
    if (!usable && tap_rank() == 0) {
        printf("1..0 # SKIP the verbs transport does not pull here "
               "(no RDMA device? see scripts/check-verbs)\n");
        fflush(stdout);
    }
    return !usable;
}

/* Rendezvous messages this process pulled (cma and shm), or -1 natively. */
static inline long long tap_rndv_pulls(void)
{
    long long cma = tap_ftw_stat("rndv_cma"), shm = tap_ftw_stat("rndv_shm");

    return cma < 0 || shm < 0 ? -1 : cma + shm;
}

/* The survivors surv[0..nsurv) (NULL: ranks 0..nsurv-1 of comm; me is
 * this process's index) pass checksummed 64 B and 1 MiB messages around
 * their ring on comm for seconds, surv[0] deciding when to stop (tags
 * tag_ctrl, tag_ring).  The rounds completed, or -1 after a failed call
 * or a bad message (said with tap_diag). */
static inline long tap_ring(MPI_Comm comm, const int *surv, int nsurv,
                            int me, double seconds, int tag_ctrl,
                            int tag_ring)
{
    static const int sizes[] = {64, 1 << 20};
#define TAP_SURV_(i) (surv != NULL ? surv[(i)] : (i))
    int right = TAP_SURV_((me + 1) % nsurv);
    int left = TAP_SURV_((me + nsurv - 1) % nsurv);
    char *sbuf = malloc(1 << 20), *rbuf = malloc(1 << 20);
    double t0 = MPI_Wtime();
    int ok = sbuf && rbuf;
    long iter;

    for (iter = 0; ok; iter++) {
        int go = 0, sz = sizes[iter % 2], n = -1, rc;
        uint64_t seed = ((uint64_t)iter << 32) ^ (uint64_t)sz;
        MPI_Status st;

        if (me == 0) {
            go = MPI_Wtime() - t0 < seconds;
            for (int k = 1; k < nsurv; k++)
                if (MPI_Send(&go, 1, MPI_INT, TAP_SURV_(k), tag_ctrl, comm))
                    ok = 0;
        } else if (MPI_Recv(&go, 1, MPI_INT, TAP_SURV_(0), tag_ctrl, comm,
                            MPI_STATUS_IGNORE)) {
            ok = 0;
        }
        if (!ok || !go)
            break;
        tap_fill(sbuf, sz, seed ^ ((uint64_t)TAP_SURV_(me) << 24));
        memset(rbuf, 0, sz);
        rc = MPI_Sendrecv(sbuf, sz, MPI_BYTE, right, tag_ring, rbuf, sz,
                          MPI_BYTE, left, tag_ring, comm, &st);
        if (rc != MPI_SUCCESS) {
            tap_diag("ring round %ld: MPI_Sendrecv: %s", iter,
                     class_name(class_of(rc)));
            ok = 0;
            break;
        }
        MPI_Get_count(&st, MPI_BYTE, &n);
        if (n != sz || !tap_check(rbuf, sz, seed ^ ((uint64_t)left << 24))) {
            tap_diag("ring round %ld: bad message from rank %d (%d bytes)",
                     iter, left, n);
            ok = 0;
        }
    }
#undef TAP_SURV_
    free(sbuf);
    free(rbuf);
    return ok ? iter : -1;
}

/* ---- verdicts kept for later ---------------------------------------------
 * After a process failure collectives are off: a failure test keeps each
 * process's verdicts (chk) in chks[] and sends them point-to-point to one
 * survivor, which prints them as TAP.  A test may define MAXCHK (the most
 * verdicts kept; default 160) before including this header; verdicts past
 * it are not kept, but a failed one still counts in nchk_failed. */
#ifndef MAXCHK
#define MAXCHK 160
#endif

typedef struct {
    int ok;
    char what[124];
} chk_t;

static chk_t chks[MAXCHK] __attribute__((unused));
static int nchk __attribute__((unused));
static int nchk_failed __attribute__((unused));

/* Keep the verdict cond, described by fmt; returns it (0 or 1). */
static inline int chk(int cond, const char *fmt, ...)
{
    va_list ap;

    if (!cond)
        nchk_failed++;
    if (nchk == MAXCHK)
        return !!cond;
    chks[nchk].ok = !!cond;
    va_start(ap, fmt);
    vsnprintf(chks[nchk].what, sizeof chks[nchk].what, fmt, ap);
    va_end(ap);
    if (!cond)
        tap_diag("FAILED: %s", chks[nchk].what);
    nchk++;
    return !!cond;
}

/* Seconds on the monotonic clock. */
static inline double tap_now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Compute, out of MPI, for s seconds (a victim that is busy, not in a
 * call, when it dies). */
static inline void tap_spin(double s)
{
    double t0 = tap_now();
    volatile unsigned long spin = 0;

    while (tap_now() - t0 < s)
        spin++;
}

/* The state letter of process pid (the field after the command in
 * /proc/pid/stat: R, S, T for stopped, Z...), or 0 if it cannot be read. */
static inline char tap_proc_state(int pid)
{
    char path[64], line[512], *p;
    FILE *f;
    char st = 0;

    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    if (fgets(line, sizeof line, f) != NULL &&
        (p = strrchr(line, ')')) != NULL && p[1] == ' ')
        st = p[2];
    fclose(f);
    return st;
}

/* This process's threads' stacks, to stderr as TAP comments (gdb, when
 * installed): what a watchdog prints before it ends a process stuck in a
 * call, so that the log says where.  Called from the watchdog's thread
 * while the others stay stuck. */
static inline void tap_stacks(void)
{
    char cmd[256];

    snprintf(cmd, sizeof(cmd),
             "command -v gdb >/dev/null && timeout 20 gdb -batch -nx -p %d "
             "-ex 'thread apply all bt 30' 2>/dev/null | "
             "grep -E '^(Thread|#[0-9])' | head -200 | sed 's/^/#   /' >&2",
             (int)getpid());
    fflush(stderr);
    if (system(cmd) == -1)
        fprintf(stderr, "#   (no stacks: the shell could not start)\n");
}

/* Run a job of exactly np processes: 0 (after printing a TAP skip line
 * and finalizing) for any other size. */
static inline int tap_need_size(int np)
{
    int size = 0;

    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size == np)
        return 1;
    if (tap_rank() == 0)
        printf("1..0 # SKIP needs %d processes\n", np);
    MPI_Finalize();
    return 0;
}

/* Run only on a host of at least n CPUs: 0 (after printing a TAP skip
 * line saying why and finalizing) on a smaller one. */
static inline int tap_need_cpus(long n, const char *why)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) >= n)
        return 1;
    if (tap_rank() == 0)
        printf("1..0 # SKIP needs %ld CPUs %s\n", n, why);
    MPI_Finalize();
    return 0;
}

/* Run only where MPI_Init_thread granted MPI_THREAD_MULTIPLE: 0 (after
 * printing a TAP skip line and finalizing) for a lower level. */
static inline int tap_need_multiple(int provided)
{
    if (provided >= MPI_THREAD_MULTIPLE)
        return 1;
    if (tap_rank() == 0)
        printf("1..0 # SKIP MPI_THREAD_MULTIPLE not granted (%d)\n",
               provided);
    MPI_Finalize();
    return 0;
}

/* The start failure tests share: a job of exactly np processes (else 0,
 * as tap_need_size), errors returned on MPI_COMM_WORLD, a barrier, then
 * world rank victim SIGKILLs itself.  1 on the others, *rank_p their
 * rank. */
static inline int tap_need_victim(int np, int victim, int *rank_p)
{
    if (!tap_need_size(np))
        return 0;
    MPI_Comm_rank(MPI_COMM_WORLD, rank_p);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);
    if (*rank_p == victim)
        raise(SIGKILL);
    return 1;
}

#endif /* FTW_TAP_H */
