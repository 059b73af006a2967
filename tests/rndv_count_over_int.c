/* ftw-test: np=2 mode=both timeout=480 */
/*
 * rndv_count_over_int - large-count point-to-point messages whose count
 * does not fit an int (INT_MAX + 4099 elements, 2 GiB and a bit) go
 * through ftwrap's rendezvous like any other large message: rank 0
 * sends, rank 1 receives, every byte checked (natively the same
 * assertions hold, the rendezvous ones aside).  An MPI without the
 * large-count calls (MPI before 4.0) skips the test.
 *
 * Asserts, for each case: success; the receive's status gives
 * MPI_Get_count_c and MPI_Get_elements_c of the real count; every byte
 * of the message arrived; under ftwrap, rank 1 pulled exactly one more
 * rendezvous message of exactly the bytes received (FTW_Stat_get) and
 * rank 0 sent nothing natively:
 *  - MPI_Send_c into MPI_Recv_c of MPI_BYTE;
 *  - MPI_Isend_c into MPI_Irecv_c;
 *  - MPI_Send_init_c into MPI_Recv_init_c, started and waited for;
 *  - MPI_Sendrecv_c, the large half from rank 0 (8 bytes back);
 *  - a receive 5000 bytes too small: MPI_ERR_TRUNCATE on the receiver,
 *    success on the sender; under ftwrap the count is what fitted, all
 *    of it the message's first bytes;
 *  - a non-contiguous send of more than INT_MAX bytes (blocks of 3 KiB
 *    every 4 KiB, 699053 of them: packed by the sender, unpacked by the
 *    receiver) into a receive of the same type: the blocks in place, the
 *    gaps untouched.
 * Each rank has one buffer of 2.7 GiB; with ftwrap's packed copy and
 * bounce buffer (2 GiB each) at most about 9.4 GiB are in use at once.
 * Most of the run time is the first touch of that memory.
 */
#include "tap.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#if MPI_VERSION >= 4

#define N ((MPI_Count)INT_MAX + 4099)
#define SHORT 5000
/* The strided type: blocks of BLK bytes every STRIDE; NBLK of them hold
 * more than INT_MAX bytes. */
#define BLK 3072
#define STRIDE 4096
#define NBLK ((N + BLK - 1) / BLK)
#define SPAN (NBLK * STRIDE)
#define GAP 0xa5

static int rank;

/* Word w of the pattern of seed (a cheap mix); its bytes in memory order
 * are the pattern's bytes 8 w .. 8 w + 7. */
static inline uint64_t word_of(uint64_t seed, uint64_t w)
{
    uint64_t x = (seed ^ (w * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;

    return x ^ (x >> 31);
}

/* Bytes i0 .. i0 + len of the pattern into p (i0 a multiple of 8). */
static void fill(unsigned char *p, MPI_Count len, uint64_t seed,
                 MPI_Count i0)
{
    uint64_t nw = (uint64_t)len / 8, w0 = (uint64_t)i0 / 8, x;

    for (uint64_t w = 0; w < nw; w++) {
        x = word_of(seed, w0 + w);
        memcpy(p + 8 * w, &x, 8);
    }
    x = word_of(seed, w0 + nw);
    memcpy(p + 8 * nw, &x, (size_t)len % 8);
}

/* The first byte of p[0..len) that differs from the pattern's bytes
 * i0 .. i0 + len, or len. */
static MPI_Count first_bad(const unsigned char *p, MPI_Count len,
                           uint64_t seed, MPI_Count i0)
{
    uint64_t w0 = (uint64_t)i0 / 8;

    for (MPI_Count i = 0; i < len; i += 8) {
        uint64_t x = word_of(seed, w0 + (uint64_t)i / 8), y = ~x;
        size_t n = len - i < 8 ? (size_t)(len - i) : 8;

        memcpy(&y, p + i, n);
        if (n == 8 && y == x)
            continue;
        for (size_t b = 0; b < n; b++)
            if (p[i + (MPI_Count)b] != ((const unsigned char *)&x)[b])
                return i + (MPI_Count)b;
    }
    return len;
}

static unsigned char *alloc(MPI_Count len)
{
    unsigned char *p = malloc((size_t)len);

    if (p == NULL) {
        tap_diag("out of memory for %lld bytes", (long long)len);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

/* ftwrap's counters of rendezvous traffic (msgs -1 natively). */
typedef struct {
    long long msgs, bytes, native;
} counts_t;

static counts_t counts(void)
{
    counts_t c = { tap_rndv_pulls(), 0, tap_ftw_stat("rndv_native") };

    if (c.msgs >= 0)
        c.bytes = tap_ftw_stat("rndv_cma_bytes") +
                  tap_ftw_stat("rndv_shm_bytes");
    return c;
}

/* Under ftwrap: rank 1 pulled one more message, of exactly bytes; rank 0
 * sent none natively. */
static int pulled_one(const counts_t *before, MPI_Count bytes,
                      const char *what)
{
    counts_t now = counts();

    if (before->msgs < 0)
        return 1;
    if (rank == 0 && now.native != before->native) {
        tap_diag("%s: %lld sent natively", what, now.native - before->native);
        return 0;
    }
    if (rank == 1 && (now.msgs - before->msgs != 1 ||
                      now.bytes - before->bytes != bytes)) {
        tap_diag("%s: %lld messages, %lld bytes pulled (1, %lld expected)",
                 what, now.msgs - before->msgs, now.bytes - before->bytes,
                 (long long)bytes);
        return 0;
    }
    return 1;
}

/* The receiver's status names count elements of dt, bytes bytes (its
 * basic elements). */
static int status_count(const MPI_Status *st, MPI_Datatype dt,
                        MPI_Count count, MPI_Count bytes, const char *what)
{
    MPI_Count c = -1, e = -1;

    MPI_Get_count_c(st, dt, &c);
    MPI_Get_elements_c(st, dt, &e);
    if (c == count && e == bytes)
        return 1;
    tap_diag("%s: MPI_Get_count_c %lld, MPI_Get_elements_c %lld, not %lld "
             "and %lld", what, (long long)c, (long long)e, (long long)count,
             (long long)bytes);
    return 0;
}

/* Rank 1's verdict on a contiguous message of len bytes in buf. */
static int intact(const unsigned char *buf, MPI_Count len, uint64_t seed,
                  const char *what)
{
    MPI_Count bad = first_bad(buf, len, seed, 0);

    if (bad == len)
        return 1;
    tap_diag("%s: byte %lld of %lld differs", what, (long long)bad,
             (long long)len);
    return 0;
}

enum { SEND, ISEND, PERSISTENT, SENDRECV };
static const char *const form_name[] = {
    "MPI_Send_c -> MPI_Recv_c", "MPI_Isend_c -> MPI_Irecv_c",
    "MPI_Send_init_c -> MPI_Recv_init_c", "MPI_Sendrecv_c"
};

/* Rank 0's side of one contiguous message in form. */
static int send_form(int form, unsigned char *buf, uint64_t seed)
{
    MPI_Request r;
    char back[8];
    int ok = 1;

    fill(buf, N, seed, 0);
    switch (form) {
    case SEND:
        return mpi_ok(MPI_Send_c(buf, N, MPI_BYTE, 1, form, MPI_COMM_WORLD),
                      "MPI_Send_c");
    case ISEND:
        ok &= mpi_ok(MPI_Isend_c(buf, N, MPI_BYTE, 1, form, MPI_COMM_WORLD,
                                 &r), "MPI_Isend_c");
        return ok && mpi_ok(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait");
    case PERSISTENT:
        ok &= mpi_ok(MPI_Send_init_c(buf, N, MPI_BYTE, 1, form,
                                     MPI_COMM_WORLD, &r), "MPI_Send_init_c");
        ok &= ok && mpi_ok(MPI_Start(&r), "MPI_Start");
        ok &= ok && mpi_ok(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait");
        if (r != MPI_REQUEST_NULL)
            MPI_Request_free(&r);
        return ok;
    default:
        return mpi_ok(MPI_Sendrecv_c(buf, N, MPI_BYTE, 1, form, back,
                                     (MPI_Count)sizeof(back), MPI_BYTE, 1,
                                     form, MPI_COMM_WORLD,
                                     MPI_STATUS_IGNORE), "MPI_Sendrecv_c");
    }
}

/* Rank 1's side: the receive, its status in *st. */
static int recv_form(int form, unsigned char *buf, MPI_Status *st)
{
    char back[8] = { 0 };
    MPI_Request r;
    int ok = 1;

    switch (form) {
    case SEND:
        return mpi_ok(MPI_Recv_c(buf, N, MPI_BYTE, 0, form, MPI_COMM_WORLD,
                                 st), "MPI_Recv_c");
    case ISEND:
        ok &= mpi_ok(MPI_Irecv_c(buf, N, MPI_BYTE, 0, form, MPI_COMM_WORLD,
                                 &r), "MPI_Irecv_c");
        return ok && mpi_ok(MPI_Wait(&r, st), "MPI_Wait");
    case PERSISTENT:
        ok &= mpi_ok(MPI_Recv_init_c(buf, N, MPI_BYTE, 0, form,
                                     MPI_COMM_WORLD, &r), "MPI_Recv_init_c");
        ok &= ok && mpi_ok(MPI_Start(&r), "MPI_Start");
        ok &= ok && mpi_ok(MPI_Wait(&r, st), "MPI_Wait");
        if (r != MPI_REQUEST_NULL)
            MPI_Request_free(&r);
        return ok;
    default:
        return mpi_ok(MPI_Sendrecv_c(back, (MPI_Count)sizeof(back),
                                     MPI_BYTE, 0, form, buf, N, MPI_BYTE, 0,
                                     form, MPI_COMM_WORLD, st),
                      "MPI_Sendrecv_c");
    }
}

static int contiguous(int form, unsigned char *buf)
{
    uint64_t seed = 100 + (uint64_t)form;
    counts_t before = counts();
    MPI_Status st;
    int ok;

    if (rank == 0) {
        ok = send_form(form, buf, seed);
    } else {
        ok = recv_form(form, buf, &st);
        ok = ok && status_count(&st, MPI_BYTE, N, N, form_name[form]) &&
             intact(buf, N, seed, form_name[form]);
    }
    return pulled_one(&before, N, form_name[form]) && ok;
}

/* The receive SHORT bytes too small: truncated, the sender served. */
static int truncated(unsigned char *buf)
{
    const char *what = "truncated MPI_Recv_c";
    counts_t before = counts();
    MPI_Count len = N - SHORT;
    MPI_Status st;
    int rc;

    if (rank == 0) {
        fill(buf, N, 200, 0);
        return mpi_ok(MPI_Send_c(buf, N, MPI_BYTE, 1, 9, MPI_COMM_WORLD),
                      "MPI_Send_c to a short receive") &&
               pulled_one(&before, len, what);
    }
    rc = MPI_Recv_c(buf, len, MPI_BYTE, 0, 9, MPI_COMM_WORLD, &st);
    if (tap_class(rc) != MPI_ERR_TRUNCATE) {
        tap_diag("%s: %s, not MPI_ERR_TRUNCATE", what,
                 class_name(tap_class(rc)));
        return 0;
    }
    if (before.msgs < 0)
        return 1;       /* natively the buffer's contents are not defined */
    return status_count(&st, MPI_BYTE, len, len, what) &&
           intact(buf, len, 200, what) && pulled_one(&before, len, what);
}

/* Blocks of BLK bytes every STRIDE: NBLK of them carry NBLK * BLK bytes
 * (more than INT_MAX) over SPAN. */
static MPI_Datatype strided(void)
{
    MPI_Datatype blk, t;

    MPI_Type_contiguous(BLK, MPI_BYTE, &blk);
    MPI_Type_create_resized(blk, 0, STRIDE, &t);
    MPI_Type_commit(&t);
    MPI_Type_free(&blk);
    return t;
}

/* Rank 0 sends NBLK strided blocks (its gaps hold other bytes), rank 1
 * receives them strided: each block in place, every gap untouched. */
static int strided_pair(unsigned char *buf)
{
    const char *what = "strided MPI_Send_c -> strided MPI_Recv_c";
    MPI_Datatype t = strided();
    counts_t before = counts();
    MPI_Status st;
    int ok;

    if (rank == 0) {
        memset(buf, ~GAP & 0xff, (size_t)SPAN);
        for (MPI_Count b = 0; b < NBLK; b++)
            fill(buf + b * STRIDE, BLK, 300, b * BLK);
        ok = mpi_ok(MPI_Send_c(buf, NBLK, t, 1, 10, MPI_COMM_WORLD),
                    "strided MPI_Send_c");
    } else {
        memset(buf, GAP, (size_t)SPAN);
        ok = mpi_ok(MPI_Recv_c(buf, NBLK, t, 0, 10, MPI_COMM_WORLD, &st),
                    "strided MPI_Recv_c");
        ok = ok && status_count(&st, t, NBLK, NBLK * BLK, what);
        for (MPI_Count b = 0; ok && b < NBLK; b++) {
            const unsigned char *gap = buf + b * STRIDE + BLK;

            ok = first_bad(buf + b * STRIDE, BLK, 300, b * BLK) == BLK &&
                 gap[0] == GAP && memcmp(gap, gap + 1, STRIDE - BLK - 1) == 0;
            if (!ok)
                tap_diag("%s: block %lld or the gap after it differs", what,
                         (long long)b);
        }
    }
    MPI_Type_free(&t);
    return pulled_one(&before, NBLK * BLK, what) && ok;
}

int main(int argc, char **argv)
{
    unsigned char *buf;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!tap_need_size(2))
        return 0;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    tap_plan(6);
    buf = alloc(SPAN);      /* the contiguous cases use its first N bytes */
    for (int form = SEND; form <= SENDRECV; form++)
        tap_ok(contiguous(form, buf), "%s of INT_MAX + 4099 bytes: intact, "
               "real count (ftwrap: pulled by its rendezvous)",
               form_name[form]);
    tap_ok(truncated(buf), "MPI_Recv_c %d bytes short: MPI_ERR_TRUNCATE, "
           "the sender succeeds (ftwrap: the prefix pulled)", SHORT);
    tap_ok(strided_pair(buf), "MPI_Send_c of %lld strided blocks of %d B "
           "(more than INT_MAX bytes: packed, pulled, unpacked) into a "
           "strided MPI_Recv_c: in place, gaps untouched", (long long)NBLK,
           BLK);
    free(buf);
    MPI_Finalize();
    return tap_status();
}
#else
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (tap_rank() == 0)
        printf("1..0 # SKIP no large-count calls in this MPI\n");
    MPI_Finalize();
    return 0;
}
#endif
