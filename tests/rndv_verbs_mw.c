/* ftw-test: np=2 mode=ftwrap timeout=180 env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=verbs env=FTW_VERBS_DEBUG=1 */
/*
 * rndv_verbs_mw - over ftwrap's verbs transport, a receiver that has
 * pulled a rendezvous message cannot read the sender's memory again once
 * the send has ended (the sender's memory window for that message is
 * invalidated before its MPI_Send returns), and the QP that such a refused
 * READ puts in the error state is reconnected: later messages, both ways,
 * are pulled by RDMA READ again.  Skipped (1..0) where verbs is not in use
 * (no RDMA device: run it in the soft-RoCE lab, scripts/check-verbs).
 *
 * Rounds of: rank 0 sends 1 MiB + 17 (MPI_Send returns after the FIN),
 * then a small "sent" message; rank 1 checks the bytes, then READs the
 * message again through FTW_Verbs_reread (FTW_VERBS_DEBUG=1) with the
 * rkey and address of its RTS.  Asserts, every payload checked byte for
 * byte:
 *  - each round's second READ is refused (with FTW_VERBS_MW=0 the memory
 *    region still grants it, and this check fails: the test can fail);
 *  - after each refused READ, a message from 0 to 1 and one from 1 to 0
 *    are pulled by RDMA READ (rndv_verbs grows by one on the receiver,
 *    rndv_native does not) and intact;
 *  - both ranks reconnected their QP exactly once per round
 *    (verbs_reconnects: no reconnection was wasted or repeated);
 *  - windows were in use (verbs_mw=1), one bound per message sent over
 *    verbs, and every one bound was invalidated or freed by the end.
 */
#include "tap.h"

#include <stdlib.h>
#include <string.h>

/* Resolved only under ftwrap (a native run finds it null and skips). */
#pragma weak FTW_Verbs_reread

#define LEN (((size_t)1 << 20) + 17)
#define ROUNDS 3
#define TAG_BIG 1
#define TAG_SMALL 2

static int rank;
static unsigned char *buf;

static long long stat_of(const char *key)
{
    return tap_ftw_stat(key);
}

/* One big message from src to dst (seed), checked at dst; on dst, 1 if
 * it came intact and by RDMA READ (rndv_verbs + 1, rndv_native + 0). */
static int big(int src, int dst, uint64_t seed)
{
    long long v0 = stat_of("rndv_verbs"), n0 = stat_of("rndv_native");
    int ok = 1;

    if (rank == src) {
        tap_fill(buf, LEN, seed);
        ok = MPI_Send(buf, (int)LEN, MPI_BYTE, dst, TAG_BIG,
                      MPI_COMM_WORLD) == MPI_SUCCESS;
    } else if (rank == dst) {
        memset(buf, 0, LEN);
        ok = MPI_Recv(buf, (int)LEN, MPI_BYTE, src, TAG_BIG, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE) == MPI_SUCCESS &&
             tap_check(buf, LEN, seed);
        if (!ok)
            tap_diag("message %llu from %d is wrong", (unsigned long long)seed,
                     src);
        if (stat_of("rndv_verbs") != v0 + 1 || stat_of("rndv_native") != n0) {
            tap_diag("message %llu: rndv_verbs %lld -> %lld, rndv_native "
                     "%lld -> %lld", (unsigned long long)seed, v0,
                     stat_of("rndv_verbs"), n0, stat_of("rndv_native"));
            ok = 0;
        }
    }
    return ok;
}

/* A small message from src to dst: the sender's call has returned. */
static void note(int src, int dst)
{
    int x = 0;

    if (rank == src)
        MPI_Send(&x, 1, MPI_INT, dst, TAG_SMALL, MPI_COMM_WORLD);
    else if (rank == dst)
        MPI_Recv(&x, 1, MPI_INT, src, TAG_SMALL, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
}

/* On rank 1: READ the last message from 0 again; 1 if refused. */
static int reread_refused(int round)
{
    int refused = -1, rc;

    if (rank != 1)
        return 1;
    rc = FTW_Verbs_reread(0, &refused);
    if (rc != MPI_SUCCESS || refused != 1)
        tap_diag("round %d: FTW_Verbs_reread: rc %d, refused %d", round, rc,
                 refused);
    return rc == MPI_SUCCESS && refused == 1;
}

/* Whether verbs pulls here at all: one message, counted on rank 1. */
static int verbs_in_use(void)
{
    int here, all = 0;

    here = big(0, 1, 99) || rank == 0;
    here = rank == 0 || (here && FTW_Verbs_reread != NULL);
    MPI_Allreduce(&here, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all;
}

int main(int argc, char **argv)
{
    int ok_reread = 1, ok_fwd = 1, ok_back = 1;
    long long binds, inval, dealloc;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!tap_need_size(2))
        return 0;
    buf = malloc(LEN);
    if (tap_skip_unless_verbs(buf != NULL && verbs_in_use())) {
        free(buf);
        MPI_Finalize();
        return 0;
    }
    tap_plan(6);
    for (int r = 0; r < ROUNDS; r++) {
        note(0, 1);                     /* 0's last MPI_Send returned */
        ok_reread &= reread_refused(r);
        note(1, 0);                     /* 0 now waits in MPI */
        ok_fwd &= big(0, 1, (uint64_t)(100 + r));
        ok_back &= big(1, 0, (uint64_t)(200 + r));
        ok_fwd &= big(0, 1, (uint64_t)(300 + r));
    }
    tap_ok(ok_reread, "a second READ of a pulled message is refused once "
           "its send has ended (%d rounds)", ROUNDS);
    tap_ok(ok_fwd, "after each refused READ, messages from 0 to 1 are "
           "pulled by RDMA READ again, intact");
    tap_ok(ok_back, "and messages from 1 to 0 too");
    tap_ok(stat_of("verbs_reconnects") == ROUNDS,
           "the QP was reconnected after each refused READ "
           "(verbs_reconnects %lld)", stat_of("verbs_reconnects"));
    tap_ok(stat_of("verbs_mw") == 1, "memory windows in use (verbs_mw=1)");
    MPI_Barrier(MPI_COMM_WORLD);
    binds = stat_of("verbs_mw_binds");
    inval = stat_of("verbs_mw_invalidated");
    dealloc = stat_of("verbs_mw_deallocated");
    tap_ok(binds >= (rank == 0 ? 2 * ROUNDS + 1 : ROUNDS) &&
           inval + dealloc == binds,
           "one window per message sent, none left bound (rank %d: %lld "
           "bound, %lld invalidated, %lld freed)", rank, binds, inval,
           dealloc);
    free(buf);
    MPI_Finalize();
    return tap_status();
}
