/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * comm_create_fail - communicator creation after a process failure.
 *
 * Rank 3 leaves a barrier, sleeps 200 ms and SIGKILLs itself.  Once each
 * survivor knows of the failure, before any validate:
 *   - MPI_Comm_dup, MPI_Comm_split and MPI_Comm_create on MPI_COMM_WORLD
 *     fail at once (1 s) with FTW_ERR_PROC_FAIL_STOP on every survivor and
 *     give MPI_COMM_NULL;
 *   - MPI_Comm_create_group over {0,1,2} (its members only) works: size 3,
 *     the same rank order, MPI_Allreduce (0+1+2) and a checksummed 64 KiB
 *     MPI_Bcast on it, and MPI_Comm_dup of it (no failed process) works.
 * Then FTW_Comm_validate on MPI_COMM_WORLD gives {3}, after which
 * MPI_Comm_split works: colour rank%2, key -rank gives {2,0} (reversed)
 * and {1}, checked by size, rank and MPI_Allgather of the world ranks.
 * Ranks 1 and 2 send their verdicts to rank 0, which prints TAP (plan at
 * the end); the survivors end with MPI_Finalize.
 */
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftwrap.h"
#define MAXCHK 64            /* verdicts kept (tap.h) */
#include "tap.h"

#define NP 4
#define VICTIM 3
#define NSURV 3
#define BOUND 5.0            /* seconds a call may take after the kill */
#define AT_ONCE 1.0          /* seconds for a call that must fail at once */
#define KILL_DELAY_US 200000 /* victim: from the barrier to its death */
#define SENT (-7777)

#include "survivors.h"

#define TAG_CG 40

/* A creation call on the failed parent: FTW_ERR_PROC_FAIL_STOP at once. */
static void chk_refused(int rc, double t, MPI_Comm *nc, const char *what)
{
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, what);
    chk_time(t, AT_ONCE, what);
    chk(*nc == MPI_COMM_NULL, "%s: no communicator made", what);
    if (rc == MPI_SUCCESS && *nc != MPI_COMM_NULL)
        MPI_Comm_free(nc);
}

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 1, 2};
    MPI_Group world, sgrp, g;
    MPI_Comm nc;
    int rc, range[1][3] = {{0, NSURV - 1, 1}};
    double t0;

    if (!setup(&argc, &argv))
        return 0;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_range_incl(world, 1, range, &sgrp);

    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("barrier before the kill failed");
    if (rank == VICTIM)
        victim();
    watchdog_start(15.0);

    step = "waiting to know of the failure";
    wait_known(1 << VICTIM, BOUND);

    step = "MPI_Comm_dup before validate";
    nc = MPI_COMM_NULL;
    t0 = MPI_Wtime();
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &nc);
    chk_refused(rc, MPI_Wtime() - t0, &nc, "MPI_Comm_dup(WORLD) before "
                "validate");

    step = "MPI_Comm_split before validate";
    nc = MPI_COMM_NULL;
    t0 = MPI_Wtime();
    rc = MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &nc);
    chk_refused(rc, MPI_Wtime() - t0, &nc, "MPI_Comm_split(WORLD) before "
                "validate");

    step = "MPI_Comm_create before validate";
    nc = MPI_COMM_NULL;
    t0 = MPI_Wtime();
    rc = MPI_Comm_create(MPI_COMM_WORLD, sgrp, &nc);
    chk_refused(rc, MPI_Wtime() - t0, &nc, "MPI_Comm_create(WORLD) before "
                "validate");

    step = "MPI_Comm_create_group over the survivors";
    nc = MPI_COMM_NULL;
    t0 = MPI_Wtime();
    rc = MPI_Comm_create_group(MPI_COMM_WORLD, sgrp, TAG_CG, &nc);
    chk_class(rc, MPI_SUCCESS, "MPI_Comm_create_group(WORLD, {0,1,2})");
    chk_time(MPI_Wtime() - t0, BOUND, "MPI_Comm_create_group");
    if (rc == MPI_SUCCESS && nc != MPI_COMM_NULL) {
        int csize = -1, crank = -1;
        MPI_Comm nd = MPI_COMM_NULL;
        char *b = malloc(64 * 1024);

        MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
        MPI_Comm_size(nc, &csize);
        MPI_Comm_rank(nc, &crank);
        chk(csize == NSURV && crank == rank, "create_group: size %d, rank %d "
            "(want %d, %d)", csize, crank, NSURV, rank);
        chk_allreduce(nc, 3, "the create_group communicator");
        step = "MPI_Bcast on the create_group communicator";
        if (rank == 2)
            tap_fill(b, 64 * 1024, 64);
        else
            memset(b, 0, 64 * 1024);
        rc = MPI_Bcast(b, 64 * 1024, MPI_BYTE, 2, nc);
        chk(rc == MPI_SUCCESS && tap_check(b, 64 * 1024, 64),
            "64 KiB MPI_Bcast from 2 on the create_group communicator: %s, "
            "data %s", class_name(class_of(rc)),
            tap_check(b, 64 * 1024, 64) ? "intact" : "WRONG");
        step = "MPI_Comm_dup of the create_group communicator";
        rc = MPI_Comm_dup(nc, &nd);
        chk_class(rc, MPI_SUCCESS, "MPI_Comm_dup of the create_group "
                  "communicator");
        if (rc == MPI_SUCCESS && nd != MPI_COMM_NULL) {
            MPI_Comm_set_errhandler(nd, MPI_ERRORS_RETURN);
            chk_allreduce(nd, 3, "its dup");
            MPI_Comm_free(&nd);
        }
        free(b);
        MPI_Comm_free(&nc);
    }

    step = "FTW_Comm_validate";
    g = MPI_GROUP_NULL;
    t0 = MPI_Wtime();
    rc = FTW_Comm_validate(MPI_COMM_WORLD, &g);
    chk_time(MPI_Wtime() - t0, BOUND, "FTW_Comm_validate");
    chk_group3(rc, &g, "FTW_Comm_validate(WORLD)");

    step = "MPI_Comm_split after validate";
    nc = MPI_COMM_NULL;
    t0 = MPI_Wtime();
    rc = MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &nc);
    chk_class(rc, MPI_SUCCESS, "MPI_Comm_split(WORLD, rank%2, -rank) after "
              "validate");
    chk_time(MPI_Wtime() - t0, BOUND, "MPI_Comm_split after validate");
    if (rc == MPI_SUCCESS && nc != MPI_COMM_NULL) {
        /* colour 0: {2, 0}; colour 1: {1} */
        int csize = -1, crank = -1, all[2] = {SENT, SENT};
        int wsize = rank % 2 ? 1 : 2, wrank = rank == 0 ? 1 : 0;

        MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
        MPI_Comm_size(nc, &csize);
        MPI_Comm_rank(nc, &crank);
        chk(csize == wsize && crank == wrank, "split after validate: size "
            "%d, rank %d (want %d, %d)", csize, crank, wsize, wrank);
        step = "MPI_Allgather on the split communicator";
        rc = MPI_Allgather(&rank, 1, MPI_INT, all, 1, MPI_INT, nc);
        if (rank % 2)
            chk(rc == MPI_SUCCESS && all[0] == 1 && all[1] == SENT,
                "MPI_Allgather on split {1}: %s, [%d] (want [1])",
                class_name(class_of(rc)), all[0]);
        else
            chk(rc == MPI_SUCCESS && all[0] == 2 && all[1] == 0,
                "MPI_Allgather on split {2,0}: %s, [%d %d] (want [2 0])",
                class_name(class_of(rc)), all[0], all[1]);
        MPI_Comm_free(&nc);
    }

    MPI_Group_free(&sgrp);
    MPI_Group_free(&world);
    return finish(surv, NSURV);
}
