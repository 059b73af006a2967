/* ftw-test: np=3 mode=ftwrap timeout=60 mpi=openmpi */
/*
 * spawn_preload - a program that gets ftwrap only by LD_PRELOAD (ftwrun;
 * this test does not link it) spawns processes that run under ftwrap too,
 * so their failures are errors in the parents, not hangs.
 *
 * Three ranks spawn one copy of this program over MPI_COMM_WORLD, with a
 * user info that sets "env" to FTW_SPAWN_TEST=1 (it must reach the child
 * as well).  Asserted:
 *   1. MPI_Comm_spawn returns within 10 s (ftwrap waits 30 s for a child
 *      that makes no exchange with it);
 *   2. the child finds ftwrap loaded (FTW_Comm_validate resolves) and
 *      FTW_SPAWN_TEST=1 in its environment, and sends both facts and a
 *      checksummed 64 KiB block to parent rank 0, which checks them;
 *   3. the child then SIGKILLs itself; every parent's MPI_Recv from it on
 *      the intercommunicator (errors return) fails instead of hanging;
 *   4. MPI_Comm_free of the intercommunicator returns.
 * (mpi=openmpi: Debian's MPICH 4.0.2 fails MPI_Comm_spawn without ftwrap
 * too.)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

#define LEN 65536

int main(int argc, char **argv)
{
    MPI_Comm parent, inter;
    MPI_Info info;
    char *buf = malloc(LEN);
    int rank, rc, ok, facts[2] = { 0, 0 }, errs[1];
    double t0;

    MPI_Init(&argc, &argv);
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        const char *v = getenv("FTW_SPAWN_TEST");

        facts[0] = dlsym(RTLD_DEFAULT, "FTW_Comm_validate") != NULL;
        facts[1] = v != NULL && strcmp(v, "1") == 0;
        tap_fill(buf, LEN, 77);
        MPI_Send(facts, 2, MPI_INT, 0, 1, parent);
        MPI_Send(buf, LEN, MPI_BYTE, 0, 2, parent);
        /* Rank 0 knows the data arrived before the death. */
        MPI_Recv(facts, 1, MPI_INT, 0, 3, parent, MPI_STATUS_IGNORE);
        raise(SIGKILL);
    }

    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Info_create(&info);
    MPI_Info_set(info, "env", "FTW_SPAWN_TEST=1");
    t0 = MPI_Wtime();
    rc = MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, info, 0, MPI_COMM_WORLD,
                        &inter, errs);
    t0 = MPI_Wtime() - t0;
    MPI_Info_free(&info);
    if (rc != MPI_SUCCESS) {
        tap_diag("MPI_Comm_spawn: %d", rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    tap_plan(4);
    tap_ok(t0 < 10.0, "MPI_Comm_spawn returns in %.1f s, not after "
           "ftwrap's 30 s wait for a child without it", t0);

    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    ok = 1;
    if (rank == 0) {
        memset(buf, 0, LEN);
        rc = MPI_Recv(facts, 2, MPI_INT, 0, 1, inter, MPI_STATUS_IGNORE);
        rc |= MPI_Recv(buf, LEN, MPI_BYTE, 0, 2, inter, MPI_STATUS_IGNORE);
        ok = rc == MPI_SUCCESS && facts[0] && facts[1] &&
             tap_check(buf, LEN, 77);
        if (!ok)
            tap_diag("child: ftwrap %d, FTW_SPAWN_TEST %d, rc %d", facts[0],
                     facts[1], rc);
        MPI_Send(&ok, 1, MPI_INT, 0, 3, inter);
    }
    tap_ok(ok, "the child runs under ftwrap with the program's own \"env\" "
           "too, and its checksummed block arrives");

    rc = MPI_Recv(buf, 1, MPI_BYTE, 0, 4, inter, MPI_STATUS_IGNORE);
    tap_ok(rc != MPI_SUCCESS, "a receive from the child that died fails "
           "instead of hanging (%d)", rc);
    tap_ok(MPI_Comm_free(&inter) == MPI_SUCCESS && inter == MPI_COMM_NULL,
           "MPI_Comm_free of the intercommunicator returns");
    free(buf);
    MPI_Finalize();
    return tap_status();
}
