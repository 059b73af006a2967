/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap */
/*
 * ulfm_revoke - MPIX_Comm_revoke reaches processes blocked in calls on
 * the communicator, and every later non-local call on it fails.
 *
 * On c, a duplicate of MPI_COMM_WORLD: rank 1 posts an MPI_Irecv from
 * rank 3 and then blocks in an MPI_Recv from rank 2; rank 2 blocks in an
 * MPI_Recv from rank 0; rank 3 blocks in an MPI_Bcast from root 0.  No
 * message is ever sent.  Rank 0 waits 300 ms and calls MPIX_Comm_revoke
 * (which must return at once).  Then, on every rank: the blocked call
 * returns MPIX_ERR_REVOKED within 5 s; MPI_Wait on rank 1's Irecv gives
 * MPIX_ERR_REVOKED; MPIX_Comm_is_revoked gives 1; MPI_Send, MPI_Barrier,
 * MPI_Iallreduce and MPI_Comm_dup on c fail with MPIX_ERR_REVOKED at
 * once; MPI_Error_string names the class; MPIX_Comm_agree on the revoked
 * c still works (flags 0xff minus bit rank: AND 0xf0); MPIX_Comm_shrink
 * of c gives a communicator of all 4 ranks on which MPI_Allreduce (sum of
 * ranks, 6) and a checksummed 64 KiB MPI_Bcast work; MPI_COMM_WORLD is
 * unaffected.  Bad input: MPIX_Comm_revoke(MPI_COMM_NULL) is
 * MPI_ERR_COMM; MPIX_Comm_is_revoked with a NULL flag is MPI_ERR_ARG.
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
#define MAXCHK 64            /* verdicts kept (tap.h) */
#include "tap.h"

#define NP 4
#define VICTIM 3
#define NSURV 4
#define BOUND 5.0
#define AT_ONCE 1.0
#define KILL_DELAY_US 0

#include "survivors.h"

/* The call each rank blocks in until the revocation reaches it. */
static void blocked_call(MPI_Comm c)
{
    int buf[4] = {0}, rc = MPI_SUCCESS;
    double t0 = MPI_Wtime();
    MPI_Request pend = MPI_REQUEST_NULL;

    step = "blocked call";
    if (rank == 0) {
        usleep(300000);
        rc = MPIX_Comm_revoke(c);
        chk_class(rc, MPI_SUCCESS, "rank 0: MPIX_Comm_revoke");
        chk_time(MPI_Wtime() - t0 - 0.3, AT_ONCE, "MPIX_Comm_revoke");
        return;
    }
    if (rank == 1) {
        MPI_Irecv(buf + 2, 1, MPI_INT, 3, 7, c, &pend);
        rc = MPI_Recv(buf, 1, MPI_INT, 2, 5, c, MPI_STATUS_IGNORE);
    } else if (rank == 2) {
        rc = MPI_Recv(buf, 1, MPI_INT, 0, 5, c, MPI_STATUS_IGNORE);
    } else {
        rc = MPI_Bcast(buf, 4, MPI_INT, 0, c);
    }
    chk_class(rc, MPIX_ERR_REVOKED, rank == 3 ? "MPI_Bcast blocked on c"
                                              : "MPI_Recv blocked on c");
    chk_time(MPI_Wtime() - t0, BOUND, "the blocked call");
    if (rank == 1) {
        rc = MPI_Wait(&pend, MPI_STATUS_IGNORE);
        chk_class(rc, MPIX_ERR_REVOKED, "MPI_Wait on an MPI_Irecv posted "
                  "before the revocation");
    }
}

/* After the revocation: non-local calls fail at once. */
static void after_revoke(MPI_Comm c)
{
    int flag = -1, v = 1, w = 0, rc, len = 0;
    char text[MPI_MAX_ERROR_STRING] = "";
    double t0 = MPI_Wtime();
    MPI_Request req;
    MPI_Comm d = MPI_COMM_NULL;

    step = "after revoke";
    rc = MPIX_Comm_is_revoked(c, &flag);
    chk(rc == MPI_SUCCESS && flag == 1, "MPIX_Comm_is_revoked: %d (want 1)",
        flag);
    rc = MPI_Send(&v, 1, MPI_INT, (rank + 1) % NP, 9, c);
    chk_class(rc, MPIX_ERR_REVOKED, "MPI_Send on revoked c");
    MPI_Error_string(rc, text, &len);
    chk(strstr(text, "REVOKED") != NULL, "MPI_Error_string: '%.60s'", text);
    rc = MPI_Barrier(c);
    chk_class(rc, MPIX_ERR_REVOKED, "MPI_Barrier on revoked c");
    rc = MPI_Iallreduce(&v, &w, 1, MPI_INT, MPI_SUM, c, &req);
    chk_class(rc, MPIX_ERR_REVOKED, "MPI_Iallreduce on revoked c");
    rc = MPI_Comm_dup(c, &d);
    chk_class(rc, MPIX_ERR_REVOKED, "MPI_Comm_dup of revoked c");
    chk_time(MPI_Wtime() - t0, AT_ONCE, "the calls on revoked c");
}

/* Agree and shrink work on a revoked communicator. */
static void agree_shrink(MPI_Comm c)
{
    int flag = 0xff & ~(1 << rank), rc, size = -1;
    char *big = malloc(65536);
    MPI_Comm s = MPI_COMM_NULL;

    step = "MPIX_Comm_agree on revoked c";
    rc = MPIX_Comm_agree(c, &flag);
    chk(rc == MPI_SUCCESS && flag == 0xf0, "MPIX_Comm_agree on revoked c: "
        "%s, flag 0x%x (want 0xf0)", class_name(class_of(rc)), flag);
    step = "MPIX_Comm_shrink on revoked c";
    rc = MPIX_Comm_shrink(c, &s);
    if (rc == MPI_SUCCESS)
        MPI_Comm_size(s, &size);
    chk(rc == MPI_SUCCESS && size == NP, "MPIX_Comm_shrink of revoked c: "
        "%s, size %d (want %d)", class_name(class_of(rc)), size, NP);
    if (rc != MPI_SUCCESS)
        return;
    chk_allreduce(s, 0 + 1 + 2 + 3, "shrunk c");
    if (rank == 2)
        tap_fill(big, 65536, 77);
    else
        memset(big, 0, 65536);
    rc = MPI_Bcast(big, 65536, MPI_BYTE, 2, s);
    chk(rc == MPI_SUCCESS && tap_check(big, 65536, 77), "MPI_Bcast of "
        "64 KiB on the shrunk c: %s, data %s", class_name(class_of(rc)),
        tap_check(big, 65536, 77) ? "intact" : "WRONG");
    free(big);
    MPI_Comm_free(&s);
}

int main(int argc, char **argv)
{
    static const int all[NP] = {0, 1, 2, 3};
    MPI_Comm c;
    int flag = 0, rc;

    (void)victim;
    if (!setup(&argc, &argv))
        return 0;
    watchdog_start(30);
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);
    blocked_call(c);
    MPI_Barrier(MPI_COMM_WORLD);
    after_revoke(c);
    agree_shrink(c);
    chk_allreduce(MPI_COMM_WORLD, 6, "MPI_COMM_WORLD (not revoked)");
    rc = MPIX_Comm_revoke(MPI_COMM_NULL);
    chk_class(rc, MPI_ERR_COMM, "MPIX_Comm_revoke(MPI_COMM_NULL)");
    rc = MPIX_Comm_is_revoked(MPI_COMM_WORLD, NULL);
    chk_class(rc, MPI_ERR_ARG, "MPIX_Comm_is_revoked with a NULL flag");
    rc = MPIX_Comm_is_revoked(MPI_COMM_WORLD, &flag);
    chk(rc == MPI_SUCCESS && flag == 0, "MPI_COMM_WORLD not revoked: %d",
        flag);
    MPI_Comm_free(&c);
    return finish(all, NP);
}
