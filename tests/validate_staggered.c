/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=2,3 fate=2:signal:KILL fate=3:signal:KILL env=FTW_DETECT=heartbeat env=FTW_HB_PERIOD=0.05 env=FTW_HB_TIMEOUT=0.5 */
/*
 * validate_staggered - two processes lost at once (as with a host that
 * crashes) but detected one after the other: validate agrees on both.
 *
 * Heartbeats alone (period 50 ms, timeout 0.5 s).  Ranks 2 and 3 stop
 * themselves (SIGSTOP) at the same moment, as a crashed host's processes
 * go silent together; the heartbeat ring declares one failed after the
 * timeout and the other only a timeout later, while the survivors are
 * already in FTW_Comm_validate.  Ranks 0 and 1 loop on MPI_Allreduce of
 * rank+1 with MPI_ERRORS_RETURN, validating on each error, until an
 * allreduce succeeds with the survivors' sum 3.  Asserts: every call
 * returns within 5 s of the stop (a validate that agreed on one failed
 * process only would make the survivors' communicator wait for the other,
 * forever), the last validate's failed group is exactly {2, 3}, the sum is
 * 3, and the survivors exchange checksummed 1 MiB messages afterwards.
 * Rank 0 then SIGKILLs the stopped processes (pids exchanged at start).
 */
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include "ftwrap.h"
#include "tap.h"

#define NP 4
#define BOUND 5.0

int main(int argc, char **argv)
{
    int rank, size, pids[NP], ok_time = 1, ok_group = 0, nval = 0;
    long v, sum = 0;
    double t0, worst = 0;
    unsigned char *buf = malloc(1 << 20), *in = malloc(1 << 20);

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    pids[rank] = (int)getpid();
    MPI_Allgather(MPI_IN_PLACE, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank >= 2) {
        raise(SIGSTOP);
        _exit(99);      /* never continued: rank 0 kills it */
    }
    t0 = MPI_Wtime();
    for (;;) {
        double t = MPI_Wtime();
        int rc;

        v = rank + 1;
        rc = MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (MPI_Wtime() - t > worst)
            worst = MPI_Wtime() - t;
        if (rc == MPI_SUCCESS && sum == 3)
            break;
        if (rc == MPI_SUCCESS) {
            usleep(1000);
            continue;
        }
        {
            MPI_Group failed, world;
            int n = 0, r[2] = { 0, 1 }, w[2] = { -1, -1 };

            t = MPI_Wtime();
            rc = FTW_Comm_validate(MPI_COMM_WORLD, &failed);
            if (MPI_Wtime() - t > worst)
                worst = MPI_Wtime() - t;
            nval++;
            if (rc != MPI_SUCCESS)
                break;
            MPI_Group_size(failed, &n);
            MPI_Comm_group(MPI_COMM_WORLD, &world);
            if (n == 2)
                MPI_Group_translate_ranks(failed, 2, r, world, w);
            ok_group = n == 2 && ((w[0] == 2 && w[1] == 3) ||
                                  (w[0] == 3 && w[1] == 2));
            MPI_Group_free(&world);
            MPI_Group_free(&failed);
        }
        if (MPI_Wtime() - t0 > 4 * BOUND)
            break;
    }
    ok_time = worst < BOUND;
    if (rank == 0) {
        kill(pids[2], SIGKILL);
        kill(pids[3], SIGKILL);
    }

    tap_plan(4);
    tap_ok(ok_time, "every allreduce and validate returned within %.0f s "
           "(slowest %.3f s)", BOUND, worst);
    tap_ok(ok_group, "the last of %d validates names exactly ranks 2 and 3",
           nval);
    tap_ok(sum == 3, "allreduce over the survivors: sum %ld (want 3)", sum);
    {
        int peer = !rank, ok;
        MPI_Status st;

        tap_fill(buf, 1 << 20, (uint64_t)rank);
        ok = MPI_Sendrecv(buf, 1 << 20, MPI_BYTE, peer, 5, in, 1 << 20,
                          MPI_BYTE, peer, 5, MPI_COMM_WORLD, &st) ==
                 MPI_SUCCESS &&
             tap_check(in, 1 << 20, (uint64_t)peer);
        tap_ok(ok, "survivors exchange checksummed 1 MiB messages");
    }
    free(buf);
    free(in);
    MPI_Finalize();
    return tap_status();
}
