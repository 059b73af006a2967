/*
 * qcheck.h - helpers the quarantine tests share.
 *
 *   q_start(...)        MPI_Init, MPI_ERRORS_RETURN on MPI_COMM_WORLD, the
 *                       rank, every rank's pid, a buffer of len bytes
 *   q_class_of(rc)      the error class of rc
 *   q_stable(buf, len)  1 if buf's checksum is the same before and after
 *                       300 ms of MPI progress (nothing writes it late)
 *   q_killer(...)       the killing rank's part: a message to rank 0
 *                       first, then SIGKILL the victim 10 ms later
 *   q_finish(...)       rank 0's end: that message arrives intact, then
 *                       finalize
 */
#ifndef FTW_TESTS_QCHECK_H
#define FTW_TESTS_QCHECK_H

#include <mpi.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tap.h"

/* The start every quarantine test shares; the job aborts if the buffer
 * cannot be had.  pids[] has one entry per rank. */
static inline char *q_start(int *argc, char ***argv, int *rank_p,
                            int pids[], size_t len)
{
    int me;
    char *buf;

    MPI_Init(argc, argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, rank_p);
    buf = malloc(len);
    if (buf == NULL) {
        fprintf(stderr, "rank %d: out of memory for %zu bytes\n", *rank_p,
                len);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    me = getpid();
    MPI_Allgather(&me, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
    return buf;
}

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

/* Send len bytes of buf to rank 0 (tag 2), which it receives after the
 * cut, then SIGKILL victim_pid 10 ms later (into the transfer) and
 * finalize; returns main's status. */
static inline int q_killer(const char *buf, int len, int victim_pid)
{
    MPI_Send(buf, len, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
    usleep(10000);
    kill(victim_pid, SIGKILL);
    MPI_Finalize();
    return 0;
}

/* Rank 0's last check and end: q_killer's message (len bytes filled
 * with seed) arrives into buf intact; big is freed.  Returns main's
 * status. */
static inline int q_finish(char *buf, int len, uint64_t seed, char *big)
{
    int rc = MPI_Recv(buf, len, MPI_BYTE, 2, 2, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);

    tap_ok_local(rc == MPI_SUCCESS && tap_check(buf, (size_t)len, seed),
                 "a later receive from another process works (checksum)");
    fflush(stdout);
    free(big);
    MPI_Finalize();
    return tap_status();
}

#endif
