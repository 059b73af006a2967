/* ftw-test: np=2 mode=both timeout=240 env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=cma */
/*
 * rndv_threads - large messages from 4 threads per rank at once under
 * MPI_THREAD_MULTIPLE, through ftwrap's own rendezvous (threshold 64
 * KiB; FTW_XPORT=cma here, shm and auto in rndv_threads_shm and
 * rndv_threads_auto).  Natively the same assertions hold (transparency).
 * Both ranks' threads send to and receive from each other at once, each
 * thread t on tags of its own.
 *
 * Asserts, every payload checked against its pattern:
 *  - blocking MPI_Send/MPI_Recv of 4 MiB + 5, on the thread's own tag and
 *    then on one tag all threads share (any thread's message may match):
 *    data, tags, sizes;
 *  - windows of 6 MPI_Isend and 6 MPI_Irecv (MPI_ANY_SOURCE) of 64 KiB to
 *    4 MiB from and into distinct buffers, completed by MPI_Waitall: each
 *    receive gets the window's message of its own position (order per
 *    sender and thread), its size and tag right;
 *  - the same windows from one send buffer into one receive buffer (as a
 *    bandwidth loop does): every status right, and the receive buffer
 *    holds the pattern over the largest message's length;
 *  - MPI_Probe + MPI_Recv and MPI_Improbe + MPI_Mrecv (MPI_ANY_SOURCE)
 *    of 64 KiB + 1 to 3 MiB: the probed size is the message's, order per
 *    sender and thread kept;
 *  - under ftwrap: the rendezvous pulled messages on both ranks
 *    (FTW_Stat_get), so it really runs under MPI_THREAD_MULTIPLE;
 *  - MPI_Init_thread granted MPI_THREAD_MULTIPLE (else skipped).
 */
#include "tap.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NT 4
#define BIG ((4 << 20) + 5)
#define ROUNDS 10
#define W 6
#define WROUNDS 6
#define NPROBE 12

static int rank, peer;
static int ok_big[NT], ok_win[NT], ok_one[NT], ok_probe[NT];
static const int wsizes[] = { 64 << 10, (256 << 10) + 3, 1 << 20, 4 << 20,
                              (64 << 10) + 7, (2 << 20) + 1 };
static const int psizes[] = { (64 << 10) + 1, 200 << 10, (1 << 20) + 5,
                              3 << 20 };

static uint64_t seed(int src, int t, int r, int j)
{
    return ((uint64_t)src << 48) | ((uint64_t)t << 40) |
           ((uint64_t)r << 16) | (uint64_t)j;
}

/* A message that names its own pattern: the seed in its first 8 bytes,
 * the pattern after. */
static void fill_msg(unsigned char *buf, size_t len, uint64_t sd)
{
    memcpy(buf, &sd, sizeof(sd));
    tap_fill(buf + sizeof(sd), len - sizeof(sd), sd);
}

/* The seed a message names, if its pattern holds over len bytes; else
 * ~0. */
static uint64_t msg_seed(const unsigned char *buf, size_t len)
{
    uint64_t sd;

    memcpy(&sd, buf, sizeof(sd));
    return tap_check(buf + sizeof(sd), len - sizeof(sd), sd) ? sd : ~0ull;
}

static int wsize(int r, int j)
{
    return wsizes[(r + j) % W];
}

/* Blocking messages, own tag then a shared one. */
static int run_big(int t, unsigned char *sb, unsigned char *rb)
{
    int ok = 1;

    for (int r = 0; r < 2 * ROUNDS && ok; r++) {
        MPI_Status st;
        int count = -1, tag = r < ROUNDS ? t : NT;
        uint64_t sd;

        /* Rank 0 sends first, rank 1 receives first: no cycle. */
        fill_msg(sb, BIG, seed(rank, t, r, 0));
        if (rank == 0)
            ok = MPI_Send(sb, BIG, MPI_BYTE, peer, tag, MPI_COMM_WORLD) ==
                 MPI_SUCCESS;
        ok = ok && MPI_Recv(rb, BIG, MPI_BYTE, peer, tag, MPI_COMM_WORLD,
                            &st) == MPI_SUCCESS;
        if (rank == 1)
            ok = ok && MPI_Send(sb, BIG, MPI_BYTE, peer, tag,
                                MPI_COMM_WORLD) == MPI_SUCCESS;
        MPI_Get_count(&st, MPI_BYTE, &count);
        sd = msg_seed(rb, BIG);
        ok = ok && st.MPI_TAG == tag && count == BIG && sd != ~0ull &&
             (sd >> 48) == (uint64_t)peer &&
             (tag == NT || sd == seed(peer, t, r, 0));
        if (!ok)
            tap_diag("thread %d round %d: blocking message wrong (count %d)",
                     t, r, count);
    }
    return ok;
}

/* Windows from and into distinct buffers. */
static int run_windows(int t, unsigned char **sw, unsigned char **rw)
{
    int ok = 1, tag = 100 + t;

    for (int r = 0; r < WROUNDS && ok; r++) {
        MPI_Request req[2 * W];
        MPI_Status st[2 * W];

        for (int j = 0; j < W; j++) {
            fill_msg(sw[j], (size_t)wsize(r, j), seed(rank, t, r, j));
            memset(rw[j], 0xee, 16);
            MPI_Irecv(rw[j], 4 << 20, MPI_BYTE, MPI_ANY_SOURCE, tag,
                      MPI_COMM_WORLD, &req[j]);
        }
        for (int j = 0; j < W; j++)
            MPI_Isend(sw[j], wsize(r, j), MPI_BYTE, peer, tag,
                      MPI_COMM_WORLD, &req[W + j]);
        ok = MPI_Waitall(2 * W, req, st) == MPI_SUCCESS;
        for (int j = 0; j < W && ok; j++) {
            int count = -1;

            MPI_Get_count(&st[j], MPI_BYTE, &count);
            ok = st[j].MPI_TAG == tag && st[j].MPI_SOURCE == peer &&
                 count == wsize(r, j) &&
                 msg_seed(rw[j], (size_t)count) == seed(peer, t, r, j);
            if (!ok)
                tap_diag("thread %d window %d receive %d: count %d tag %d",
                         t, r, j, count, st[j].MPI_TAG);
        }
    }
    return ok;
}

/* Windows from one buffer into one buffer. */
static int run_onebuf(int t, unsigned char *sb, unsigned char *rb)
{
    int ok = 1, tag = 200 + t;

    for (int r = 0; r < WROUNDS && ok; r++) {
        MPI_Request req[2 * W];
        MPI_Status st[2 * W];
        int most = 0;

        /* One pattern: every message is a prefix of it. */
        tap_fill(sb, 4 << 20, seed(rank, t, r, 99));
        memset(rb, 0xee, 4 << 20);
        for (int j = 0; j < W; j++) {
            MPI_Irecv(rb, 4 << 20, MPI_BYTE, MPI_ANY_SOURCE, tag,
                      MPI_COMM_WORLD, &req[j]);
            most = wsize(r, j) > most ? wsize(r, j) : most;
        }
        for (int j = 0; j < W; j++)
            MPI_Isend(sb, wsize(r, j), MPI_BYTE, peer, tag, MPI_COMM_WORLD,
                      &req[W + j]);
        ok = MPI_Waitall(2 * W, req, st) == MPI_SUCCESS;
        for (int j = 0; j < W && ok; j++) {
            int count = -1;

            MPI_Get_count(&st[j], MPI_BYTE, &count);
            ok = st[j].MPI_TAG == tag && count == wsize(r, j);
        }
        ok = ok && tap_check(rb, (size_t)most, seed(peer, t, r, 99));
        if (!ok)
            tap_diag("thread %d one-buffer window %d wrong", t, r);
    }
    return ok;
}

/* Probes: rank 0's threads send, rank 1's probe and receive; then the
 * other way. */
static int run_probes(int t, unsigned char *sb)
{
    int ok = 1, tag = 300 + t;

    for (int dir = 0; dir < 2 && ok; dir++) {
        if (rank == dir) {
            for (int j = 0; j < NPROBE && ok; j++) {
                int n = psizes[(j + t) % 4];

                fill_msg(sb, (size_t)n, seed(rank, t, dir, j));
                ok = MPI_Send(sb, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD) ==
                     MPI_SUCCESS;
            }
            continue;
        }
        for (int j = 0; j < NPROBE && ok; j++) {
            int n = psizes[(j + t) % 4], count = -1, flag = 0, c2 = -1;
            MPI_Message msg;
            MPI_Status st;
            unsigned char *rb;

            if (j % 2 == 0)
                ok = MPI_Probe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st) ==
                     MPI_SUCCESS;
            else
                while (ok && !flag)
                    ok = MPI_Improbe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD,
                                     &flag, &msg, &st) == MPI_SUCCESS;
            MPI_Get_count(&st, MPI_BYTE, &count);
            ok = ok && count == n && st.MPI_SOURCE == peer;
            rb = malloc((size_t)(count > 0 ? count : 1));
            if (!ok || rb == NULL) {
                tap_diag("thread %d probe %d: probed %d bytes, sent %d", t, j,
                         count, n);
                free(rb);
                ok = 0;
                break;
            }
            if (j % 2 == 0)
                ok = MPI_Recv(rb, count, MPI_BYTE, st.MPI_SOURCE, tag,
                              MPI_COMM_WORLD, &st) == MPI_SUCCESS;
            else
                ok = MPI_Mrecv(rb, count, MPI_BYTE, &msg, &st) ==
                     MPI_SUCCESS;
            MPI_Get_count(&st, MPI_BYTE, &c2);
            ok = ok && c2 == n &&
                 msg_seed(rb, (size_t)n) == seed(peer, t, dir, j);
            if (!ok)
                tap_diag("thread %d probe %d: received %d bytes, wrong or "
                         "out of order", t, j, c2);
            free(rb);
        }
    }
    return ok;
}

static void *worker(void *arg)
{
    int t = (int)(long)arg;
    unsigned char *sb = malloc(BIG), *rb = malloc(BIG);
    unsigned char *sw[W], *rw[W];
    int have = sb != NULL && rb != NULL;

    for (int j = 0; j < W; j++) {
        sw[j] = malloc(4 << 20);
        rw[j] = malloc(4 << 20);
        have = have && sw[j] != NULL && rw[j] != NULL;
    }
    if (have) {
        ok_big[t] = run_big(t, sb, rb);
        ok_win[t] = run_windows(t, sw, rw);
        ok_one[t] = run_onebuf(t, sb, rb);
        ok_probe[t] = run_probes(t, sb);
    } else {
        tap_diag("thread %d: out of memory", t);
    }
    for (int j = 0; j < W; j++) {
        free(sw[j]);
        free(rw[j]);
    }
    free(sb);
    free(rb);
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t th[NT];
    int provided = MPI_THREAD_SINGLE, big = 1, win = 1, one = 1, probe = 1;
    long long pulls;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    peer = 1 - rank;
    if (!tap_need_multiple(provided))
        return 0;
    tap_plan(5);
    for (int t = 0; t < NT; t++)
        pthread_create(&th[t], NULL, worker, (void *)(long)t);
    for (int t = 0; t < NT; t++) {
        pthread_join(th[t], NULL);
        big &= ok_big[t];
        win &= ok_win[t];
        one &= ok_one[t];
        probe &= ok_probe[t];
    }
    tap_ok(big, "%d threads sending %d B messages: data, tags, sizes",
           NT, BIG);
    tap_ok(win, "%d threads with windows of %d sends and receives of 64 KiB "
           "to 4 MiB, distinct buffers: data in order", NT, W);
    tap_ok(one, "%d threads with windows from one buffer into one buffer: "
           "statuses, data", NT);
    tap_ok(probe, "%d threads probing (MPI_Probe, MPI_Improbe) and "
           "receiving 64 KiB + 1 to 3 MiB: sizes, data, order", NT);
    pulls = tap_rndv_pulls();
    if (pulls >= 0) {
        tap_diag("rank %d: rendezvous pulls: cma %lld, shm %lld", rank,
                 tap_ftw_stat("rndv_cma"), tap_ftw_stat("rndv_shm"));
        tap_ok(pulls > 0, "ftwrap's rendezvous pulled messages under "
               "MPI_THREAD_MULTIPLE");
    } else {
        tap_ok(1, "ftwrap's rendezvous pulled messages # SKIP native run");
    }
    MPI_Finalize();
    return tap_status();
}
