/* ftw-test: np=2 mode=ftwrap timeout=60 env=FTW_IDLE=sleep */
/*
 * idle_sleep - with FTW_IDLE=sleep, a call that waits long sleeps between
 * polls instead of spinning, and still gets its message.
 *
 * Rank 0 sleeps 1 s, then sends rank 1 a checksummed 1000-byte message
 * and, after a barrier, another one at once.  Asserts on rank 1:
 *  - its MPI_Recv, blocked about 1 s, gets the first message intact and
 *    uses less than 0.4 s of CPU time in that thread (spinning would use
 *    about 1 s);
 *  - the second MPI_Recv, whose message comes at once, gets it intact;
 *  - the same for a blocked MPI_Wait on an MPI_Irecv;
 *  - with a window open (MPI_Win_create over both ranks), the same blocked
 *    MPI_Recv spins instead (0.4 s of CPU or more: other processes'
 *    passive-target operations on the window move only when its owner
 *    polls), and rank 0's MPI_Put into the window under an exclusive lock,
 *    made while rank 1 waits, lands intact.
 */
#define _GNU_SOURCE
#include "tap.h"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define LEN 1000

static double thread_cpu(void)
{
    struct rusage ru;

    getrusage(RUSAGE_THREAD, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) * 1e-6;
}

/* Rank 1: receive message seed (blocking or nonblocking); its CPU time. */
static int recv_one(int nonblocking, uint64_t seed, double *cpu_p)
{
    unsigned char buf[LEN];
    MPI_Request req;
    double c0 = thread_cpu();
    int rc;

    if (nonblocking) {
        rc = MPI_Irecv(buf, LEN, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &req);
        if (rc == MPI_SUCCESS)
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        rc = MPI_Recv(buf, LEN, MPI_BYTE, 0, 1, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);
    }
    *cpu_p = thread_cpu() - c0;
    return rc == MPI_SUCCESS && tap_check(buf, LEN, seed);
}

int main(int argc, char **argv)
{
    unsigned char buf[LEN];
    int rank;

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    tap_plan(6);
    for (int nb = 0; nb < 2; nb++) {
        double cpu = 0;
        int ok1 = 1, ok2 = 1;

        if (rank == 0) {
            sleep(1);
            tap_fill(buf, LEN, (uint64_t)(10 + nb));
            ok1 = MPI_Send(buf, LEN, MPI_BYTE, 1, 1, MPI_COMM_WORLD) ==
                  MPI_SUCCESS;
        } else {
            ok1 = recv_one(nb, (uint64_t)(10 + nb), &cpu);
            if (cpu >= 0.4)
                tap_diag("%s blocked 1 s used %.3f s of CPU",
                         nb ? "MPI_Wait" : "MPI_Recv", cpu);
            ok1 &= cpu < 0.4;
        }
        tap_ok(ok1, "%s blocked about 1 s: message intact, under 0.4 s "
               "of CPU", nb ? "MPI_Irecv + MPI_Wait" : "MPI_Recv");
        if (rank == 0) {
            tap_fill(buf, LEN, (uint64_t)(20 + nb));
            ok2 = MPI_Send(buf, LEN, MPI_BYTE, 1, 1, MPI_COMM_WORLD) ==
                  MPI_SUCCESS;
        } else {
            ok2 = recv_one(nb, (uint64_t)(20 + nb), &cpu);
        }
        tap_ok(ok2, "%s of a message sent at once: intact",
               nb ? "MPI_Irecv + MPI_Wait" : "MPI_Recv");
    }
    {
        unsigned char *base = NULL;
        double cpu = 0;
        MPI_Win win;
        int ok = 1, rc;

        if (rank == 1)
            base = calloc(1, LEN);
        rc = MPI_Win_create(base, rank == 1 ? LEN : 0, 1, MPI_INFO_NULL,
                            MPI_COMM_WORLD, &win);
        if (rc != MPI_SUCCESS) {
            tap_diag("MPI_Win_create failed (%d)", rc);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (rank == 0) {
            sleep(1);
            tap_fill(buf, LEN, 40);
            ok = MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win) == MPI_SUCCESS &&
                 MPI_Put(buf, LEN, MPI_BYTE, 1, 0, LEN, MPI_BYTE, win) ==
                     MPI_SUCCESS &&
                 MPI_Win_unlock(1, win) == MPI_SUCCESS;
            tap_fill(buf, LEN, 30);
            ok &= MPI_Send(buf, LEN, MPI_BYTE, 1, 1, MPI_COMM_WORLD) ==
                  MPI_SUCCESS;
        } else {
            ok = recv_one(0, 30, &cpu);
            if (cpu < 0.4)
                tap_diag("MPI_Recv blocked 1 s with a window used %.3f s "
                         "of CPU", cpu);
            ok &= cpu >= 0.4;
        }
        tap_ok(ok, "MPI_Recv blocked about 1 s with a window open: "
               "message intact, 0.4 s of CPU or more (spins)");
        ok = MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS;
        if (rank == 1) {
            MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
            ok &= tap_check(base, LEN, 40);
            MPI_Win_unlock(1, win);
        }
        tap_ok(ok, "MPI_Put under an exclusive lock while the owner "
               "waited: intact");
        MPI_Win_free(&win);
        free(base);
    }
    MPI_Finalize();
    return tap_status();
}
