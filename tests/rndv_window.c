/* ftw-test: np=2 mode=both timeout=120 env=FTW_RNDV_THRESHOLD=1k env=FTW_XPORT=cma */
/*
 * rndv_window - windows of nonblocking receives into one reused buffer,
 * the pattern of bandwidth loops (osu_bw posts its whole window into one
 * buffer), with ftwrap's rendezvous on for messages of 1 KiB and more.
 * The MPI may complete several of those receives before ftwrap reads the
 * first one's RTS header from the buffer, and a later message would
 * overwrite it; ftwrap must neither hang nor deliver a wrong message.
 *
 * Asserts, 50 rounds each, rank 0 sending a window of 16 messages of
 * 4 KiB (tags 0..15, each its own pattern), rank 1 receiving them all
 * into one 4 KiB buffer:
 *  - with MPI_Waitall, with an MPI_Testall loop, with an MPI_Waitsome
 *    loop: every status gives the message's tag, source and size, and
 *    the buffer ends holding one of the window's messages whole (which
 *    one the MPI does not say: the receives overlap);
 *  - a window mixing 4 KiB (rendezvous) and 512 B (eager) messages:
 *    every status gives the real size and tag;
 *  - a window of 4 receives pending while a blocking MPI_Recv (tag 99)
 *    into the same buffer runs: every status right, the MPI_Recv's
 *    message whole in the buffer when it returns;
 *  - the sender's bytes, never touched by the receiver, are intact;
 *  - receives of 1 B (smaller than an RTS header) and 4 KiB that nothing
 *    matches, cancelled: MPI_Wait succeeds with a cancelled status.
 * Natively the same assertions hold (transparency).
 */
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define W 16
#define LEN 4096
#define SMALL 512
#define ROUNDS 50

static int rank;
static unsigned char sb[W][LEN], rb[LEN];

static uint64_t seed(int round, int j)
{
    return ((uint64_t)round << 32) | (uint64_t)(j + 1);
}

static int len_of(int mixed, int j)
{
    return mixed && j % 2 ? SMALL : LEN;
}

/* rank 1's check of one window's statuses and buffer. */
static int check_window(int round, int mixed, MPI_Status *st)
{
    int ok = 1, whole = 0;

    for (int j = 0; j < W; j++) {
        int count = -1;

        MPI_Get_count(&st[j], MPI_BYTE, &count);
        if (st[j].MPI_SOURCE != 0 || st[j].MPI_TAG != j ||
            count != len_of(mixed, j)) {
            tap_diag("round %d receive %d: source %d tag %d count %d", round,
                     j, st[j].MPI_SOURCE, st[j].MPI_TAG, count);
            ok = 0;
        }
    }
    if (mixed)
        return ok;
    for (int j = 0; j < W && !whole; j++)
        whole = tap_check(rb, LEN, seed(round, j));
    if (!whole)
        tap_diag("round %d: the buffer holds none of the messages whole",
                 round);
    return ok && whole;
}

/* One window; how: 0 Waitall, 1 Testall loop, 2 Waitsome loop. */
static int window(int round, int how, int mixed)
{
    MPI_Request req[W];
    MPI_Status st[W];
    int ok = 1;

    for (int j = 0; j < W; j++) {
        if (rank == 0) {
            tap_fill(sb[j], LEN, seed(round, j));
            MPI_Isend(sb[j], len_of(mixed, j), MPI_BYTE, 1, j,
                      MPI_COMM_WORLD, &req[j]);
        } else {
            MPI_Irecv(rb, LEN, MPI_BYTE, 0, j, MPI_COMM_WORLD, &req[j]);
        }
    }
    if (how == 0) {
        ok = MPI_Waitall(W, req, st) == MPI_SUCCESS;
    } else if (how == 1) {
        int flag = 0;

        while (ok && !flag)
            ok = MPI_Testall(W, req, &flag, st) == MPI_SUCCESS;
    } else {
        int left = W, n, idx[W];
        MPI_Status s[W];

        while (ok && left > 0) {
            ok = MPI_Waitsome(W, req, &n, idx, s) == MPI_SUCCESS &&
                 n != MPI_UNDEFINED;
            for (int i = 0; ok && i < n; i++)
                st[idx[i]] = s[i];
            left -= ok ? n : 0;
        }
    }
    if (!ok)
        tap_diag("round %d: a completion call failed", round);
    if (rank == 1)
        return ok && check_window(round, mixed, st);
    for (int j = 0; j < W; j++)
        ok &= tap_check(sb[j], LEN, seed(round, j));
    return ok;
}

static int windows(int how, int mixed)
{
    int ok = 1;

    for (int r = 0; r < ROUNDS; r++)
        ok &= window(r, how, mixed);
    return ok;
}

/* Four receives pending, then a blocking receive into the same buffer. */
static int blocking_inside(void)
{
    MPI_Request req[4];
    MPI_Status st[4], bst;
    int ok = 1;

    for (int r = 0; r < ROUNDS; r++) {
        if (rank == 0) {
            for (int j = 0; j < 4; j++) {
                tap_fill(sb[j], LEN, seed(r, j));
                MPI_Send(sb[j], LEN, MPI_BYTE, 1, j, MPI_COMM_WORLD);
            }
            tap_fill(sb[4], LEN, seed(r, 99));
            MPI_Send(sb[4], LEN, MPI_BYTE, 1, 99, MPI_COMM_WORLD);
            continue;
        }
        for (int j = 0; j < 4; j++)
            MPI_Irecv(rb, LEN, MPI_BYTE, 0, j, MPI_COMM_WORLD, &req[j]);
        ok &= MPI_Recv(rb, LEN, MPI_BYTE, 0, 99, MPI_COMM_WORLD, &bst) ==
              MPI_SUCCESS;
        ok &= bst.MPI_TAG == 99 && tap_check(rb, LEN, seed(r, 99));
        ok &= MPI_Waitall(4, req, st) == MPI_SUCCESS;
        for (int j = 0; j < 4; j++)
            ok &= st[j].MPI_TAG == j;
        if (!ok) {
            tap_diag("round %d: blocking receive inside a window", r);
            break;
        }
    }
    return ok;
}

/* Receives that nothing matches, cancelled: one smaller than an RTS
 * header (posted into ftwrap's scratch), one larger. */
static int cancel_recvs(void)
{
    static const int sizes[2] = { 1, LEN };
    int ok = 1;

    for (int i = 0; i < 2 && rank == 1; i++) {
        MPI_Request req;
        MPI_Status st;
        int cancelled = 0;

        MPI_Irecv(rb, sizes[i], MPI_BYTE, 0, 200 + i, MPI_COMM_WORLD, &req);
        MPI_Cancel(&req);
        ok &= MPI_Wait(&req, &st) == MPI_SUCCESS;
        MPI_Test_cancelled(&st, &cancelled);
        ok &= cancelled;
    }
    return ok;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    tap_plan(6);
    tap_ok(windows(0, 0), "window of %d into one buffer, MPI_Waitall: "
           "statuses, one message whole", W);
    tap_ok(windows(1, 0), "the same with an MPI_Testall loop");
    tap_ok(windows(2, 0), "the same with an MPI_Waitsome loop");
    tap_ok(windows(0, 1), "rendezvous and eager messages mixed: statuses");
    tap_ok(blocking_inside(), "a blocking receive into a buffer four "
           "pending receives share: its message whole, statuses right");
    tap_ok(cancel_recvs(), "receives of 1 B and 4 KiB cancelled: MPI_Wait "
           "succeeds, the status says cancelled");
    MPI_Finalize();
    return tap_status();
}
