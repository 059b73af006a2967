/* ftw-test: np=4 mode=ftwrap timeout=60 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * inter_validate - FTW_Comm_validate and FTW_Comm_drain_all of an
 * intercommunicator, then its collectives, MPI_Intercomm_merge and
 * MPI_Intercomm_create over the survivors.
 *
 * The even and the odd ranks of MPI_COMM_WORLD are joined by
 * MPI_Intercomm_create (ic); a checked MPI_Bcast crosses it first.  World
 * rank VICTIM (3 here: rank 1 of the odd group, the group whose lowest
 * world rank is higher; inter_validate_even.c sets 2, rank 1 of the even
 * group) is SIGKILLed.  "The full group" is the other one, "the short
 * group" the victim's.  Then:
 *   - before any validate, an MPI_Barrier on ic fails with
 *     FTW_ERR_PROC_FAIL_STOP (no hang), a send to the dead remote rank
 *     too (full group);
 *   - MPIX_Comm_agree(ic) gives each group the AND of the other group's
 *     survivors' flags, with MPIX_ERR_PROC_FAILED, then after
 *     MPIX_Comm_failure_ack(ic) without it;
 *   - FTW_Comm_validate(ic) gives every survivor the failed group {world
 *     rank VICTIM};
 *   - after it, on ic: a 64 KiB checksummed MPI_Bcast from each group's
 *     rank 0 to the other (MPI_ROOT / MPI_PROC_NULL / remote root);
 *     MPI_Allreduce gives each group the other's survivors' sum of (world
 *     rank + 1); MPI_Allgather fills the slots of the live remote ranks
 *     and leaves the dead one's untouched; a checked 64 KiB message goes
 *     from each survivor of the full group to rank 0 of the short one
 *     (wildcard receive) and back;
 *   - FTW_Comm_drain_all(ic): a pending receive of the short group's rank
 *     0 from the full group's rank 0 ends with FTW_ERR_DRAINED; a checked
 *     64 KiB message between them then arrives; a send to the dead rank
 *     fails;
 *   - MPI_Intercomm_merge(ic) gives a 3-process communicator whose
 *     MPI_Allreduce of world ranks is 0 + 1 + 2 + 3 - VICTIM;
 *   - each group validates its own communicator, and MPI_Intercomm_create
 *     over the survivors makes a new intercommunicator of remote sizes 1
 *     and 2 that carries a checked MPI_Bcast.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "tap.h"

#ifndef VICTIM
#define VICTIM 3
#endif
#define SHORT (VICTIM % 2)      /* the victim's group */
#define FULL (1 - SHORT)
#define LEN 65536
#define UNTOUCHED (-77)

static int is_fail(int rc)
{
    return tap_class(rc) == FTW_ERR_PROC_FAIL_STOP;
}

/* A bcast of a checked block from rank 0 of group from to the other. */
static int cross_bcast(MPI_Comm ic, int mine, int from, int lrank,
                       char *buf, int seed)
{
    int root, rc;

    if (mine == from)
        root = lrank == 0 ? MPI_ROOT : MPI_PROC_NULL;
    else
        root = 0;
    if (root == MPI_ROOT)
        tap_fill(buf, LEN, seed);
    else
        memset(buf, 0, LEN);
    rc = MPI_Bcast(buf, LEN, MPI_BYTE, root, ic);
    if (rc != MPI_SUCCESS)
        return 0;
    return mine == from || tap_check(buf, LEN, seed);
}

int main(int argc, char **argv)
{
    MPI_Comm local, ic, merged = MPI_COMM_NULL, ic2 = MPI_COMM_NULL, v;
    MPI_Group failed, wg;
    char *buf = malloc(LEN);
    int wrank, lrank, mine, rc, ok, val, sum = -1, n = -1, w = -1, zero = 0;
    int all[2];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_dup(MPI_COMM_WORLD, &v);
    MPI_Comm_set_errhandler(v, MPI_ERRORS_RETURN);
    mine = wrank % 2;
    MPI_Comm_split(MPI_COMM_WORLD, mine, wrank, &local);
    MPI_Comm_set_errhandler(local, MPI_ERRORS_RETURN);
    MPI_Comm_rank(local, &lrank);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, mine ? 0 : 1, 7, &ic);
    MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN);
    ok = cross_bcast(ic, mine, 0, lrank, buf, 5);
    MPI_Barrier(v);
    if (wrank == VICTIM)
        raise(SIGKILL);

    /* The death known everywhere (this validate waits for it). */
    if (FTW_Comm_validate(v, &failed) != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Group_free(&failed);
    tap_plan(11);
    tap_ok_comm(v, ok, "a checked MPI_Bcast crosses the intercommunicator "
                "before the death");

    ok = is_fail(MPI_Barrier(ic));
    if (mine == FULL)
        ok &= is_fail(MPI_Send(buf, 8, MPI_BYTE, 1, 3, ic));
    tap_ok_comm(v, ok, "after the death, MPI_Barrier on the "
                "intercommunicator and a send to the dead remote rank fail "
                "with FTW_ERR_PROC_FAIL_STOP");

    {
        int want = mine == FULL ? 0xff & ~(1 << SHORT)
                                : 0xff & ~(1 << FULL) & ~(1 << (FULL + 2));
        int f1 = 0xff & ~(1 << wrank), f2 = f1, rc1, rc2;

        rc1 = MPIX_Comm_agree(ic, &f1);
        MPIX_Comm_failure_ack(ic);
        rc2 = MPIX_Comm_agree(ic, &f2);
        ok = tap_class(rc1) == MPIX_ERR_PROC_FAILED && f1 == want &&
             rc2 == MPI_SUCCESS && f2 == want;
        if (!ok)
            tap_diag("world %d: agree %d 0x%x, after ack %d 0x%x (want "
                     "0x%x)", wrank, tap_class(rc1), f1, tap_class(rc2), f2,
                     want);
    }
    tap_ok_comm(v, ok, "MPIX_Comm_agree on the intercommunicator gives each "
                "group the AND of the other's survivors' flags, with "
                "MPIX_ERR_PROC_FAILED until the failure is acknowledged");

    rc = FTW_Comm_validate(ic, &failed);
    ok = rc == MPI_SUCCESS;
    if (ok) {
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        MPI_Group_size(failed, &n);
        if (n == 1)
            MPI_Group_translate_ranks(failed, 1, &zero, wg, &w);
        MPI_Group_free(&wg);
        MPI_Group_free(&failed);
        ok = n == 1 && w == VICTIM;
    } else {
        tap_diag("FTW_Comm_validate(ic): class %d", tap_class(rc));
    }
    tap_ok_comm(v, ok, "FTW_Comm_validate of the intercommunicator: the "
                "failed group is {world rank %d} on every survivor", VICTIM);

    ok = cross_bcast(ic, mine, 0, lrank, buf, 11) &&
         cross_bcast(ic, mine, 1, lrank, buf, 12);
    tap_ok_comm(v, ok, "after it, checked 64 KiB MPI_Bcast from each "
                "group to the other");

    val = wrank + 1;
    rc = MPI_Allreduce(&val, &sum, 1, MPI_INT, MPI_SUM, ic);
    all[0] = all[1] = UNTOUCHED;
    rc |= MPI_Allgather(&val, 1, MPI_INT, all, 1, MPI_INT, ic);
    /* (world rank + 1) of the other group's survivors: the short group's
     * one is world rank SHORT; the full group's are FULL and FULL + 2. */
    ok = rc == MPI_SUCCESS &&
         (mine == FULL ? sum == SHORT + 1 && all[0] == SHORT + 1 &&
                         all[1] == UNTOUCHED
                       : sum == FULL + 1 + FULL + 3 && all[0] == FULL + 1 &&
                         all[1] == FULL + 3);
    if (!ok)
        tap_diag("world %d: rc %d sum %d allgather %d %d", wrank, rc, sum,
                 all[0], all[1]);
    tap_ok_comm(v, ok, "MPI_Allreduce and MPI_Allgather over the "
                "intercommunicator's survivors (the dead rank's slot "
                "untouched)");

    ok = 1;
    if (mine == FULL) {
        tap_fill(buf, LEN, 20 + wrank);
        rc = MPI_Send(buf, LEN, MPI_BYTE, 0, 4, ic);
        memset(buf, 0, LEN);
        rc |= MPI_Recv(buf, LEN, MPI_BYTE, 0, 5, ic, MPI_STATUS_IGNORE);
        ok = rc == MPI_SUCCESS && tap_check(buf, LEN, 20 + wrank);
    } else {
        /* The failure in its own group acknowledged for the wildcard. */
        if (FTW_Comm_reenable_any_source(ic, &failed) == MPI_SUCCESS)
            MPI_Group_free(&failed);
        for (int i = 0; i < 2 && ok; i++) {
            MPI_Status st;

            rc = MPI_Recv(buf, LEN, MPI_BYTE, MPI_ANY_SOURCE, 4, ic, &st);
            ok = rc == MPI_SUCCESS &&
                 tap_check(buf, LEN, 20 + 2 * st.MPI_SOURCE + FULL) &&
                 MPI_Send(buf, LEN, MPI_BYTE, st.MPI_SOURCE, 5, ic) ==
                 MPI_SUCCESS;
        }
    }
    tap_ok_comm(v, ok, "point-to-point across it: checked 64 KiB there "
                "and back, wildcard receive included");

    /* Drain: odd rank 0's receive from even rank 0 (never sent) ends. */
    {
        MPI_Request r = MPI_REQUEST_NULL;
        int drc;

        if (wrank == SHORT)
            MPI_Irecv(buf, LEN, MPI_BYTE, 0, 9, ic, &r);
        drc = FTW_Comm_drain_all(ic);
        ok = drc == MPI_SUCCESS;
        if (!ok)
            tap_diag("FTW_Comm_drain_all(ic): class %d", tap_class(drc));
        if (wrank == SHORT)
            ok &= tap_class(MPI_Wait(&r, MPI_STATUS_IGNORE)) ==
                  FTW_ERR_DRAINED;
        if (wrank == FULL) {
            tap_fill(buf, LEN, 40);
            ok &= MPI_Send(buf, LEN, MPI_BYTE, 0, 9, ic) == MPI_SUCCESS;
            ok &= is_fail(MPI_Send(buf, 8, MPI_BYTE, 1, 9, ic));
        } else if (wrank == SHORT) {
            memset(buf, 0, LEN);
            ok &= MPI_Recv(buf, LEN, MPI_BYTE, 0, 9, ic,
                           MPI_STATUS_IGNORE) == MPI_SUCCESS &&
                  tap_check(buf, LEN, 40);
        }
    }
    tap_ok_comm(v, ok, "FTW_Comm_drain_all of the intercommunicator: a "
                "pending receive ends with FTW_ERR_DRAINED, a checked "
                "message crosses afterwards, a send to the dead rank "
                "fails");

    rc = MPI_Intercomm_merge(ic, mine, &merged);
    ok = rc == MPI_SUCCESS;
    if (ok) {
        MPI_Comm_size(merged, &n);
        rc = MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, merged);
        ok = n == 3 && rc == MPI_SUCCESS && sum == 0 + 1 + 2 + 3 - VICTIM;
    } else {
        tap_diag("MPI_Intercomm_merge: class %d", tap_class(rc));
    }
    tap_ok_comm(v, ok, "MPI_Intercomm_merge after validate: 3 processes, "
                "MPI_Allreduce right");

    rc = FTW_Comm_validate(local, &failed);
    if (rc == MPI_SUCCESS)
        MPI_Group_free(&failed);
    rc |= MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, mine ? 0 : 1, 8,
                               &ic2);
    ok = rc == MPI_SUCCESS;
    if (ok) {
        MPI_Comm_remote_size(ic2, &n);
        MPI_Comm_set_errhandler(ic2, MPI_ERRORS_RETURN);
        ok = n == (mine == SHORT ? 2 : 1) &&
             cross_bcast(ic2, mine, 1, lrank, buf, 30);
    } else {
        tap_diag("MPI_Intercomm_create: class %d", tap_class(rc));
    }
    tap_ok_comm(v, ok, "MPI_Intercomm_create over the validated groups: "
                "remote sizes 1 and 2, a checked MPI_Bcast crosses it");

    ok = MPI_Comm_free(&ic2) == MPI_SUCCESS &&
         MPI_Comm_free(&merged) == MPI_SUCCESS &&
         MPI_Comm_free(&ic) == MPI_SUCCESS &&
         MPI_Comm_free(&local) == MPI_SUCCESS;
    tap_ok_comm(v, ok, "every communicator is freed");
    MPI_Comm_free(&v);
    free(buf);
    MPI_Finalize();
    return tap_status();
}
