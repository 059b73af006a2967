/* ftw-test: np=4 mode=ftwrap timeout=60 expect-failed=3 */
/*
 * launcher_kill - a rank dies by SIGKILL; the others keep working.
 *
 * Rank 3 of 4 kills itself right after an initial barrier.  Ranks 0-2 go
 * on exchanging checksum-validated messages around a ring among
 * themselves (small and 256 KiB messages, so both the eager and the
 * rendezvous paths are used) for 2 seconds.  Ranks 1 and 2 then send their
 * verdicts to rank 0 point-to-point and rank 0 prints TAP with
 * tap_ok_local(): no collective on MPI_COMM_WORLD is possible once rank 3
 * is gone.
 *
 * The runner checks through ftwrun's report that exactly rank 3 failed
 * (signal:KILL) and ranks 0-2 exited 0.
 *
 * How the survivors end: they build a communicator of ranks 0-2 with
 * MPI_Comm_create_group (collective over the group's members only, so
 * rank 3 is not needed), meet in a barrier on it, and call MPI_Finalize,
 * which ftwrap makes return after a failure (the MPI's own would wait for
 * rank 3 forever).  A survivor that left with _exit() instead would look
 * like one more failure to the others.
 */
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

#define NP 4
#define VICTIM 3
#define NSURV 3
#define RUN_SECONDS 2.0
#define TAG_CTRL 100
#define TAG_RING 101
#define TAG_RESULT 102

static const int sizes[] = {64, 256 * 1024};
#define NSIZES ((int)(sizeof(sizes) / sizeof(sizes[0])))

static uint64_t seed_of(int iter, int src, int size)
{
    return ((uint64_t)iter << 32) ^ ((uint64_t)src << 24) ^ (uint64_t)size;
}

/* The survivors' ring.  Rank 0 decides each round whether to go on and
 * tells ranks 1 and 2, so all three run exactly the same number of rounds.
 * Returns the number of rounds in *rounds and 1 if every message arrived
 * intact and every call succeeded. */
static int ring(int rank, long *rounds)
{
    int right = (rank + 1) % NSURV, left = (rank + NSURV - 1) % NSURV;
    int maxsz = sizes[NSIZES - 1];
    char *sbuf = malloc(maxsz), *rbuf = malloc(maxsz);
    double t0 = MPI_Wtime();
    int ok = sbuf && rbuf;
    long iter;

    for (iter = 0; ok; iter++) {
        int go = 0, sz = sizes[iter % NSIZES];
        MPI_Status st;
        int n = -1;

        if (rank == 0) {
            go = MPI_Wtime() - t0 < RUN_SECONDS;
            for (int r = 1; r < NSURV; r++)
                if (MPI_Send(&go, 1, MPI_INT, r, TAG_CTRL, MPI_COMM_WORLD)
                    != MPI_SUCCESS)
                    ok = 0;
        } else if (MPI_Recv(&go, 1, MPI_INT, 0, TAG_CTRL, MPI_COMM_WORLD,
                            MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            ok = 0;
        }
        if (!ok || !go)
            break;

        tap_fill(sbuf, sz, seed_of((int)iter, rank, sz));
        memset(rbuf, 0, sz);
        if (MPI_Sendrecv(sbuf, sz, MPI_BYTE, right, TAG_RING, rbuf, sz,
                         MPI_BYTE, left, TAG_RING, MPI_COMM_WORLD, &st)
            != MPI_SUCCESS) {
            ok = 0;
            break;
        }
        MPI_Get_count(&st, MPI_BYTE, &n);
        if (n != sz || !tap_check(rbuf, sz, seed_of((int)iter, left, sz))) {
            tap_diag("round %ld: bad message from rank %d (%d bytes)", iter,
                     left, n);
            ok = 0;
        }
    }
    free(sbuf);
    free(rbuf);
    *rounds = iter;
    return ok;
}

int main(int argc, char **argv)
{
    int rank, size, ok;
    long rounds = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    tap_plan(NSURV + 2);
    if (!tap_ok(size == NP, "job has %d ranks", NP)) {
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* Everyone is up; now the victim goes. */
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("initial barrier failed");
    if (rank == VICTIM) {
        raise(SIGKILL);
        _exit(99); /* not reached */
    }

    ok = ring(rank, &rounds);

    /* Gather the verdicts on rank 0, point-to-point. */
    if (rank == 0) {
        long res[2] = {0, 0};

        tap_ok_local(ok && rounds > 0, "rank 0: %ld ring rounds intact",
                     rounds);
        for (int r = 1; r < NSURV; r++) {
            int rc = MPI_Recv(res, 2, MPI_LONG, r, TAG_RESULT, MPI_COMM_WORLD,
                              MPI_STATUS_IGNORE);

            tap_ok_local(rc == MPI_SUCCESS && res[0] && res[1] == rounds,
                         "rank %d: %ld ring rounds intact", r, res[1]);
        }
    } else {
        long res[2] = {ok, rounds};

        if (MPI_Send(res, 2, MPI_LONG, 0, TAG_RESULT, MPI_COMM_WORLD)
            != MPI_SUCCESS)
            tap_diag("cannot send result to rank 0");
    }

    /* Survivors' communicator and final barrier (see the top comment). */
    MPI_Group world, surv;
    MPI_Comm comm = MPI_COMM_NULL;
    int range[1][3] = {{0, NSURV - 1, 1}};
    int rc;

    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_range_incl(world, 1, range, &surv);
    rc = MPI_Comm_create_group(MPI_COMM_WORLD, surv, 0, &comm);
    if (rc == MPI_SUCCESS)
        rc = MPI_Barrier(comm);
    if (rank == 0)
        tap_ok_local(rc == MPI_SUCCESS, "survivors' barrier");
    else if (rc != MPI_SUCCESS)
        tap_diag("survivors' barrier failed");

    /* Ranks 1 and 2 print nothing; their exit status carries their own
     * verdict into ftwrun's report as well.  MPI_Finalize returns after
     * the failure (ftwrap's survivors' barrier, then the MPI's own or a
     * local teardown): a survivor leaving without it would look like one
     * more failure to the others. */
    if (comm != MPI_COMM_NULL)
        MPI_Comm_free(&comm);
    fflush(stdout);
    fflush(stderr);
    MPI_Finalize();
    if (rank == 0)
        return tap_status();
    return ok && rc == MPI_SUCCESS ? 0 : 1;
}
