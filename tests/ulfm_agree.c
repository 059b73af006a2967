/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * ulfm_agree - MPIX_Comm_agree and MPIX_Comm_iagree without a failure,
 * with an unacknowledged failure and with an acknowledged one, and what a
 * ULFM program sees after a failure.
 *
 * MPI_Comm_get_attr(MPIX_FT) gives flag 1 and value 1 on MPI_COMM_WORLD
 * and on a duplicate, and MPI_TAG_UB stays the MPI's.
 * Flags are 0xff minus bit (rank + 1): the AND is 0xff minus the bits of
 * the participating ranks.  Without failures MPIX_Comm_agree on a
 * duplicate c of MPI_COMM_WORLD gives MPI_SUCCESS and 0xe1 on every rank.
 * Then rank 3 SIGKILLs itself.  Once ranks 0-2 know: MPI_Recv from rank 3
 * gives MPIX_ERR_PROC_FAILED, an MPI_ANY_SOURCE MPI_Recv gives
 * MPIX_ERR_PROC_FAILED, and
 * MPIX_Comm_get_failed gives {3}.  Ranks 0 and 1 acknowledge
 * (MPIX_Comm_failure_ack), rank 2 does not: MPIX_Comm_agree gives
 * MPIX_ERR_PROC_FAILED on all three (uniformly) with flag 0xf1.  Rank 2
 * acknowledges with MPIX_Comm_ack_failed(c, 5, &n) (n = 1); then
 * MPIX_Comm_failure_get_acked gives {3}, MPIX_Comm_agree gives
 * MPI_SUCCESS and 0xf1, MPIX_Comm_iagree + MPI_Wait gives MPI_SUCCESS and
 * 0xf1, and an MPI_ANY_SOURCE receive works again (rank 0 gets a
 * checksummed message from rank 2).
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
#define NSURV 3
#define BOUND 5.0
#define AT_ONCE 1.0
#define KILL_DELAY_US 100000

#include "survivors.h"

static int my_flag(void)
{
    return 0xff & ~(1 << (rank + 1));
}

static void chk_agree(int rc, int flag, int want_rc, int want, const char *w)
{
    chk(class_of(rc) == want_rc && flag == want, "%s: %s, flag 0x%x (want "
        "%s, 0x%x)", w, class_name(class_of(rc)), flag, class_name(want_rc),
        want);
}

/* The group g must be exactly {VICTIM} (as world ranks). */
static void chk_victim_group(int rc, MPI_Group g, const char *what)
{
    int n = -1, mask = rc == MPI_SUCCESS ? world_mask_of(g, &n) : -1;

    chk(rc == MPI_SUCCESS && n == 1 && mask == 1 << VICTIM, "%s: %s, %s "
        "(want {%d})", what, class_name(class_of(rc)), mask_str(mask),
        VICTIM);
    if (rc == MPI_SUCCESS)
        MPI_Group_free(&g);
}

static void after_failure(MPI_Comm c)
{
    int v = 0, flag, rc, n = -1;
    MPI_Group g;

    step = "receives after the failure";
    rc = MPI_Recv(&v, 1, MPI_INT, VICTIM, 1, c, MPI_STATUS_IGNORE);
    chk_class(rc, MPIX_ERR_PROC_FAILED, "MPI_Recv from dead rank 3");
    rc = MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 1, c, MPI_STATUS_IGNORE);
    chk_class(rc, MPIX_ERR_PROC_FAILED, "MPI_ANY_SOURCE MPI_Recv before "
              "the acknowledgement");
    rc = MPIX_Comm_get_failed(c, &g);
    chk_victim_group(rc, g, "MPIX_Comm_get_failed");

    step = "agree, rank 2 has not acknowledged";
    if (rank != 2)
        chk_class(MPIX_Comm_failure_ack(c), MPI_SUCCESS,
                  "MPIX_Comm_failure_ack");
    flag = my_flag();
    rc = MPIX_Comm_agree(c, &flag);
    chk_agree(rc, flag, MPIX_ERR_PROC_FAILED, 0xf1, "MPIX_Comm_agree, "
              "rank 2 not acknowledged");

    step = "agree, all acknowledged";
    if (rank == 2) {
        rc = MPIX_Comm_ack_failed(c, 5, &n);
        chk(rc == MPI_SUCCESS && n == 1, "MPIX_Comm_ack_failed(5): %s, %d "
            "acknowledged (want 1)", class_name(class_of(rc)), n);
    }
    rc = MPIX_Comm_failure_get_acked(c, &g);
    chk_victim_group(rc, g, "MPIX_Comm_failure_get_acked");
    flag = my_flag();
    rc = MPIX_Comm_agree(c, &flag);
    chk_agree(rc, flag, MPI_SUCCESS, 0xf1, "MPIX_Comm_agree, acknowledged");
}

static void iagree_and_anysource(MPI_Comm c)
{
    int flag = my_flag(), rc;
    char msg[1000];
    MPI_Request req;
    MPI_Status st;

    step = "MPIX_Comm_iagree";
    rc = MPIX_Comm_iagree(c, &flag, &req);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    chk_agree(rc, flag, MPI_SUCCESS, 0xf1, "MPIX_Comm_iagree + MPI_Wait");

    step = "MPI_ANY_SOURCE after the acknowledgement";
    if (rank == 2) {
        tap_fill(msg, sizeof msg, 42);
        rc = MPI_Send(msg, sizeof msg, MPI_BYTE, 0, 2, c);
        chk_class(rc, MPI_SUCCESS, "MPI_Send to rank 0");
    } else if (rank == 0) {
        memset(msg, 0, sizeof msg);
        rc = MPI_Recv(msg, sizeof msg, MPI_BYTE, MPI_ANY_SOURCE, 2, c, &st);
        chk(rc == MPI_SUCCESS && st.MPI_SOURCE == 2 &&
            tap_check(msg, sizeof msg, 42), "MPI_ANY_SOURCE MPI_Recv after "
            "the acknowledgement: %s, source %d, data %s",
            class_name(class_of(rc)), st.MPI_SOURCE,
            tap_check(msg, sizeof msg, 42) ? "intact" : "WRONG");
    }
}

/* MPIX_FT is an attribute key with value 1, as ULFM programs read it;
 * other keys are the MPI's. */
static void chk_mpix_ft(MPI_Comm c)
{
    int *v = NULL, *ub = NULL, flag = 0, flag_ub = 0, rc, rc_ub;

    rc = MPI_Comm_get_attr(c, MPIX_FT, &v, &flag);
    chk(rc == MPI_SUCCESS && flag && v != NULL && *v == 1,
        "MPI_Comm_get_attr(MPIX_FT): %s, flag %d, value %d",
        class_name(class_of(rc)), flag, v ? *v : -1);
    rc_ub = MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag_ub);
    chk(rc_ub == MPI_SUCCESS && flag_ub && ub != NULL && *ub >= 32767,
        "MPI_Comm_get_attr(MPI_TAG_UB) is still the MPI's: flag %d, %d",
        flag_ub, ub ? *ub : -1);
}

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 1, 2};
    MPI_Comm c;
    int flag, rc;

    if (!setup(&argc, &argv))
        return 0;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    if (rank != VICTIM) {
        chk_mpix_ft(MPI_COMM_WORLD);
        chk_mpix_ft(c);
    }
    flag = my_flag();
    rc = MPIX_Comm_agree(c, &flag);
    chk_agree(rc, flag, MPI_SUCCESS, 0xe1, "MPIX_Comm_agree, no failure");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == VICTIM)
        victim();
    watchdog_start(30);
    wait_known(1 << VICTIM, BOUND);
    after_failure(c);
    iagree_and_anysource(c);
    return finish(surv, NSURV);
}
