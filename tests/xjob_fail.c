/* ftw-test: np=3 mode=ftwrap timeout=90 link=ftwrap mpi=openmpi */
/*
 * xjob_fail - a process of another job dies: the survivors of both jobs
 * get errors, never hangs, and recover as ULFM programs do (ULFM's
 * api/revshrinkkillrecover pattern).
 *
 * Three ranks spawn two processes of this program and merge the spawn's
 * intercommunicator into m (ranks 0-2 the parents, 3-4 the children).  A
 * checksummed 256 KiB MPI_Bcast from child rank 3 goes over m first.
 * Then child rank 4 SIGKILLs itself, and on m:
 *   - rank 0's MPI_Recv from rank 4 fails with MPIX_ERR_PROC_FAILED, and
 *     MPI_Barrier with MPIX_ERR_PROC_FAILED on every survivor (either may
 *     fail with MPIX_ERR_REVOKED where the revocation below came first);
 *   - rank 1 revokes m: the others (of both jobs), blocked in receives
 *     nobody sends, get MPIX_ERR_REVOKED;
 *   - MPIX_Comm_shrink(m) gives both jobs' survivors a communicator of 4
 *     on which MPI_Allreduce, a checksummed 256 KiB MPI_Bcast from the
 *     child and MPIX_Comm_agree work;
 *   - MPI_Comm_disconnect of the spawn's intercommunicator, on both
 *     sides, fails with MPIX_ERR_PROC_FAILED instead of waiting for the
 *     dead child, and frees the handle.
 * The verdicts are printed over the shrunken communicator by parent 0.
 * (mpi=openmpi: Debian's MPICH 4.0.2 fails MPI_Comm_spawn without ftwrap
 * too.)
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

#define LEN (256 * 1024)

/* The rank of m that dies: the last child (xjob_fail_parent.c: the last
 * parent). */
#ifndef XJOB_VICTIM
#define XJOB_VICTIM(msize) ((msize) - 1)
#endif

/* Everything after the merge; ic: the spawn's intercommunicator. */
static void run(MPI_Comm ic, int child)
{
    MPI_Comm m, s = MPI_COMM_NULL;
    char *big = malloc(LEN);
    int rank, rc, buf = 0, recv_failed = 1, revoked = 1, bar, sum = -1;
    int flag, srank = -1, ssize = 0, disc, msize, first_ok, victim;

    MPI_Intercomm_merge(ic, child, &m);
    MPI_Comm_set_errhandler(m, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m, &rank);
    MPI_Comm_size(m, &msize);
    if (rank == msize - 2)
        tap_fill(big, LEN, 77);
    else
        memset(big, 0, LEN);
    rc = MPI_Bcast(big, LEN, MPI_BYTE, msize - 2, m);
    first_ok = rc == MPI_SUCCESS && tap_check(big, LEN, 77);
    MPI_Barrier(m);
    victim = XJOB_VICTIM(msize);
    if (rank == victim)
        raise(SIGKILL);

    if (rank == 0) {
        rc = MPI_Recv(&buf, 1, MPI_INT, victim, 5, m, MPI_STATUS_IGNORE);
        recv_failed = tap_class(rc) == MPIX_ERR_PROC_FAILED ||
                      tap_class(rc) == MPIX_ERR_REVOKED;
        if (!recv_failed)
            tap_diag("MPI_Recv from the dead process: class %d",
                     tap_class(rc));
    }
    /* Rank 1 may revoke m before a slower member saw the failure: its
     * receive or barrier fails as revoked then. */
    rc = MPI_Barrier(m);
    bar = tap_class(rc) == MPIX_ERR_PROC_FAILED ||
          (rank != 1 && tap_class(rc) == MPIX_ERR_REVOKED);
    if (!bar)
        tap_diag("MPI_Barrier at rank %d of m: class %d", rank,
                 tap_class(rc));
    if (rank == 1) {
        MPIX_Comm_revoke(m);
    } else {
        rc = MPI_Recv(&buf, 1, MPI_INT, 1, 6, m, MPI_STATUS_IGNORE);
        revoked = tap_class(rc) == MPIX_ERR_REVOKED;
    }

    rc = MPIX_Comm_shrink(m, &s);
    if (rc != MPI_SUCCESS) {
        tap_diag("MPIX_Comm_shrink: %d", rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_set_errhandler(s, MPI_ERRORS_RETURN);
    MPI_Comm_rank(s, &srank);
    MPI_Comm_size(s, &ssize);
    tap_plan(9);
    tap_ok_comm(s, first_ok, "a checksummed 256 KiB MPI_Bcast from a child "
                "over the merged communicator of both jobs");
    tap_ok_comm(s, recv_failed, "MPI_Recv from the dead process fails "
                "with MPIX_ERR_PROC_FAILED (or MPIX_ERR_REVOKED)");
    tap_ok_comm(s, bar, "MPI_Barrier fails with MPIX_ERR_PROC_FAILED in "
                "both jobs (or MPIX_ERR_REVOKED after the revocation)");
    tap_ok_comm(s, revoked, "MPIX_Comm_revoke by a parent reaches blocked "
                "receivers in both jobs (MPIX_ERR_REVOKED)");
    tap_ok_comm(s, ssize == msize - 1 &&
                srank == (rank < victim ? rank : rank - 1),
                "MPIX_Comm_shrink gives both jobs' survivors, in order");
    rc = MPI_Allreduce(&srank, &sum, 1, MPI_INT, MPI_SUM, s);
    tap_ok_comm(s, rc == MPI_SUCCESS && sum == ssize * (ssize - 1) / 2,
                "MPI_Allreduce over the shrunken communicator");
    if (srank == ssize - 1)
        tap_fill(big, LEN, 78);
    else
        memset(big, 0, LEN);
    rc = MPI_Bcast(big, LEN, MPI_BYTE, ssize - 1, s);
    tap_ok_comm(s, rc == MPI_SUCCESS && tap_check(big, LEN, 78),
                "a checksummed 256 KiB MPI_Bcast from the child over it");
    flag = srank == ssize - 1 ? 0x3 : 0x6;
    rc = MPIX_Comm_agree(s, &flag);
    tap_ok_comm(s, rc == MPI_SUCCESS && flag == 0x2,
                "MPIX_Comm_agree over both jobs' survivors");
    rc = MPI_Comm_disconnect(&ic);
    disc = tap_class(rc) == MPIX_ERR_PROC_FAILED && ic == MPI_COMM_NULL;
    if (!disc)
        tap_diag("MPI_Comm_disconnect: class %d", tap_class(rc));
    tap_ok_comm(s, disc, "MPI_Comm_disconnect of the spawn's "
                "intercommunicator fails with MPIX_ERR_PROC_FAILED on both "
                "sides and frees the handle");
    /* A program that disconnects from the other job frees what it made
     * with it first (shrink's s, the merged m). */
    MPI_Comm_free(&s);
    MPI_Comm_free(&m);
    free(big);
}

int main(int argc, char **argv)
{
    MPI_Comm parent, w, ic = MPI_COMM_NULL;
    int rc;

    MPI_Init(&argc, &argv);
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        tap_rank_ = 1;          /* the parents' rank 0 prints */
        MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
        run(parent, 1);
        MPI_Finalize();
        return tap_status();
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &w);
    MPI_Comm_set_errhandler(w, MPI_ERRORS_RETURN);
    rc = MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 2, MPI_INFO_NULL, 0, w, &ic,
                        MPI_ERRCODES_IGNORE);
    if (rc != MPI_SUCCESS) {
        tap_diag("MPI_Comm_spawn: %d", rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN);
    run(ic, 0);
    MPI_Comm_free(&w);
    MPI_Finalize();
    return tap_status();
}
