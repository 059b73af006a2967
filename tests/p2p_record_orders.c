/* ftw-test: np=3 mode=ftwrap timeout=90 expect-failed=2 fate=2:signal:KILL */
/*
 * p2p_record_orders - windows of nonblocking receives larger than
 * ftwrap's request log, completed in every order a program may use, then
 * one cut short by a death.
 *
 * Phase 1, four rounds (ranks 0 and 1): rank 0 posts N (300) MPI_Irecv
 * from rank 1, one buffer each, sizes cycling 8 B, 100 B, 3000 B with a
 * 200 KiB one every 50th (small ones into a scratch header, ordinary
 * ones, rendezvous pulls); rank 1 sends them with MPI_Isend + MPI_Waitall.
 * Rank 0 completes them, one round each way: MPI_Waitall over the array
 * reversed, MPI_Waitany until none is left, MPI_Waitsome until none is
 * left, MPI_Test over a shuffled order until all passed.  Each round:
 * every buffer holds its checksummed pattern, every status names rank 1,
 * the tag and the size.
 * Phase 2: rank 0 posts 2 x 100 receives alternating between rank 1 and
 * rank 2, then tells rank 2 to go; rank 2 sends the first 50 of its
 * messages and SIGKILLs itself.  Rank 0's MPI_Waitall returns
 * MPI_ERR_IN_STATUS within 10 s: rank 1's 100 and rank 2's first 50
 * intact with MPI_SUCCESS, rank 2's last 50 of class MPIX_ERR_PROC_FAILED
 * (FTW_ERR_BUFFER_UNUSABLE for a receive ftwrap quarantined because the
 * MPI may still write its buffer).
 * Rank 1 and 0 then exchange a checksummed message (the job goes on).
 * Nothing is left behind (the runner checks processes and files).
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftwrap.h"
#include "tap.h"

#define N 300
#define BIG (200 * 1024)
#define N2 100          /* phase 2: receives per sender */
#define SENT2 50        /* what the victim sends before it dies */
#define TAG_GO 9000
#define TAG_AFTER 9001
#define BOUND 10.0

static int size_of(int i)
{
    static const int sizes[3] = { 8, 100, 3000 };

    return i % 50 == 49 ? BIG : sizes[i % 3];
}

static uint64_t seed_of(int round, int src, int i)
{
    return ((uint64_t)round << 40) ^ ((uint64_t)src << 32) ^ (uint64_t)i;
}

static int check_one(unsigned char *buf, const MPI_Status *st, int src,
                     int tag, int len, uint64_t seed, const char *what)
{
    int count = -1;

    MPI_Get_count(st, MPI_BYTE, &count);
    if (st->MPI_SOURCE != src || st->MPI_TAG != tag || count != len) {
        tap_diag("%s: receive %d: status source %d tag %d count %d, "
                 "expected %d %d %d", what, tag, st->MPI_SOURCE, st->MPI_TAG,
                 count, src, tag, len);
        return 0;
    }
    if (!tap_check(buf, (size_t)len, seed)) {
        tap_diag("%s: receive %d: data differ from what was sent", what, tag);
        return 0;
    }
    return 1;
}

/* Complete reqs[0..N) in the round's order; statuses by index. */
static int complete(int round, MPI_Request reqs[], MPI_Status sts[])
{
    int left = N, idx[N], out = 0, perm[N];

    switch (round) {
    case 0: {
        MPI_Request rev[N];
        MPI_Status rst[N];

        for (int i = 0; i < N; i++)
            rev[i] = reqs[N - 1 - i];
        if (MPI_Waitall(N, rev, rst) != MPI_SUCCESS)
            return 0;
        for (int i = 0; i < N; i++) {
            sts[N - 1 - i] = rst[i];
            reqs[N - 1 - i] = rev[i];
        }
        return 1;
    }
    case 1:
        while (left > 0) {
            int k = -1;
            MPI_Status st;

            if (MPI_Waitany(N, reqs, &k, &st) != MPI_SUCCESS ||
                k == MPI_UNDEFINED)
                return 0;
            sts[k] = st;
            left--;
        }
        return 1;
    case 2:
        while (left > 0) {
            MPI_Status st[N];

            if (MPI_Waitsome(N, reqs, &out, idx, st) != MPI_SUCCESS ||
                out == MPI_UNDEFINED)
                return 0;
            for (int j = 0; j < out; j++)
                sts[idx[j]] = st[j];
            left -= out;
        }
        return 1;
    default:
        for (int i = 0; i < N; i++)
            perm[i] = i;
        srand(12345);
        for (int i = N - 1; i > 0; i--) {
            int j = rand() % (i + 1), t = perm[i];

            perm[i] = perm[j];
            perm[j] = t;
        }
        while (left > 0) {
            for (int j = 0; j < N; j++) {
                int i = perm[j], flag = 0;

                if (reqs[i] == MPI_REQUEST_NULL)
                    continue;
                if (MPI_Test(&reqs[i], &flag, &sts[i]) != MPI_SUCCESS)
                    return 0;
                left -= flag;
            }
        }
        return 1;
    }
}

static int phase1(int rank, int round, unsigned char *bufs[])
{
    static const char *names[4] = { "MPI_Waitall reversed", "MPI_Waitany",
                                    "MPI_Waitsome", "MPI_Test shuffled" };
    MPI_Request reqs[N];
    MPI_Status sts[N];
    int ok = 1;

    if (rank == 1) {
        for (int i = 0; i < N; i++) {
            tap_fill(bufs[i], (size_t)size_of(i), seed_of(round, 1, i));
            MPI_Isend(bufs[i], size_of(i), MPI_BYTE, 0, i, MPI_COMM_WORLD,
                      &reqs[i]);
        }
        ok = MPI_Waitall(N, reqs, sts) == MPI_SUCCESS;
    } else if (rank == 0) {
        for (int i = 0; i < N; i++) {
            memset(bufs[i], 0xee, (size_t)size_of(i));
            MPI_Irecv(bufs[i], size_of(i), MPI_BYTE, 1, i, MPI_COMM_WORLD,
                      &reqs[i]);
        }
        ok = complete(round, reqs, sts);
        if (!ok)
            tap_diag("%s: a completion call failed", names[round]);
        for (int i = 0; i < N && ok; i++)
            ok &= reqs[i] == MPI_REQUEST_NULL &&
                  check_one(bufs[i], &sts[i], 1, i, size_of(i),
                            seed_of(round, 1, i), names[round]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        tap_ok_local(ok, "%d receives (8 B to 200 KiB) completed by %s: "
                     "data and statuses right", N, names[round]);
    return ok;
}

/* Phase 2 at rank 0: receive i (tag i) from rank 1 for even i, from rank
 * 2 for odd i; rank 2's first SENT2 come, the rest never. */
static void phase2_receiver(unsigned char *bufs[])
{
    MPI_Request reqs[2 * N2];
    MPI_Status sts[2 * N2];
    int go = 1, rc, ok = 1, n_ok = 0, n_failed = 0;
    double t0;

    for (int i = 0; i < 2 * N2; i++) {
        memset(bufs[i], 0xee, (size_t)size_of(i));
        MPI_Irecv(bufs[i], size_of(i), MPI_BYTE, 1 + i % 2, i, MPI_COMM_WORLD,
                  &reqs[i]);
    }
    MPI_Send(&go, 1, MPI_INT, 2, TAG_GO, MPI_COMM_WORLD);
    t0 = tap_now();
    rc = MPI_Waitall(2 * N2, reqs, sts);
    tap_ok_local(tap_now() - t0 < BOUND, "MPI_Waitall with a sender killed "
                 "mid-window returned in %.2f s (bound %.0f s)",
                 tap_now() - t0, BOUND);
    tap_ok_local(rc == MPI_ERR_IN_STATUS, "... it returned MPI_ERR_IN_STATUS "
                 "(got %s)", class_name(rc == MPI_SUCCESS ? 0 : class_of(rc)));
    for (int i = 0; i < 2 * N2; i++) {
        int src = 1 + i % 2, nth = i / 2;

        if (src == 2 && nth >= SENT2) {
            int cls = sts[i].MPI_ERROR == MPI_SUCCESS
                      ? MPI_SUCCESS : class_of(sts[i].MPI_ERROR);

            /* A receive the MPI may still write is quarantined. */
            if (cls != MPIX_ERR_PROC_FAILED &&
                cls != FTW_ERR_BUFFER_UNUSABLE) {
                tap_diag("receive %d from the dead rank: %s", i,
                         class_name(cls));
                ok = 0;
            }
            n_failed++;
            continue;
        }
        if (sts[i].MPI_ERROR != MPI_SUCCESS) {
            tap_diag("receive %d from rank %d: %s", i, src,
                     class_name(class_of(sts[i].MPI_ERROR)));
            ok = 0;
            continue;
        }
        ok &= check_one(bufs[i], &sts[i], src, i, size_of(i),
                        seed_of(9, src, i), "phase 2");
        n_ok++;
    }
    tap_ok_local(ok, "... %d receives intact with MPI_SUCCESS, %d of the "
                 "dead rank's MPIX_ERR_PROC_FAILED (or, for a buffer the MPI "
                 "may still write, FTW_ERR_BUFFER_UNUSABLE)", n_ok, n_failed);
}

static void phase2_sender(int rank, unsigned char *bufs[])
{
    MPI_Request reqs[N2];
    MPI_Status sts[N2];
    int go = 0, n = 0;

    if (rank == 2)
        MPI_Recv(&go, 1, MPI_INT, 0, TAG_GO, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    for (int i = rank - 1; i < 2 * N2; i += 2) {
        if (rank == 2 && n == SENT2)
            break;
        tap_fill(bufs[i], (size_t)size_of(i), seed_of(9, rank, i));
        MPI_Isend(bufs[i], size_of(i), MPI_BYTE, 0, i, MPI_COMM_WORLD,
                  &reqs[n++]);
    }
    MPI_Waitall(n, reqs, sts);
    if (rank == 2) {
        usleep(100000);     /* the messages are on their way or arrived */
        raise(SIGKILL);
    }
}

int main(int argc, char **argv)
{
    unsigned char *bufs[N];
    int rank, ok = 1;

    MPI_Init(&argc, &argv);
    if (!tap_need_size(3))
        return 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int i = 0; i < N; i++)
        bufs[i] = malloc((size_t)size_of(i));
    tap_plan(8);
    for (int round = 0; round < 4; round++)
        ok &= phase1(rank, round, bufs);
    if (rank == 0)
        phase2_receiver(bufs);
    else
        phase2_sender(rank, bufs);
    if (rank < 2) {
        uint64_t v = 0x5eed + (uint64_t)rank, w = 0;
        int peer = 1 - rank, rc;

        rc = MPI_Sendrecv(&v, 1, MPI_UINT64_T, peer, TAG_AFTER, &w, 1,
                          MPI_UINT64_T, peer, TAG_AFTER, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE);
        if (rank == 0)
            tap_ok_local(rc == MPI_SUCCESS && w == 0x5eed + 1u,
                         "ranks 0 and 1 still exchange messages");
    }
    for (int i = 0; i < N; i++)
        free(bufs[i]);
    MPI_Finalize();
    return tap_status();
}
