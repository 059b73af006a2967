/* ftw-test: np=2 mode=both timeout=120 */
/*
 * bsend_mt - buffered sends from 4 threads at once under
 * MPI_THREAD_MULTIPLE, into one attached buffer.
 *
 * Rank 0's threads each buffer MSGS messages on a tag of their own
 * (sizes 0 to 4000 bytes, every tenth 300 KiB + 3, over the rendezvous
 * threshold; MPI_Bsend, MPI_Ibsend and a restarted MPI_Bsend_init in
 * turn), the send buffer rewritten right after each call.  Rank 1's
 * threads receive them on their tags only after every send was buffered
 * (a barrier), so all messages are in the attached buffer at once.
 * Asserts:
 *  - every call returned MPI_SUCCESS;
 *  - every message arrives whole, in order per thread (checksums, sizes);
 *  - MPI_Buffer_detach, after the receives, returns the buffer attached;
 *  - then, under ftwrap (the MPIs' own make one progress pass before
 *    they fail for want of room), a buffer with room for two 4000-byte
 *    messages carries 200 such messages sent in a row, all intact: each
 *    buffered send takes back the space of the messages already gone;
 *  - MPI_Init_thread granted MPI_THREAD_MULTIPLE (else skipped).
 */
#include "tap.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NT 4
#define MSGS 60
#define BIG (300 * 1024 + 3)

static int rank;
static MPI_Request persist[NT];

static int len_of(int t, int i)
{
    return i % 10 == 9 ? BIG : (i * 397 + t * 61) % 4001;
}

static uint64_t seed_of(int t, int i)
{
    return ((uint64_t)(t + 1) << 32) | (uint64_t)i;
}

static void *sender(void *arg)
{
    int t = (int)(intptr_t)arg, ok = 1;
    char *buf = calloc(1, BIG);

    ok = buf != NULL && MPI_Bsend_init(buf, BIG, MPI_BYTE, 1, 100 + t,
                                       MPI_COMM_WORLD, &persist[t]) ==
                        MPI_SUCCESS;
    for (int i = 0; i < MSGS && ok; i++) {
        int len = len_of(t, i), rc;
        MPI_Request r;

        tap_fill(buf, (size_t)len, seed_of(t, i));
        switch (i % 3) {
        case 0:
            rc = MPI_Bsend(buf, len, MPI_BYTE, 1, 100 + t, MPI_COMM_WORLD);
            break;
        case 1:
            rc = MPI_Ibsend(buf, len, MPI_BYTE, 1, 100 + t, MPI_COMM_WORLD,
                            &r);
            if (rc == MPI_SUCCESS)
                rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
            break;
        default:
            /* The persistent request's count is BIG: its message is a
             * whole BIG buffer, whatever len says. */
            tap_fill(buf, BIG, seed_of(t, i));
            rc = MPI_Start(&persist[t]);
            if (rc == MPI_SUCCESS)
                rc = MPI_Wait(&persist[t], MPI_STATUS_IGNORE);
            break;
        }
        memset(buf, 0xEE, BIG);     /* the copy was taken */
        if (rc != MPI_SUCCESS) {
            tap_diag("thread %d message %d: error %d", t, i, rc);
            ok = 0;
        }
    }
    if (buf != NULL)
        MPI_Request_free(&persist[t]);
    free(buf);
    return (void *)(intptr_t)ok;
}

static void *receiver(void *arg)
{
    int t = (int)(intptr_t)arg, ok = 1;
    char *buf = malloc(BIG);

    for (int i = 0; i < MSGS && ok && buf != NULL; i++) {
        int want = i % 3 == 2 ? BIG : len_of(t, i), got = -1;
        MPI_Status st;

        ok = MPI_Recv(buf, BIG, MPI_BYTE, 0, 100 + t, MPI_COMM_WORLD,
                      &st) == MPI_SUCCESS &&
             MPI_Get_count(&st, MPI_BYTE, &got) == MPI_SUCCESS &&
             got == want && tap_check(buf, (size_t)want, seed_of(t, i));
        if (!ok)
            tap_diag("thread %d message %d: %d bytes, expected %d", t, i,
                     got, want);
    }
    free(buf);
    return (void *)(intptr_t)(ok && buf != NULL);
}

/* One buffer with room for two 4000-byte messages, REUSE of them sent
 * one after another: each finds the space of those already gone. */
#define REUSE 200
static int reuse(void)
{
    char msg[4000], *b = NULL;
    int ok = 1, sz = 0, dsize = 0;
    void *d = NULL;

    if (rank == 1) {
        for (int i = 0; i < REUSE && ok; i++)
            ok = MPI_Recv(msg, sizeof(msg), MPI_BYTE, 0, 7, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE) == MPI_SUCCESS &&
                 tap_check(msg, sizeof(msg), 1000 + (uint64_t)i);
        return ok;
    }
    MPI_Pack_size((int)sizeof(msg), MPI_BYTE, MPI_COMM_WORLD, &sz);
    sz = 2 * (sz + MPI_BSEND_OVERHEAD);
    b = malloc((size_t)sz);
    ok = b != NULL && MPI_Buffer_attach(b, sz) == MPI_SUCCESS;
    for (int i = 0; i < REUSE && ok; i++) {
        tap_fill(msg, sizeof(msg), 1000 + (uint64_t)i);
        ok = MPI_Bsend(msg, sizeof(msg), MPI_BYTE, 1, 7, MPI_COMM_WORLD) ==
             MPI_SUCCESS;
        if (!ok)
            tap_diag("MPI_Bsend %d failed", i);
    }
    ok &= MPI_Buffer_detach(&d, &dsize) == MPI_SUCCESS && d == b &&
          dsize == sz;
    free(b);
    return ok;
}

int main(int argc, char **argv)
{
    int provided, ok = 1, size = 0, dsize = 0, own;
    pthread_t th[NT];
    void *dbuf = NULL;
    char *attached = NULL;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (!tap_need_size(2) || !tap_need_multiple(provided))
        return 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* The MPIs' own buffered sends make one progress pass before they
     * say no room, which an eager send may need more of: the third
     * check is ftwrap's (FTW_Stat_get is there). */
    own = tap_ftw_stat("rndv_cma") >= 0;
    tap_plan(own ? 3 : 2);
    if (rank == 0) {
        for (int t = 0; t < NT; t++)
            for (int i = 0; i < MSGS; i++) {
                int sz = 0;

                MPI_Pack_size(i % 3 == 2 ? BIG : len_of(t, i), MPI_BYTE,
                              MPI_COMM_WORLD, &sz);
                size += sz + MPI_BSEND_OVERHEAD;
            }
        attached = malloc((size_t)size);
        ok = attached != NULL &&
             MPI_Buffer_attach(attached, size) == MPI_SUCCESS;
        for (int t = 0; t < NT; t++)
            pthread_create(&th[t], NULL, sender, (void *)(intptr_t)t);
        for (int t = 0; t < NT; t++) {
            void *r;

            pthread_join(th[t], &r);
            ok &= (int)(intptr_t)r;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        for (int t = 0; t < NT; t++)
            pthread_create(&th[t], NULL, receiver, (void *)(intptr_t)t);
        for (int t = 0; t < NT; t++) {
            void *r;

            pthread_join(th[t], &r);
            ok &= (int)(intptr_t)r;
        }
    }
    tap_ok(ok, "%d threads x %d buffered messages (MPI_Bsend, MPI_Ibsend, "
           "MPI_Bsend_init; 0 B to 300 KiB), all buffered before any "
           "receive: every message intact and in order per thread", NT,
           MSGS);
    ok = 1;
    if (rank == 0)
        ok = MPI_Buffer_detach(&dbuf, &dsize) == MPI_SUCCESS &&
             dbuf == attached && dsize == size;
    tap_ok(ok, "MPI_Buffer_detach returns the buffer attached");
    free(attached);
    if (own)
        tap_ok(reuse(), "a buffer with room for 2 messages carries %d in a "
               "row (the space of those sent is taken back), intact",
               REUSE);
    MPI_Finalize();
    return tap_status();
}
