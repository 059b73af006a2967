/*
 * What the benchmark programs of scripts/bench share.  Each is built alone
 * by its script; define BENCH_NAME (the program's name, for messages) and
 * a feature macro that declares clock_gettime before including this.
 *
 *   rank           this process's rank in MPI_COMM_WORLD, for messages
 *   die(fmt, ...)  "NAME: rank R: message" on stderr, then MPI_Abort(2)
 *   bench_now(c)   clock c (CLOCK_MONOTONIC, CLOCK_REALTIME) in seconds
 *   bench_sleep(s) sleep s seconds (nothing if s <= 0), signals or not
 *   bench_median(v, n) the median of v[0..n) (sorts v)
 */
#ifndef FTW_BENCH_H
#define FTW_BENCH_H

#include <mpi.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int rank;

__attribute__((format(printf, 1, 2), noreturn))
static inline void die(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fprintf(stderr, BENCH_NAME ": rank %d: ", rank);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

static inline double bench_now(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void bench_sleep(double s)
{
    struct timespec ts;

    if (!(s > 0))
        return;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* The median of v[0..n) (sorts v). */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), bench_cmp_double);
    return v[n / 2];
}

#endif
