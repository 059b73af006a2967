/* ftw-test: np=3 mode=ftwrap timeout=120 expect-failed=2 fate=2:signal:KILL env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=verbs env=FTW_VERBS_DEBUG=1 */
/*
 * rndv_verbs_reconnect_dead - a verbs QP whose reconnection the peer
 * never answers, because it died meanwhile, costs a bounded wait and
 * nothing else.  Skipped (1..0) where verbs is not in use (run it in the
 * soft-RoCE lab, scripts/check-verbs).
 *
 * (Skipped, rank 2 still kills itself: the runner expects it dead.)
 *
 * Rank 2 sends rank 1 a rendezvous message, then sleeps outside MPI and
 * SIGKILLs itself 0.5 s later.  Meanwhile rank 1 READs that message again
 * (FTW_Verbs_reread, FTW_VERBS_DEBUG=1): refused, its QP to rank 2 goes
 * through the error state and rank 1 asks rank 2 to reconnect, which it
 * never does.  Asserts:
 *  - the second READ is refused;
 *  - rank 1's next MPI_Send of 1 MiB to rank 2 (its QP not reconnected)
 *    fails with FTW_ERR_PROC_FAIL_STOP within 10 s, never hangs;
 *  - ranks 0 and 1 then exchange 1 MiB messages both ways, pulled by RDMA
 *    READ (rndv_verbs) and intact: the survivors' QPs are untouched;
 *  - MPI_Finalize returns on the survivors.
 */
#include "tap.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#pragma weak FTW_Verbs_reread

#define LEN (((size_t)1 << 20) + 5)
#define VICTIM 2

static int rank;
static unsigned char *buf;

/* One message of LEN bytes from src to dst (seed); on dst: 1 if intact
 * and pulled by RDMA READ. */
static int big(int src, int dst, uint64_t seed)
{
    long long v0 = tap_ftw_stat("rndv_verbs");
    int ok = 1;

    if (rank == src) {
        tap_fill(buf, LEN, seed);
        ok = MPI_Send(buf, (int)LEN, MPI_BYTE, dst, 1, MPI_COMM_WORLD) ==
             MPI_SUCCESS;
    } else if (rank == dst) {
        memset(buf, 0, LEN);
        ok = MPI_Recv(buf, (int)LEN, MPI_BYTE, src, 1, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE) == MPI_SUCCESS &&
             tap_check(buf, LEN, seed) &&
             tap_ftw_stat("rndv_verbs") == v0 + 1;
        if (!ok)
            tap_diag("message %llu from %d: wrong, or not by RDMA READ "
                     "(rndv_verbs %lld -> %lld)", (unsigned long long)seed,
                     src, v0, tap_ftw_stat("rndv_verbs"));
    }
    return ok;
}

/* Rank 1: the refused READ, then the send to the dying rank 2. */
static void survivor_1(int *refused_ok, int *send_ok, double *dt)
{
    int refused = -1, rc, cls;
    double t0;

    rc = FTW_Verbs_reread(VICTIM, &refused);
    *refused_ok = rc == MPI_SUCCESS && refused == 1;
    if (!*refused_ok)
        tap_diag("FTW_Verbs_reread: rc %d, refused %d", rc, refused);
    tap_fill(buf, LEN, 7);
    t0 = MPI_Wtime();
    rc = MPI_Send(buf, (int)LEN, MPI_BYTE, VICTIM, 1, MPI_COMM_WORLD);
    *dt = MPI_Wtime() - t0;
    cls = tap_class(rc);
    *send_ok = cls == FTW_ERR_PROC_FAIL_STOP && *dt < 10;
    if (!*send_ok)
        tap_diag("send to the dead rank: rc %d (class %d) after %.3f s", rc,
                 cls, *dt);
}

int main(int argc, char **argv)
{
    int here, all = 0, x = 0, refused_ok = 1, send_ok = 1, ok3 = 1;
    double dt = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!tap_need_size(3))
        return 0;
    buf = malloc(LEN);
    here = buf != NULL && (big(VICTIM, 1, 1) || rank != 1) &&
           FTW_Verbs_reread != NULL;
    MPI_Allreduce(&here, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (tap_skip_unless_verbs(all)) {
        if (rank == VICTIM)
            raise(SIGKILL);     /* the runner expects it dead */
        free(buf);
        MPI_Finalize();
        return 0;
    }
    tap_plan(3);
    if (rank == VICTIM) {
        MPI_Send(&x, 1, MPI_INT, 1, 2, MPI_COMM_WORLD);
        fflush(stdout);
        usleep(500000);         /* outside MPI: no HELLO is answered */
        raise(SIGKILL);
        _exit(99);
    }
    if (rank == 1) {
        MPI_Recv(&x, 1, MPI_INT, VICTIM, 2, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        survivor_1(&refused_ok, &send_ok, &dt);
    }
    ok3 = big(0, 1, 10) & big(1, 0, 11) & big(0, 1, 12);
    /* Rank 1's verdicts, printed by rank 0. */
    if (rank == 0) {
        MPI_Recv(&refused_ok, 1, MPI_INT, 1, 3, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        MPI_Recv(&send_ok, 1, MPI_INT, 1, 4, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        MPI_Recv(&dt, 1, MPI_DOUBLE, 1, 5, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    } else {
        MPI_Send(&refused_ok, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
        MPI_Send(&send_ok, 1, MPI_INT, 0, 4, MPI_COMM_WORLD);
        MPI_Send(&dt, 1, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD);
    }
    tap_ok_local(refused_ok, "a second READ of a pulled message is refused");
    tap_ok_local(send_ok, "a send to the peer that died instead of "
                 "reconnecting: FTW_ERR_PROC_FAIL_STOP in %.3f s", dt);
    if (rank == 1)
        MPI_Send(&ok3, 1, MPI_INT, 0, 6, MPI_COMM_WORLD);
    else {
        int other = 0;

        MPI_Recv(&other, 1, MPI_INT, 1, 6, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        ok3 &= other;
    }
    tap_ok_local(ok3, "then ranks 0 and 1 exchange messages by RDMA READ, "
                 "intact");
    free(buf);
    MPI_Finalize();
    return tap_status();
}
