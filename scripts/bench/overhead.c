/*
 * overhead - ftwrap's cost on small-message ping-pong latency, measured
 * inside one job so both sides see the same placement and load.
 *
 * Run under ftwrap (scripts/ftwrun -np 2).  For each size, repetitions
 * alternate between the MPI's own calls (PMPI_Send/PMPI_Recv: what the
 * program would get without ftwrap) and the interposed ones
 * (MPI_Send/MPI_Recv: through ftwrap).  Each repetition times ITERS round
 * trips; the medians give the ratio.  Data are checked every iteration.
 *
 * A third variant, PMPI_Send with PMPI_Irecv plus a PMPI_Test loop, is
 * what never hanging costs inside the MPI itself: ftwrap's blocking
 * receive is that loop (it must be able to give up on a dead sender, and
 * a blocking PMPI_Recv cannot be interrupted).  Its ratio to the native
 * calls separates the MPI's share of the overhead from ftwrap's own.
 *
 * The message-rate part is what most programs do instead: windows of
 * WINDOW nonblocking sends from rank 0 and receives on rank 1 (each into
 * its own slot of one buffer, so the data can be checked), completed by
 * MPI_Waitall, then a zero-byte reply; native (PMPI_Isend, PMPI_Irecv,
 * PMPI_Waitall) and through ftwrap alternate the same way.
 *
 * With one rank the same windows go to the rank itself (64 receives
 * posted, then 64 sends, one MPI_Waitall over the 128): what ftwrap costs
 * per message in CPU time alone, without the wait for another process
 * that scheduling on a loaded machine stretches in both variants.
 *
 *   overhead [--iters N] [--reps R] [--rate-only]
 * prints "ovh <bytes> <native_us> <ftwrap_us> <ratio> <irecv_test_ratio>"
 * lines, then "rate <bytes> <native_msgs_per_s> <ftwrap_msgs_per_s>
 * <ratio>" lines (ratio: ftwrap's rate over the native one) and "xrate"
 * lines of the same form for the exchange (each rank posts WINDOW
 * receives, then WINDOW sends to the other, then one MPI_Waitall: a halo
 * exchange's shape; messages per second per rank); one rank:
 * "self <bytes> <native_ns> <ftwrap_ns> <ratio>" per message.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXSIZE 1024
#define WINDOW 64
#define RATE_MAX 8192

static int recv_test(void *buf, int count, MPI_Datatype dt, int src,
                     int tag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Request req;
    int flag = 0, rc = PMPI_Irecv(buf, count, dt, src, tag, comm, &req);

    while (rc == MPI_SUCCESS && !flag)
        rc = PMPI_Test(&req, &flag, status);
    return rc;
}

typedef int (*send_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
typedef int (*recv_fn)(void *, int, MPI_Datatype, int, int, MPI_Comm,
                       MPI_Status *);

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Half round trip in microseconds over iters round trips. */
static double pingpong(send_fn snd, recv_fn rcv, int rank, int size,
                       int iters, unsigned char *buf)
{
    int peer = 1 - rank;
    double t0;

    PMPI_Barrier(MPI_COMM_WORLD);
    t0 = PMPI_Wtime();
    for (int i = 0; i < iters; i++) {
        unsigned char mark = (unsigned char)(i * 7 + size);

        if (rank == 0) {
            buf[0] = mark;
            buf[size - 1] = mark;
            snd(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            rcv(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
                MPI_STATUS_IGNORE);
        } else {
            rcv(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
                MPI_STATUS_IGNORE);
            snd(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        }
        if (buf[0] != mark || buf[size - 1] != mark) {
            fprintf(stderr, "overhead: rank %d: size %d: wrong data at "
                    "iteration %d\n", rank, size, i);
            PMPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    return (PMPI_Wtime() - t0) / iters / 2 * 1e6;
}

typedef int (*isend_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm,
                        MPI_Request *);
typedef int (*irecv_fn)(void *, int, MPI_Datatype, int, int, MPI_Comm,
                        MPI_Request *);
typedef int (*waitall_fn)(int, MPI_Request *, MPI_Status *);
typedef struct {
    isend_fn isend;
    irecv_fn irecv;
    waitall_fn waitall;
    send_fn send;
    recv_fn recv;
} calls_t;

static const calls_t native_calls = { PMPI_Isend, PMPI_Irecv, PMPI_Waitall,
                                      PMPI_Send, PMPI_Recv };
static const calls_t ftwrap_calls = { MPI_Isend, MPI_Irecv, MPI_Waitall,
                                      MPI_Send, MPI_Recv };

/* Each of the WINDOW slots of size bytes in buf starts and ends with
 * mark, or the run aborts. */
static void slots_check(const unsigned char *buf, int size,
                        unsigned char mark, const char *what, int i)
{
    for (int w = 0; w < WINDOW; w++)
        if (buf[(size_t)w * size] != mark ||
            buf[(size_t)w * size + size - 1] != mark) {
            fprintf(stderr, "overhead: size %d: wrong data in %s %d, "
                    "message %d\n", size, what, i, w);
            PMPI_Abort(MPI_COMM_WORLD, 1);
        }
}

/* Messages per second over iters windows of WINDOW messages of size
 * bytes; the receiver checks each window's first and last byte. */
static double msgrate(const calls_t *k, int rank, int size, int iters,
                      unsigned char *buf, unsigned char *sbuf)
{
    MPI_Request reqs[WINDOW];
    double t0;

    (void)sbuf;     /* each slot is sent from where it is received */

    PMPI_Barrier(MPI_COMM_WORLD);
    t0 = PMPI_Wtime();
    for (int i = 0; i < iters; i++) {
        unsigned char mark = (unsigned char)(i * 13 + size);

        for (int w = 0; w < WINDOW; w++) {
            unsigned char *slot = buf + (size_t)w * size;

            if (rank == 0) {
                slot[0] = mark;
                slot[size - 1] = mark;
                k->isend(slot, size, MPI_BYTE, 1, w, MPI_COMM_WORLD,
                         &reqs[w]);
            } else {
                k->irecv(slot, size, MPI_BYTE, 0, w, MPI_COMM_WORLD,
                         &reqs[w]);
            }
        }
        k->waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
        if (rank == 0) {
            k->recv(NULL, 0, MPI_BYTE, 1, WINDOW, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE);
            continue;
        }
        k->send(NULL, 0, MPI_BYTE, 0, WINDOW, MPI_COMM_WORLD);
        slots_check(buf, size, mark, "window", i);
    }
    return (double)iters * WINDOW / (PMPI_Wtime() - t0);
}

/* Messages per second over iters exchanges, a halo exchange's shape:
 * each rank posts WINDOW receives from the other, then WINDOW sends to
 * it, then one MPI_Waitall over the 2*WINDOW; each received slot's first
 * and last byte are checked. */
static double xrate(const calls_t *k, int rank, int size, int iters,
                    unsigned char *rbuf, unsigned char *sbuf)
{
    MPI_Request reqs[2 * WINDOW];
    int peer = 1 - rank;
    double t0;

    PMPI_Barrier(MPI_COMM_WORLD);
    t0 = PMPI_Wtime();
    for (int i = 0; i < iters; i++) {
        unsigned char mark = (unsigned char)(i * 7 + size);

        for (int w = 0; w < WINDOW; w++)
            k->irecv(rbuf + (size_t)w * size, size, MPI_BYTE, peer, w,
                     MPI_COMM_WORLD, &reqs[w]);
        for (int w = 0; w < WINDOW; w++) {
            unsigned char *slot = sbuf + (size_t)w * size;

            slot[0] = mark;
            slot[size - 1] = mark;
            k->isend(slot, size, MPI_BYTE, peer, w, MPI_COMM_WORLD,
                     &reqs[WINDOW + w]);
        }
        k->waitall(2 * WINDOW, reqs, MPI_STATUSES_IGNORE);
        slots_check(rbuf, size, mark, "exchange", i);
    }
    return (double)iters * WINDOW / (PMPI_Wtime() - t0);
}

/* Nanoseconds per message over iters windows to self. */
static double selfrate(const calls_t *k, int size, int iters,
                       unsigned char *rbuf, unsigned char *sbuf)
{
    MPI_Request reqs[2 * WINDOW];
    double t0 = PMPI_Wtime();

    for (int i = 0; i < iters; i++) {
        unsigned char mark = (unsigned char)(i * 13 + size);

        for (int w = 0; w < WINDOW; w++)
            k->irecv(rbuf + (size_t)w * size, size, MPI_BYTE, 0, w,
                     MPI_COMM_WORLD, &reqs[w]);
        sbuf[0] = mark;
        sbuf[(size_t)(WINDOW - 1) * size] = mark;
        for (int w = 0; w < WINDOW; w++)
            k->isend(sbuf + (size_t)w * size, size, MPI_BYTE, 0, w,
                     MPI_COMM_WORLD, &reqs[WINDOW + w]);
        k->waitall(2 * WINDOW, reqs, MPI_STATUSES_IGNORE);
        if (rbuf[0] != mark || rbuf[(size_t)(WINDOW - 1) * size] != mark) {
            fprintf(stderr, "overhead: size %d: wrong data to self\n", size);
            PMPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    return (PMPI_Wtime() - t0) / iters / WINDOW * 1e9;
}

static void selfrates(int iters, int reps)
{
    static const int sizes[] = { 8, 1024, 4096, 8192 };
    unsigned char *rbuf = calloc(WINDOW, RATE_MAX);
    unsigned char *sbuf = calloc(WINDOW, RATE_MAX);

    if (rbuf == NULL || sbuf == NULL) {
        fprintf(stderr, "overhead: out of memory\n");
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (unsigned z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
        double nat[100], ftw[100], ratio[100];
        int size = sizes[z];

        selfrate(&native_calls, size, iters / 4 + 1, rbuf, sbuf);
        selfrate(&ftwrap_calls, size, iters / 4 + 1, rbuf, sbuf);
        for (int r = 0; r < reps; r++) {
            nat[r] = selfrate(&native_calls, size, iters, rbuf, sbuf);
            ftw[r] = selfrate(&ftwrap_calls, size, iters, rbuf, sbuf);
            ratio[r] = nat[r] / ftw[r];
        }
        qsort(nat, (size_t)reps, sizeof(double), cmp_double);
        qsort(ftw, (size_t)reps, sizeof(double), cmp_double);
        qsort(ratio, (size_t)reps, sizeof(double), cmp_double);
        printf("self %d %.1f %.1f %.4f\n", size, nat[reps / 2],
               ftw[reps / 2], ratio[reps / 2]);
    }
    free(rbuf);
    free(sbuf);
}

typedef double (*rate_fn)(const calls_t *, int, int, int, unsigned char *,
                          unsigned char *);

/* One "<what> <size> <native> <ftwrap> <ratio>" line: the medians over
 * reps interleaved rounds of rate through the MPI's calls and ftwrap's. */
static void rate_line(const char *what, rate_fn rate, int rank, int size,
                      int n, int reps, unsigned char *buf,
                      unsigned char *sbuf)
{
    double nat[100], ftw[100], ratio[100];

    rate(&native_calls, rank, size, n / 4 + 1, buf, sbuf);  /* warm up */
    rate(&ftwrap_calls, rank, size, n / 4 + 1, buf, sbuf);
    for (int r = 0; r < reps; r++) {
        nat[r] = rate(&native_calls, rank, size, n, buf, sbuf);
        ftw[r] = rate(&ftwrap_calls, rank, size, n, buf, sbuf);
        ratio[r] = ftw[r] / nat[r];
    }
    qsort(nat, (size_t)reps, sizeof(double), cmp_double);
    qsort(ftw, (size_t)reps, sizeof(double), cmp_double);
    qsort(ratio, (size_t)reps, sizeof(double), cmp_double);
    if (rank == 0)
        printf("%s %d %.0f %.0f %.4f\n", what, size, nat[reps / 2],
               ftw[reps / 2], ratio[reps / 2]);
}

static void rates(int rank, int iters, int reps)
{
    static const int sizes[] = { 8, 1024, 4096, 8192 };
    unsigned char *buf = calloc(WINDOW, RATE_MAX);
    unsigned char *sbuf = calloc(WINDOW, RATE_MAX);

    if (buf == NULL || sbuf == NULL) {
        fprintf(stderr, "overhead: out of memory\n");
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (unsigned z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
        int size = sizes[z], n = size >= 1024 ? iters / 4 : iters;

        rate_line("rate", msgrate, rank, size, n, reps, buf, sbuf);
        rate_line("xrate", xrate, rank, size, n, reps, buf, sbuf);
    }
    free(buf);
    free(sbuf);
}

int main(int argc, char **argv)
{
    int rank, nprocs, iters = 20000, reps = 21, rate_only = 0;
    unsigned char buf[MAXSIZE];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    for (int i = 1; i < argc && !strcmp(argv[i], "--rate-only"); i++)
        rate_only = 1;
    for (int i = 1 + rate_only; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--iters"))
            iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
    }
    if (nprocs == 1 && iters >= 1 && reps >= 1 && reps <= 100) {
        selfrates(iters / 20 + 1, reps);
        MPI_Finalize();
        return 0;
    }
    if (nprocs != 2 || iters < 1 || reps < 1 || reps > 100) {
        if (rank == 0)
            fprintf(stderr, "usage: 1 or 2 ranks; overhead [--iters N] "
                    "[--reps R<=100]\n");
        MPI_Finalize();
        return 2;
    }
    memset(buf, 0, sizeof(buf));
    if (rate_only) {
        rates(rank, iters / 20 + 1, reps);
        MPI_Finalize();
        return 0;
    }
    pingpong(PMPI_Send, PMPI_Recv, rank, 1, iters, buf);   /* warm up */
    pingpong(MPI_Send, MPI_Recv, rank, 1, iters, buf);
    for (int size = 1; size <= MAXSIZE; size *= 2) {
        double nat[100], ftw[100], itst[100];

        for (int r = 0; r < reps; r++) {
            nat[r] = pingpong(PMPI_Send, PMPI_Recv, rank, size, iters, buf);
            ftw[r] = pingpong(MPI_Send, MPI_Recv, rank, size, iters, buf);
            itst[r] = pingpong(PMPI_Send, recv_test, rank, size, iters, buf);
        }
        qsort(nat, (size_t)reps, sizeof(double), cmp_double);
        qsort(ftw, (size_t)reps, sizeof(double), cmp_double);
        qsort(itst, (size_t)reps, sizeof(double), cmp_double);
        if (rank == 0)
            printf("ovh %d %.4f %.4f %.4f %.4f\n", size, nat[reps / 2],
                   ftw[reps / 2], ftw[reps / 2] / nat[reps / 2],
                   itst[reps / 2] / nat[reps / 2]);
    }
    fflush(stdout);
    rates(rank, iters / 20 + 1, reps);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
