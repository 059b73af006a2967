/* ftw-test: np=2 mode=ftwrap timeout=120 */
/*
 * rndv_auto_hot - FTW_XPORT=auto (the default) picks a send's transport
 * on this host by size, by where its bytes lie, and by whether the
 * sender's push slots take the message whole (FTW_SHM_PUSH; this file
 * with the default 16 slots of 64 KiB, rndv_auto_hot_nopush with none).
 *
 * Rank 1 sends to rank 0; every message is checked (checksum, count).
 * Asserts, from rank 0's pull counters:
 *  - a window of 16 x 256 KiB sends from one buffer (osu_bw's window):
 *    with push slots every message goes through shm, copied out of the
 *    slots the sender filled ahead (rndv_shm_pushed); without, every one
 *    is pulled by cma (the same bytes sent again are in cache, where one
 *    copy beats two);
 *  - 16 nonblocking round trips of 256 KiB from one buffer (MPI_Isend,
 *    MPI_Wait, one message in flight, as a ping-pong), 16 blocking ones
 *    (MPI_Send) and 16 rounds of a persistent 256 KiB send (MPI_Send_init,
 *    MPI_Start, MPI_Wait; the data changed each round): the same, shm
 *    with push slots, cma without;
 *  - a window of 128 KiB sends from 16 buffers goes through the shm
 *    pipeline, all 16, unless the sender stalled it (rndv_shm_stalls
 *    moved: the rest of such a pull and the next ones take cma);
 *  - a window of 1 MiB sends from one buffer also goes through the
 *    pipeline (the same rule).
 * A shm pull the sender stalled is let through as cma in every case.
 */
#include "tap.h"

#include <stdlib.h>
#include <unistd.h>

#define WIN 16

typedef struct {
    long long cma, shm, stalls, pushed;
} pulls_t;

static pulls_t pulls_now(void)
{
    return (pulls_t){ tap_ftw_stat("rndv_cma"), tap_ftw_stat("rndv_shm"),
                      tap_ftw_stat("rndv_shm_stalls"),
                      tap_ftw_stat("rndv_shm_pushed") };
}

/* One window of WIN messages of len bytes from rank 1 (from one buffer
 * if onebuf, else from WIN) into WIN buffers of rank 0; 1 if every call
 * succeeded and every message arrived whole. */
static int window(int rank, size_t len, int onebuf, int seed,
                  unsigned char **bufs)
{
    MPI_Request req[WIN];
    MPI_Status st[WIN];
    int ok = 1;

    /* The data first: a sender that computes between its posts stalls
     * the pipeline (rndv_shm_stall tests that). */
    for (int i = 0; i < (onebuf ? 1 : WIN); i++)
        if (rank == 1)
            tap_fill(bufs[i], len, (uint64_t)(seed + i));
    for (int i = 0; i < WIN && rank == 0; i++)
        memset(bufs[i], 0, len);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < WIN; i++) {
        if (rank == 1)
            ok &= MPI_Isend(bufs[onebuf ? 0 : i], (int)len, MPI_BYTE, 0, i,
                            MPI_COMM_WORLD, &req[i]) == MPI_SUCCESS;
        else
            ok &= MPI_Irecv(bufs[i], (int)len, MPI_BYTE, 1, i,
                            MPI_COMM_WORLD, &req[i]) == MPI_SUCCESS;
    }
    ok &= MPI_Waitall(WIN, req, st) == MPI_SUCCESS;
    for (int i = 0; i < WIN && rank == 0; i++) {
        int n = -1;

        MPI_Get_count(&st[i], MPI_BYTE, &n);
        ok &= n == (int)len &&
              tap_check(bufs[i], len, (uint64_t)(seed + (onebuf ? 0 : i)));
    }
    return ok;
}

/* A window that goes through the shm pipeline: every message pulled
 * there, unless the sender stalled it (then the rest by cma). */
static void piped(int rank, size_t len, int onebuf, int seed,
                  unsigned char **bufs, const char *what)
{
    pulls_t a = pulls_now(), b;
    int ok = window(rank, len, onebuf, seed, bufs);

    b = pulls_now();
    tap_ok(ok && (rank != 0 ||
                  (b.cma - a.cma + b.shm - a.shm == WIN &&
                   (b.shm - a.shm == WIN || b.stalls > a.stalls))),
           "%s: intact, through the pipeline (shm +%lld, cma +%lld, "
           "stalls +%lld)", what, b.shm - a.shm, b.cma - a.cma,
           b.stalls - a.stalls);
}

/* A measured step moved the counters from a to b: all WIN messages
 * through shm, out of push slots (push) or by cma (!push), a stalled
 * sender's let through as cma. */
static int went(pulls_t a, pulls_t b, int push)
{
    if (b.cma - a.cma + b.shm - a.shm != WIN)
        return 0;
    if (b.stalls > a.stalls)
        return 1;
    return push ? b.shm - a.shm == WIN && b.pushed > a.pushed
                : b.cma - a.cma == WIN;
}

/* WIN round trips of len bytes from one buffer of rank 1: MPI_Isend and
 * MPI_Wait (or MPI_Send if blocking), then a zero-byte answer from rank
 * 0, which receives into bufs[1]; 1 if all arrived whole. */
static int round_trips(int rank, size_t len, int seed, unsigned char **bufs,
                       int blocking)
{
    MPI_Request req;
    int ok = 1;

    if (rank == 1)
        tap_fill(bufs[0], len, (uint64_t)seed);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int r = 0; r < WIN && ok; r++) {
        if (rank == 1 && blocking) {
            ok &= MPI_Send(bufs[0], (int)len, MPI_BYTE, 0, 7,
                           MPI_COMM_WORLD) == MPI_SUCCESS &&
                  MPI_Recv(NULL, 0, MPI_BYTE, 0, 8, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE) == MPI_SUCCESS;
        } else if (rank == 1) {
            ok &= MPI_Isend(bufs[0], (int)len, MPI_BYTE, 0, 7,
                            MPI_COMM_WORLD, &req) == MPI_SUCCESS &&
                  MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
                  MPI_Recv(NULL, 0, MPI_BYTE, 0, 8, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE) == MPI_SUCCESS;
        } else {
            memset(bufs[1], 0, len);
            ok &= MPI_Irecv(bufs[1], (int)len, MPI_BYTE, 1, 7,
                            MPI_COMM_WORLD, &req) == MPI_SUCCESS &&
                  MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
                  tap_check(bufs[1], len, (uint64_t)seed) &&
                  MPI_Send(NULL, 0, MPI_BYTE, 1, 8, MPI_COMM_WORLD) ==
                  MPI_SUCCESS;
        }
    }
    return ok;
}

/* 16 rounds of a persistent send of len bytes from rank 1, new data
 * each round, into one buffer of rank 0; 1 if all arrived whole. */
static int persistent(int rank, size_t len, int seed, unsigned char *buf)
{
    MPI_Request req;
    int ok = 1;

    if (rank == 1)
        ok &= MPI_Send_init(buf, (int)len, MPI_BYTE, 0, 99, MPI_COMM_WORLD,
                            &req) == MPI_SUCCESS;
    for (int r = 0; r < WIN && ok; r++) {
        if (rank == 1) {
            tap_fill(buf, len, (uint64_t)(seed + r));
            ok &= MPI_Start(&req) == MPI_SUCCESS &&
                  MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        } else {
            memset(buf, 0, len);
            ok &= MPI_Recv(buf, (int)len, MPI_BYTE, 1, 99, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE) == MPI_SUCCESS &&
                  tap_check(buf, len, (uint64_t)(seed + r));
        }
    }
    if (rank == 1)
        MPI_Request_free(&req);
    return ok;
}

int main(int argc, char **argv)
{
    const size_t big = (size_t)1 << 20;
    unsigned char *bufs[WIN];
    const char *env = getenv("FTW_SHM_PUSH"), *via;
    int push = env == NULL || atoi(env) > 0;
    pulls_t a, b;
    int rank, ok;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < WIN; i++)
        if ((bufs[i] = malloc(big)) == NULL)
            MPI_Abort(MPI_COMM_WORLD, 2);
    /* More ranks than CPUs: waits sleep, and auto takes cma for all. */
    if (!tap_need_cpus(2, "for the shm pipeline"))
        return 0;
    tap_plan(6);
    via = push ? "shm, from push slots" : "cma";

    /* The first message from the buffer is not yet in cache: a window
     * before the measured one makes it the previous send's buffer. */
    window(rank, 256 << 10, 1, 1, bufs);
    a = pulls_now();
    ok = window(rank, 256 << 10, 1, 2, bufs);
    b = pulls_now();
    tap_ok(ok && (rank != 0 || went(a, b, push)),
           "16 x 256 KiB from one buffer: intact, %s (cma +%lld, shm +%lld, "
           "pushed +%lld, stalls +%lld)", via, b.cma - a.cma, b.shm - a.shm,
           b.pushed - a.pushed, b.stalls - a.stalls);

    for (int blocking = 0; blocking < 2; blocking++) {
        a = pulls_now();
        ok = round_trips(rank, 256 << 10, 6 + blocking, bufs, blocking);
        b = pulls_now();
        tap_ok(ok && (rank != 0 || went(a, b, push)),
               "16 %s round trips of 256 KiB from one buffer: intact, %s "
               "(cma +%lld, shm +%lld, pushed +%lld, stalls +%lld)",
               blocking ? "blocking" : "nonblocking", via, b.cma - a.cma,
               b.shm - a.shm, b.pushed - a.pushed, b.stalls - a.stalls);
    }

    piped(rank, 128 << 10, 0, 3, bufs, "16 x 128 KiB from 16 buffers");
    piped(rank, big, 1, 4, bufs, "16 x 1 MiB from one buffer");

    a = pulls_now();
    ok = persistent(rank, 256 << 10, 5, bufs[0]);
    b = pulls_now();
    tap_ok(ok && (rank != 0 || went(a, b, push)),
           "16 rounds of a persistent 256 KiB send: intact, %s (cma +%lld, "
           "shm +%lld, pushed +%lld, stalls +%lld)", via, b.cma - a.cma,
           b.shm - a.shm, b.pushed - a.pushed, b.stalls - a.stalls);

    for (int i = 0; i < WIN; i++)
        free(bufs[i]);
    MPI_Finalize();
    return tap_status();
}
