/* ftw-test: np=4 mode=ftwrap timeout=60 link=ftwrap expect-failed=3 fate=3:signal:KILL env=FTW_INJECT=rank=3,at=dup:1 */
/*
 * comm_dup_inside - a member dies after ftwrap's checks, right before
 * the MPI's own duplicate in MPI_Comm_dup: the others, inside the MPI's
 * nonblocking duplicate, give it up instead of waiting for good.
 *
 * Four ranks call MPI_Comm_dup(MPI_COMM_WORLD) (MPI_ERRORS_RETURN);
 * FTW_INJECT kills rank 3 once it is past ftwrap's barrier, before the
 * MPI's duplicate.  On ranks 0-2 MPI_Comm_dup must return
 * FTW_ERR_PROC_FAIL_STOP within 5 s and MPI_COMM_NULL (the creation's
 * agreement makes that the answer everywhere).  Then FTW_Comm_validate
 * gives {3}, MPI_Comm_split makes the survivors' communicator, and an
 * MPI_Comm_dup of that works (on Open MPI the abandoned duplicate no
 * longer holds up the process's context ids), with a checksummed 256 KiB
 * MPI_Bcast and an MPI_Allreduce on the duplicate.  Verdicts go to rank 0.
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
#include "tap.h"

#define NP 4
#define VICTIM 3
#define NSURV 3
#define BOUND 5.0
#define AT_ONCE 1.0
#define KILL_DELAY_US 0
#define LEN (256 * 1024)

#include "survivors.h"

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 1, 2};
    MPI_Comm d = MPI_COMM_NULL, s = MPI_COMM_NULL, d2 = MPI_COMM_NULL;
    MPI_Group g;
    char *buf = malloc(LEN);
    int rc, n = -1, srank = -1;
    double t;

    if (!setup(&argc, &argv))
        return 0;
    (void)victim;               /* FTW_INJECT kills rank 3 */
    watchdog_start(40);
    step = "MPI_Barrier";
    MPI_Barrier(MPI_COMM_WORLD);

    step = "MPI_Comm_dup (rank 3 dies before the MPI's duplicate)";
    t = MPI_Wtime();
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &d);
    t = MPI_Wtime() - t;
    /* Rank 3 does not get here. */
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP,
              "MPI_Comm_dup with a member dead inside it");
    chk_time(t, BOUND, "MPI_Comm_dup");
    chk(d == MPI_COMM_NULL, "no communicator handed out");
    if (rc == MPI_SUCCESS && d != MPI_COMM_NULL)
        MPI_Comm_free(&d);

    step = "FTW_Comm_validate";
    rc = FTW_Comm_validate(MPI_COMM_WORLD, &g);
    chk_group3(rc, &g, "FTW_Comm_validate(MPI_COMM_WORLD)");

    step = "MPI_Comm_split";
    rc = MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &s);
    chk_class(rc, MPI_SUCCESS, "MPI_Comm_split of the survivors");
    step = "MPI_Comm_dup of the survivors' communicator";
    t = MPI_Wtime();
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_dup(s, &d2);
    t = MPI_Wtime() - t;
    chk_class(rc, MPI_SUCCESS, "MPI_Comm_dup of the survivors' communicator");
    chk_time(t, BOUND, "that MPI_Comm_dup");
    if (rc == MPI_SUCCESS) {
        MPI_Comm_size(d2, &n);
        MPI_Comm_rank(d2, &srank);
        MPI_Comm_set_errhandler(d2, MPI_ERRORS_RETURN);
    }
    chk(n == NSURV, "the duplicate has %d members (want %d)", n, NSURV);
    if (n == NSURV) {
        step = "MPI_Bcast on the duplicate";
        if (srank == 1)
            tap_fill(buf, LEN, 31337);
        else
            memset(buf, 0, LEN);
        rc = MPI_Bcast(buf, LEN, MPI_BYTE, 1, d2);
        chk(rc == MPI_SUCCESS && tap_check(buf, LEN, 31337),
            "checksummed MPI_Bcast of %d bytes on the duplicate: %s", LEN,
            class_name(class_of(rc)));
        chk_allreduce(d2, 0 + 1 + 2, "the duplicate");
        MPI_Comm_free(&d2);
    }
    if (s != MPI_COMM_NULL)
        MPI_Comm_free(&s);
    free(buf);
    return finish(surv, NSURV);
}
