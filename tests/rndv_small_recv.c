/* ftw-test: np=2 mode=both timeout=180 env=FTW_RNDV_THRESHOLD=64k */
/*
 * rndv_small_recv - nonblocking receives below the rendezvous threshold
 * (64 KiB here), which ftwrap posts without rendezvous state.
 *
 * Asserts:
 *  - windows of 64 MPI_Irecv of 0, 8, 63, 64, 65, 1 KiB and 8 KiB
 *    (each into its own slot) against 64 MPI_Isend, completed by
 *    MPI_Waitall, an MPI_Testall loop and an MPI_Waitsome loop: every
 *    message arrives whole (checksummed per message), every status names
 *    the source, the tag and the size, bytes around each slot untouched;
 *  - receives of 0, 16, 1000 and 60000 bytes (the first two under the
 *    64-byte RTS header) posted for messages of 300000 bytes (sent
 *    through the rendezvous): each MPI_Wait gives MPI_ERR_TRUNCATE and
 *    every blocking MPI_Send returns MPI_SUCCESS (its receiver told it).
 * Natively the same assertions hold (transparency).
 */
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define W 64
#define WINDOWS 6
#define SLOT (8192 + 64)        /* a message and its guard bytes */
#define GUARD 0xA5

static int rank;
static unsigned char *sbuf, *rbuf;

static uint64_t seed_of(int size, int window, int w)
{
    return ((uint64_t)size << 32) ^ ((uint64_t)window << 16) ^ (uint64_t)w;
}

/* Wait for the window: 0 MPI_Waitall, 1 MPI_Testall loop, 2 MPI_Waitsome
 * loop; statuses into st. */
static int complete(int how, MPI_Request reqs[], MPI_Status st[])
{
    int flag = 0, done = 0, out, idx[W];
    MPI_Status tmp[W];

    if (how == 0)
        return MPI_Waitall(W, reqs, st);
    if (how == 1) {
        while (!flag)
            if (MPI_Testall(W, reqs, &flag, st) != MPI_SUCCESS)
                return MPI_ERR_OTHER;
        return MPI_SUCCESS;
    }
    while (done < W) {
        if (MPI_Waitsome(W, reqs, &out, idx, tmp) != MPI_SUCCESS)
            return MPI_ERR_OTHER;
        for (int k = 0; k < out; k++)
            st[idx[k]] = tmp[k];
        done += out;
    }
    return MPI_SUCCESS;
}

/* One size: WINDOWS windows, each completed a different way. */
static int windows_of(int size)
{
    MPI_Request reqs[W];
    MPI_Status st[W];
    int ok = 1;

    for (int win = 0; win < WINDOWS; win++) {
        int how = win % 3, count;

        if (rank == 0) {
            for (int w = 0; w < W; w++) {
                unsigned char *p = sbuf + (size_t)w * SLOT;

                tap_fill(p, (size_t)size, seed_of(size, win, w));
                ok &= MPI_Isend(p, size, MPI_BYTE, 1, w, MPI_COMM_WORLD,
                                &reqs[w]) == MPI_SUCCESS;
            }
            ok &= complete(how, reqs, st) == MPI_SUCCESS;
            ok &= MPI_Recv(NULL, 0, MPI_BYTE, 1, W, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE) == MPI_SUCCESS;
            continue;
        }
        memset(rbuf, GUARD, (size_t)W * SLOT);
        for (int w = 0; w < W; w++)
            ok &= MPI_Irecv(rbuf + (size_t)w * SLOT, size, MPI_BYTE, 0, w,
                            MPI_COMM_WORLD, &reqs[w]) == MPI_SUCCESS;
        ok &= complete(how, reqs, st) == MPI_SUCCESS;
        ok &= MPI_Send(NULL, 0, MPI_BYTE, 0, W, MPI_COMM_WORLD) ==
              MPI_SUCCESS;
        for (int w = 0; w < W; w++) {
            const unsigned char *p = rbuf + (size_t)w * SLOT;

            MPI_Get_count(&st[w], MPI_BYTE, &count);
            if (st[w].MPI_SOURCE != 0 || st[w].MPI_TAG != w ||
                count != size ||
                !tap_check(p, (size_t)size, seed_of(size, win, w)) ||
                p[size] != GUARD) {
                tap_diag("size %d window %d message %d: source %d tag %d "
                         "count %d", size, win, w, st[w].MPI_SOURCE,
                         st[w].MPI_TAG, count);
                ok = 0;
            }
        }
    }
    return ok;
}

/* Receives too small for rendezvous messages: truncated, senders done. */
static int truncated(void)
{
    static const int caps[] = { 0, 16, 1000, 60000 };
    const int n = (int)(sizeof(caps) / sizeof(caps[0])), len = 300000;
    MPI_Request reqs[4];
    int ok = 1;

    if (rank == 0) {
        tap_fill(sbuf, (size_t)len, 77);
        for (int i = 0; i < n; i++) {
            int rc = MPI_Send(sbuf, len, MPI_BYTE, 1, 100 + i,
                              MPI_COMM_WORLD);

            if (rc != MPI_SUCCESS) {
                tap_diag("MPI_Send of %d bytes into %d: error %d", len,
                         caps[i], rc);
                ok = 0;
            }
        }
        return ok;
    }
    for (int i = 0; i < n; i++)
        ok &= MPI_Irecv(rbuf + (size_t)i * 65536, caps[i], MPI_BYTE, 0,
                        100 + i, MPI_COMM_WORLD, &reqs[i]) == MPI_SUCCESS;
    for (int i = 0; i < n; i++) {
        MPI_Status st;
        int cls = MPI_SUCCESS, rc = MPI_Wait(&reqs[i], &st);

        MPI_Error_class(rc, &cls);
        if (cls != MPI_ERR_TRUNCATE) {
            tap_diag("receive of %d bytes into %d: class %d, expected "
                     "MPI_ERR_TRUNCATE", len, caps[i], cls);
            ok = 0;
        }
    }
    return ok;
}

int main(int argc, char **argv)
{
    static const int sizes[] = { 0, 8, 63, 64, 65, 1024, 8192 };
    const int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    sbuf = malloc((size_t)W * SLOT > 300000 ? (size_t)W * SLOT : 300000);
    rbuf = malloc((size_t)W * SLOT);
    if (sbuf == NULL || rbuf == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    tap_plan(nsizes + 1);
    for (int i = 0; i < nsizes; i++)
        tap_ok(windows_of(sizes[i]), "windows of 64 receives of %d B "
               "(Waitall, Testall, Waitsome): data, statuses, guards",
               sizes[i]);
    tap_ok(truncated(), "receives of 0, 16, 1000, 60000 B of 300000 B "
           "messages: MPI_ERR_TRUNCATE, the sends succeed");
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return tap_status();
}
