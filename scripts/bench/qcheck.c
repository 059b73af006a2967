/*
 * qcheck - what the quarantine check costs a receive, measured inside one
 * job so both sides see the same placement and load.
 *
 * Run under ftwrap with 3 ranks.  Ranks 0 and 1 ping-pong small messages,
 * repetitions alternating between the MPI's own calls (PMPI_Send and
 * PMPI_Recv: what the program would get without ftwrap) and ftwrap's
 * (MPI_Send and MPI_Recv), in three states of ftwrap:
 *   quiet        no failure, no drain: the fast path
 *   watched      after a drain, the path that watches every receive, with
 *                the quarantine table empty (its check is one branch)
 *   quarantined  after rank 2 was killed in the middle of a 256 MiB
 *                transfer to rank 0, whose buffer stays quarantined
 *                (FTW_QUARANTINE_SETTLE=0): every receive of rank 0 is
 *                checked against the table
 * Data are checked every iteration.  Rank 2 sleeps between its turns so
 * the ping-pong has the cores.  Prints
 *   "qck <state> <bytes> <native_us> <ftwrap_us> <ratio>".
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftwrap.h"

#define BIG ((size_t)256 << 20)
#define ITERS 5000
#define REPS 9
#define T_TURN 100          /* rank 0 tells rank 2 to go on */
#define T_KILL 101          /* rank 0 tells rank 1 to kill rank 2 */

typedef int (*send_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
typedef int (*recv_fn)(void *, int, MPI_Datatype, int, int, MPI_Comm,
                       MPI_Status *);

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Half round trip in microseconds between ranks 0 and 1. */
static double pingpong(send_fn snd, recv_fn rcv, int rank, int size,
                       unsigned char *buf)
{
    int peer = 1 - rank;
    double t0 = PMPI_Wtime();

    for (int i = 0; i < ITERS; i++) {
        unsigned char mark = (unsigned char)(i * 7 + size);

        if (rank == 0) {
            buf[0] = buf[size - 1] = mark;
            snd(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            rcv(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
                MPI_STATUS_IGNORE);
        } else {
            rcv(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
                MPI_STATUS_IGNORE);
            snd(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        }
        if (buf[0] != mark || buf[size - 1] != mark) {
            fprintf(stderr, "qcheck: rank %d: wrong data\n", rank);
            PMPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    return (PMPI_Wtime() - t0) / ITERS / 2 * 1e6;
}

/* Ranks 0 and 1: alternate native and ftwrap repetitions, print medians. */
static void measure(const char *state, int rank)
{
    static const int sizes[] = { 8, 1024 };
    unsigned char buf[1024];

    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        double nat[REPS], ftw[REPS];

        for (int r = 0; r < REPS; r++) {
            nat[r] = pingpong(PMPI_Send, PMPI_Recv, rank, sizes[s], buf);
            ftw[r] = pingpong(MPI_Send, MPI_Recv, rank, sizes[s], buf);
        }
        qsort(nat, REPS, sizeof(double), cmp_double);
        qsort(ftw, REPS, sizeof(double), cmp_double);
        if (rank == 0)
            printf("qck %s %d %.3f %.3f %.3f\n", state, sizes[s],
                   nat[REPS / 2], ftw[REPS / 2],
                   ftw[REPS / 2] / nat[REPS / 2]);
    }
    fflush(stdout);
}

/* Rank 2: wait for rank 0's word without taking a core. */
static void idle_until_turn(void)
{
    MPI_Request req;
    int flag = 0, word;

    PMPI_Irecv(&word, 1, MPI_INT, 0, T_TURN, MPI_COMM_WORLD, &req);
    while (!flag) {
        usleep(1000);
        PMPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    }
}

static void word_to(int rank, int tag)
{
    int word = 1;

    PMPI_Send(&word, 1, MPI_INT, rank, tag, MPI_COMM_WORLD);
}

/* Rank 0: receive from rank 2 until rank 1 kills it mid-transfer. */
static int quarantine_me(char *big)
{
    int rc, cls;

    word_to(2, T_TURN);
    word_to(1, T_KILL);
    rc = MPI_Recv(big, (int)BIG, MPI_BYTE, 2, 5, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    MPI_Error_class(rc, &cls);
    return cls == FTW_ERR_BUFFER_UNUSABLE;
}

int main(int argc, char **argv)
{
    int rank, nprocs, pid, pid2 = 0, word;
    char *big;

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (nprocs != 3) {
        if (rank == 0)
            fprintf(stderr, "usage: 3 ranks; qcheck\n");
        MPI_Finalize();
        return 2;
    }
    big = malloc(BIG);
    pid = getpid();
    pid2 = rank == 2 ? pid : 0;
    PMPI_Allreduce(MPI_IN_PLACE, &pid2, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 2) {
        idle_until_turn();
        FTW_Comm_drain_all(MPI_COMM_WORLD);
        idle_until_turn();
        MPI_Send(big, (int)BIG, MPI_BYTE, 0, 5, MPI_COMM_WORLD);
        pause();                        /* killed before it ends */
    }
    measure("quiet", rank);
    if (rank == 0)
        word_to(2, T_TURN);
    FTW_Comm_drain_all(MPI_COMM_WORLD);
    measure("watched", rank);
    if (rank == 1) {
        PMPI_Recv(&word, 1, MPI_INT, 0, T_KILL, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
        usleep(10000);
        kill(pid2, SIGKILL);
    } else if (!quarantine_me(big)) {
        fprintf(stderr, "qcheck: the receive was not quarantined; the "
                "last state measures no table\n");
    }
    measure("quarantined", rank);
    MPI_Finalize();
    return 0;
}
