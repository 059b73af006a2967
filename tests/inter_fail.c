/* ftw-test: np=4 mode=ftwrap timeout=60 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * inter_fail - a process of an intercommunicator dies: each group knows
 * where, point-to-point to it fails, wildcards are disabled until
 * acknowledged, and the survivors go on talking.
 *
 * The even and the odd ranks of MPI_COMM_WORLD are joined by
 * MPI_Intercomm_create; world rank 3 (rank 1 of the odd group) is
 * SIGKILLed.  Then on the intercommunicator:
 *   - the even group's FTW_Comm_remote_group_failed is {1} and its
 *     FTW_Comm_group_failed empty; the odd group's FTW_Comm_group_failed
 *     is {1} and its FTW_Comm_remote_group_failed empty;
 *   - world rank 2's MPI_Recv from remote rank 1 fails with
 *     FTW_ERR_PROC_FAIL_STOP;
 *   - world rank 0's blocking MPI_Recv from MPI_ANY_SOURCE fails at once
 *     (wildcards are disabled; a blocking one leaves no request pending,
 *     so FTW_ERR_PROC_FAIL_STOP, as on intracommunicators), and after
 *     FTW_Comm_reenable_any_source receives world rank 1's checksummed
 *     64 KiB, with the right source.
 */
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "tap.h"

#define LEN 65536

static int group_size(MPI_Group g)
{
    int n = -1;

    MPI_Group_size(g, &n);
    return n;
}

int main(int argc, char **argv)
{
    MPI_Comm local, ic, v;
    MPI_Group g, lg, rg;
    char *buf = malloc(LEN);
    int wrank, rc, ok = 1, lrank, r0 = 0, r = -1, buf1 = 0;
    MPI_Status st;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_dup(MPI_COMM_WORLD, &v);
    MPI_Comm_set_errhandler(v, MPI_ERRORS_RETURN);
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, wrank % 2 ? 0 : 1, 7, &ic);
    MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN);
    MPI_Comm_rank(local, &lrank);
    /* On v (errors return): the victim may die before a slower rank's
     * barrier saw it complete, which then fails. */
    MPI_Barrier(v);
    if (wrank == 3)
        raise(SIGKILL);

    /* Each group's view of the failure. */
    MPI_Comm_group(ic, &lg);
    MPI_Comm_remote_group(ic, &rg);
    if (FTW_Comm_group_failed(ic, &g) != MPI_SUCCESS)
        ok = 0;
    else {
        if (wrank % 2) {
            /* Rank 1 of this group died: wait until it is known. */
            MPI_Group_free(&g);
            do {
                FTW_Comm_group_failed(ic, &g);
                MPI_Group_size(g, &r);
                if (r == 0)
                    MPI_Group_free(&g);
            } while (r == 0);
            MPI_Group_translate_ranks(g, 1, &r0, lg, &r);
            ok = ok && group_size(g) == 1 && r == 1;
        } else {
            ok = ok && group_size(g) == 0;
        }
        MPI_Group_free(&g);
    }
    if (wrank % 2 == 0) {
        /* The even group learns of its remote rank 1's death. */
        do {
            rc = FTW_Comm_remote_group_failed(ic, &g);
            MPI_Group_size(g, &r);
            if (r == 0)
                MPI_Group_free(&g);
        } while (rc == MPI_SUCCESS && r == 0);
        r = -1;
        MPI_Group_translate_ranks(g, 1, &r0, rg, &r);
        ok = ok && rc == MPI_SUCCESS && group_size(g) == 1 && r == 1;
        MPI_Group_free(&g);
    } else {
        rc = FTW_Comm_remote_group_failed(ic, &g);
        ok = ok && rc == MPI_SUCCESS && group_size(g) == 0;
        MPI_Group_free(&g);
    }
    rc = FTW_Comm_remote_group_failed(local, &g);
    ok = ok && tap_class(rc) == MPI_ERR_COMM;
    MPI_Group_free(&lg);
    MPI_Group_free(&rg);

    {
        MPI_Group failed;

        rc = FTW_Comm_validate(v, &failed);
        if (rc != MPI_SUCCESS)
            MPI_Abort(MPI_COMM_WORLD, 1);
        MPI_Group_free(&failed);
    }
    tap_plan(3);
    tap_ok_comm(v, ok, "FTW_Comm_group_failed gives the local group's "
                "failures and FTW_Comm_remote_group_failed the remote "
                "group's, in each group");

    ok = 1;
    if (wrank == 2) {
        rc = MPI_Recv(&buf1, 1, MPI_INT, 1, 3, ic, MPI_STATUS_IGNORE);
        ok = tap_class(rc) == FTW_ERR_PROC_FAIL_STOP;
    }
    tap_ok_comm(v, ok, "MPI_Recv from the dead remote rank fails with "
                "FTW_ERR_PROC_FAIL_STOP");

    ok = 1;
    if (wrank == 0) {
        rc = MPI_Recv(buf, LEN, MPI_BYTE, MPI_ANY_SOURCE, 5, ic, &st);
        ok = tap_class(rc) == FTW_ERR_PROC_FAIL_STOP;
        if (!ok)
            tap_diag("first wildcard receive: class %d", tap_class(rc));
        FTW_Comm_reenable_any_source(ic, &g);
        MPI_Group_free(&g);
        MPI_Barrier(v);
        memset(buf, 0, LEN);
        rc = MPI_Recv(buf, LEN, MPI_BYTE, MPI_ANY_SOURCE, 5, ic, &st);
        ok = ok && rc == MPI_SUCCESS && st.MPI_SOURCE == 0 &&
             tap_check(buf, LEN, 55);
        if (!ok)
            tap_diag("wildcard receives: class %d, source %d",
                     tap_class(rc), st.MPI_SOURCE);
    } else {
        MPI_Barrier(v);
        if (wrank == 1) {
            tap_fill(buf, LEN, 55);
            ok = MPI_Send(buf, LEN, MPI_BYTE, 0, 5, ic) == MPI_SUCCESS;
        }
    }
    tap_ok_comm(v, ok, "a wildcard receive on it fails while the failure "
                "is not acknowledged, then after "
                "FTW_Comm_reenable_any_source takes a checksummed 64 KiB "
                "from the live remote rank");
    MPI_Comm_free(&ic);
    MPI_Comm_free(&local);
    MPI_Comm_free(&v);
    free(buf);
    MPI_Finalize();
    return tap_status();
}
