/*
 * qcheck.h - helpers the quarantine tests share.
 *
 *   q_class_of(rc)      the error class of rc
 *   q_stable(buf, len)  1 if buf's checksum is the same before and after
 *                       300 ms of MPI progress (nothing writes it late)
 */
#ifndef FTW_TESTS_QCHECK_H
#define FTW_TESTS_QCHECK_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "tap.h"

static inline int q_class_of(int rc)
{
    int cls;

    MPI_Error_class(rc, &cls);
    return cls;
}

static inline int q_stable(const char *buf, size_t len)
{
    uint64_t before = tap_fnv1a(buf, len), after;
    double t0 = MPI_Wtime();
    int flag;

    while (MPI_Wtime() - t0 < 0.3)
        MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_SELF, &flag,
                   MPI_STATUS_IGNORE);
    after = tap_fnv1a(buf, len);
    if (before != after)
        tap_diag("checksum %llx became %llx", (unsigned long long)before,
                 (unsigned long long)after);
    return before == after;
}

#endif
