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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#include <string.h>

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

#endif /* FTW_TAP_H */
