/* ftw-test: np=5 mode=ftwrap timeout=60 link=ftwrap expect-failed=2,4 fate=2:signal:KILL fate=4:signal:KILL env=FTW_INJECT=rank=2,at=settled:1 */
/*
 * settle_kill - a process dies after the agreement of a validate, drain
 * or shrink that is to make a survivors' communicator, before the
 * confirming agreement: the survivors agree again and finish.
 *
 * Five ranks; rank 4 SIGKILLs itself after a barrier, so the call below
 * must make a communicator of the survivors.  Once 0-3 know, they call
 * OP on MPI_COMM_WORLD (validate here; settle_kill_drain.c:
 * FTW_Comm_drain_all, settle_kill_shrink.c: MPIX_Comm_shrink).  FTW_INJECT
 * kills rank 2 right after the call's first decision (which names only 4),
 * before its part in the confirming agreement.  Ranks 0, 1 and 3 must
 * return MPI_SUCCESS within 5 s, with: validate, the group {2,4}, then
 * MPI_Allreduce over MPI_COMM_WORLD = 4 and a checksummed 64 KiB
 * MPI_Bcast from rank 3; drain, a checksummed 64 KiB ring of
 * MPI_Sendrecv among 0, 1, 3 on MPI_COMM_WORLD (the failed group {2,4}
 * from FTW_Comm_validate after); shrink, a communicator of 3 in which the
 * same MPI_Allreduce and MPI_Bcast work.  Verdicts go to rank 0.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftwrap.h"
#include "tap.h"

#define NP 5
#define VICTIM 4
#define NSURV 3
#define BOUND 5.0
#define AT_ONCE 1.0
#define KILL_DELAY_US 0
#define LEN (64 * 1024)

#include "survivors.h"

#ifndef OP
#define OP 0                    /* 0 validate, 1 drain, 2 shrink */
#endif

static const char *const op_name[] = {
    "FTW_Comm_validate", "FTW_Comm_drain_all", "MPIX_Comm_shrink",
};

#define WANT_MASK ((1 << 2) | (1 << 4))

static void chk_failed_group(int rc, MPI_Group g, const char *what)
{
    int n = -1, mask = rc == MPI_SUCCESS ? world_mask_of(g, &n) : -1;

    chk(rc == MPI_SUCCESS && mask == WANT_MASK,
        "%s: %s, failed group %s (want {2,4})", what,
        class_name(class_of(rc)), mask_str(mask));
    if (rc == MPI_SUCCESS && g != MPI_GROUP_EMPTY)
        MPI_Group_free(&g);
}

/* A checksummed MPI_Bcast of LEN bytes from root over comm. */
static void chk_bcast(MPI_Comm comm, int root, int me, const char *what)
{
    char *b = malloc(LEN);
    int rc;

    step = what;
    if (me == root)
        tap_fill(b, LEN, 4242);
    else
        memset(b, 0, LEN);
    rc = MPI_Bcast(b, LEN, MPI_BYTE, root, comm);
    chk(rc == MPI_SUCCESS && tap_check(b, LEN, 4242),
        "%s: checksummed MPI_Bcast of %d bytes: %s", what, LEN,
        class_name(class_of(rc)));
    free(b);
}

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 1, 3};
    MPI_Group g = MPI_GROUP_NULL;
    MPI_Comm sc = MPI_COMM_NULL;
    int rc, n = -1;
    double t;

    if (!setup(&argc, &argv))
        return 0;
    watchdog_start(40);
    step = "MPI_Barrier";
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == VICTIM)
        victim();
    wait_known(1 << VICTIM, 5.0);

    step = op_name[OP];
    t = MPI_Wtime();
    if (OP == 0)
        rc = FTW_Comm_validate(MPI_COMM_WORLD, &g);
    else if (OP == 1)
        rc = FTW_Comm_drain_all(MPI_COMM_WORLD);
    else
        rc = MPIX_Comm_shrink(MPI_COMM_WORLD, &sc);
    t = MPI_Wtime() - t;
    /* Rank 2 does not get here. */
    chk_class(rc, MPI_SUCCESS, op_name[OP]);
    chk_time(t, BOUND, op_name[OP]);

    if (OP == 0) {
        chk_failed_group(rc, g, op_name[OP]);
        chk_allreduce(MPI_COMM_WORLD, 0 + 1 + 3, "MPI_COMM_WORLD after it");
        chk_bcast(MPI_COMM_WORLD, 3, rank, "MPI_COMM_WORLD after it");
    } else if (OP == 1) {
        int next = rank == 0 ? 1 : rank == 1 ? 3 : 0;
        int prev = rank == 0 ? 3 : rank == 1 ? 0 : 1;
        char *out = malloc(LEN), *in = malloc(LEN);

        step = "ring after the drain";
        tap_fill(out, LEN, 900 + (uint64_t)rank);
        memset(in, 0, LEN);
        rc = MPI_Sendrecv(out, LEN, MPI_BYTE, next, 5, in, LEN, MPI_BYTE,
                          prev, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        chk(rc == MPI_SUCCESS && tap_check(in, LEN, 900 + (uint64_t)prev),
            "checksummed ring of %d bytes among 0, 1, 3: %s", LEN,
            class_name(class_of(rc)));
        free(out);
        free(in);
        step = "FTW_Comm_validate after the drain";
        rc = FTW_Comm_validate(MPI_COMM_WORLD, &g);
        chk_failed_group(rc, g, "FTW_Comm_validate after the drain");
    } else {
        if (rc == MPI_SUCCESS)
            MPI_Comm_size(sc, &n);
        chk(n == NSURV, "shrunken communicator of %d (want %d)", n, NSURV);
        if (n == NSURV) {
            int srank = -1;

            MPI_Comm_set_errhandler(sc, MPI_ERRORS_RETURN);
            MPI_Comm_rank(sc, &srank);
            chk_allreduce(sc, 0 + 1 + 3, "the shrunken communicator");
            chk_bcast(sc, NSURV - 1, srank, "the shrunken communicator");
            MPI_Comm_free(&sc);
        }
    }
    return finish(surv, NSURV);
}
