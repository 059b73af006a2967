/* ftw-test: np=2 mode=both timeout=120 env=FTW_RNDV_THRESHOLD=1k env=FTW_XPORT=cma */
/*
 * rndv_threads - large messages from several threads at once under
 * MPI_THREAD_MULTIPLE, with FTW_RNDV_THRESHOLD set.  ftwrap's rendezvous
 * keeps per-process receive state that is not safe for concurrent
 * threads, so under MULTIPLE it stays off and the MPI carries these
 * messages; what must hold is what the program sees natively.
 *
 * Asserts, with 4 threads per rank, each on its own tag:
 *  - 20 blocking messages (MPI_Send, MPI_Recv) of 4 MiB + 5 per thread
 *    from rank 0 to rank 1 on the thread's own tag, then 20 on one tag
 *    all threads share (any thread's message may match): payload checked
 *    byte for byte, statuses giving the tag and the full size;
 *  - 20 windows of 8 MPI_Irecv into one buffer and 8 MPI_Isend per
 *    thread (4 KiB each): every status right, the buffer holding one of
 *    the window's messages whole;
 *  - MPI_Init_thread granted MPI_THREAD_MULTIPLE (else skipped: nothing
 *    to test).
 */
#include "tap.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NT 4
#define BIG ((4 << 20) + 5)
#define W 8
#define SMALL 4096
#define ROUNDS 20

static int rank, peer;
static int ok_big[NT], ok_win[NT];

static uint64_t seed(int src, int t, int r, int j)
{
    return ((uint64_t)src << 48) | ((uint64_t)t << 40) |
           ((uint64_t)r << 16) | (uint64_t)j;
}

/* A message that names its own pattern (threads sharing a tag receive
 * each other's): the seed in its first 8 bytes, the pattern after. */
static void fill_msg(unsigned char *buf, size_t len, uint64_t sd)
{
    memcpy(buf, &sd, sizeof(sd));
    tap_fill(buf + sizeof(sd), len - sizeof(sd), sd);
}

static int check_msg(const unsigned char *buf, size_t len)
{
    uint64_t sd;

    memcpy(&sd, buf, sizeof(sd));
    return (sd >> 48) == 0 && tap_check(buf + sizeof(sd), len - sizeof(sd),
                                        sd);
}

static void *worker(void *arg)
{
    int t = (int)(long)arg, ok = 1;
    unsigned char *sb = malloc(BIG), *rb = malloc(BIG);
    unsigned char (*ws)[SMALL] = malloc(sizeof(*ws) * W), wr[SMALL];

    if (sb == NULL || rb == NULL || ws == NULL) {
        ok_big[t] = ok_win[t] = 0;
        return NULL;
    }
    for (int r = 0; r < 2 * ROUNDS && ok; r++) {
        MPI_Status st;
        int count = BIG, tag = r < ROUNDS ? t : NT;  /* own, then shared */

        if (rank == 0) {
            fill_msg(sb, BIG, seed(rank, t, r, 0));
            ok = MPI_Send(sb, BIG, MPI_BYTE, peer, tag, MPI_COMM_WORLD) ==
                 MPI_SUCCESS && check_msg(sb, BIG);
        } else {
            ok = MPI_Recv(rb, BIG, MPI_BYTE, peer, tag, MPI_COMM_WORLD,
                          &st) == MPI_SUCCESS;
            MPI_Get_count(&st, MPI_BYTE, &count);
            ok = ok && st.MPI_TAG == tag && count == BIG &&
                 check_msg(rb, BIG) &&
                 (tag == NT || memcmp(rb, &(uint64_t){ seed(peer, t, r, 0) },
                                      8) == 0);
        }
        if (!ok)
            tap_diag("thread %d round %d: message wrong (count %d)", t, r,
                     count);
    }
    ok_big[t] = ok;
    ok = 1;
    for (int r = 0; r < ROUNDS && ok; r++) {
        MPI_Request req[2 * W];
        MPI_Status st[2 * W];
        int whole = 0;

        for (int j = 0; j < W; j++) {
            tap_fill(ws[j], SMALL, seed(rank, t, r, j + 1));
            MPI_Irecv(wr, SMALL, MPI_BYTE, peer, 100 + t, MPI_COMM_WORLD,
                      &req[j]);
            MPI_Isend(ws[j], SMALL, MPI_BYTE, peer, 100 + t, MPI_COMM_WORLD,
                      &req[W + j]);
        }
        ok = MPI_Waitall(2 * W, req, st) == MPI_SUCCESS;
        for (int j = 0; j < W && ok; j++) {
            int count = -1;

            MPI_Get_count(&st[j], MPI_BYTE, &count);
            ok = st[j].MPI_TAG == 100 + t && count == SMALL;
        }
        for (int j = 0; j < W && !whole; j++)
            whole = tap_check(wr, SMALL, seed(peer, t, r, j + 1));
        ok = ok && whole;
        if (!ok)
            tap_diag("thread %d round %d: window wrong", t, r);
    }
    ok_win[t] = ok;
    free(sb);
    free(rb);
    free(ws);
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t th[NT];
    int provided = MPI_THREAD_SINGLE, big = 1, win = 1;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    peer = 1 - rank;
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            printf("1..0 # SKIP MPI_THREAD_MULTIPLE not granted (%d)\n",
                   provided);
        MPI_Finalize();
        return 0;
    }
    tap_plan(2);
    for (int t = 0; t < NT; t++)
        pthread_create(&th[t], NULL, worker, (void *)(long)t);
    for (int t = 0; t < NT; t++) {
        pthread_join(th[t], NULL);
        big &= ok_big[t];
        win &= ok_win[t];
    }
    tap_ok(big, "%d threads sending %d B messages: data, tags, sizes",
           NT, BIG);
    tap_ok(win, "%d threads each with a window of %d receives into one "
           "buffer: statuses, one message whole", NT, W);
    MPI_Finalize();
    return tap_status();
}
