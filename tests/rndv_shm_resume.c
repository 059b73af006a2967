/* ftw-test: np=2 mode=ftwrap timeout=60 env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=shm env=FTW_SHM_PULL=pipe env=FTW_RNDV_CHUNK=1m env=FTW_INJECT=rank=1,at=pulled:3,sig=STOP */
/*
 * rndv_shm_resume - an shm pull whose sender goes away for a moment in
 * the middle of a message takes up the pipeline again when it is back.
 *
 * Rank 1 sends 128 MiB + 5 with MPI_Send; rank 0 receives it through
 * the shm pipeline.  Fault injection (pulled:3, sig=STOP) has rank 0
 * stop rank 1 as it asks for the fragment holding the message's third
 * 1 MiB chunk boundary, so the fragments asked after it go unanswered.
 * A thread of rank 0 sends rank 1 SIGCONT once the pull has stalled
 * (counter rndv_shm_stalls) and rank 1 has been stopped for 1 ms, about
 * as long as a process loses its core to another one on a full host.
 * Asserts:
 *  - the message arrives intact (checksum, guard bytes on either side),
 *    with its real count, and rank 1's MPI_Send succeeds;
 *  - the pull stalled (rndv_shm_stalls), read what the sender had
 *    not answered with cma (rndv_shm_cma_bytes: more than 0, less than
 *    the message), and took the sender's fragments again once it was
 *    back (rndv_shm_resumed 1): a stall costs the pipeline the moment
 *    the sender was away, not the rest of the message.  (A sender just
 *    continued may lose its core again for a moment: more than one stall
 *    may be counted.);
 *  - a second message right after it, while the pulls from rank 1 still
 *    start without waiting for it (seg_stalled), is pulled by shm, not
 *    handed to cma whole (rndv_shm +1).
 */
#include "tap.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BIG ((size_t)(128 << 20) + 5)
#define GUARD 4096

static pid_t sender;
static int cont_err;        /* the thread's error, 0: none */
static double stopped_ms;   /* how long the sender stayed stopped */

/* Whether process pid is stopped. */
static int is_stopped(pid_t pid)
{
    return tap_proc_state((int)pid) == 'T';
}

/* Continue the sender once the pull from it has stalled (on a loaded
 * host it may have stalled before the stop as well) and it has been
 * stopped for at least 1 ms, longer than the 0.2 ms a pull waits. */
static void *cont_thread(void *arg)
{
    long long stalls0 = *(long long *)arg;
    double t0 = tap_now(), t1;

    while (!is_stopped(sender)) {
        if (tap_now() - t0 > 20.0) {
            cont_err = 1;       /* never stopped */
            return NULL;
        }
        usleep(20);
    }
    t1 = tap_now();
    while ((tap_now() - t1 < 1e-3 ||
            tap_ftw_stat("rndv_shm_stalls") == stalls0) &&
           tap_now() - t1 < 5.0)
        usleep(20);     /* woken, it takes the core from the pull at once */
    if (kill(sender, SIGCONT) != 0)
        cont_err = 2;
    stopped_ms = (tap_now() - t1) * 1e3;
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned char *mem = malloc(BIG + 2 * GUARD), *buf = mem + GUARD;
    int rank, ok = 1, n = -1, me;
    MPI_Status st;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (mem == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    tap_plan(4);
    me = (int)getpid();
    MPI_Bcast(&me, 1, MPI_INT, 1, MPI_COMM_WORLD);
    sender = (pid_t)me;
    MPI_Barrier(MPI_COMM_WORLD);

    long long stalls0 = tap_ftw_stat("rndv_shm_stalls");
    long long cma0 = tap_ftw_stat("rndv_shm_cma_bytes");
    long long res0 = tap_ftw_stat("rndv_shm_resumed");
    long long stalls1 = 0, cma1 = 0, res1 = 0;

    if (rank == 1) {
        tap_fill(buf, BIG, 41);
        ok = MPI_Send(buf, (int)BIG, MPI_BYTE, 0, 1, MPI_COMM_WORLD) ==
             MPI_SUCCESS;
    } else {
        pthread_t th;

        memset(mem, 0xa5, GUARD);
        memset(buf + BIG, 0x5a, GUARD);
        if (pthread_create(&th, NULL, cont_thread, &stalls0) != 0)
            MPI_Abort(MPI_COMM_WORLD, 2);
        ok = MPI_Recv(buf, (int)BIG, MPI_BYTE, 1, 1, MPI_COMM_WORLD,
                      &st) == MPI_SUCCESS;
        pthread_join(th, NULL);
        MPI_Get_count(&st, MPI_BYTE, &n);
        ok &= tap_check(buf, BIG, 41) && n == (int)BIG && cont_err == 0;
        for (size_t i = 0; i < GUARD; i++)
            ok &= mem[i] == 0xa5 && buf[BIG + i] == 0x5a;
        stalls1 = tap_ftw_stat("rndv_shm_stalls");
        cma1 = tap_ftw_stat("rndv_shm_cma_bytes");
        res1 = tap_ftw_stat("rndv_shm_resumed");
    }
    tap_ok(ok, "128 MiB + 5, its sender stopped mid-pull and continued: "
           "intact, guards untouched, real count, MPI_Send succeeds");
    tap_ok(rank != 0 || (stalls1 > stalls0 && cma1 > cma0 &&
                         (size_t)(cma1 - cma0) < BIG),
           "... the pull stalled (rndv_shm_stalls +%lld) and read "
           "%lld of its bytes with cma (sender stopped %.1f ms)",
           stalls1 - stalls0, cma1 - cma0, stopped_ms);
    tap_ok(rank != 0 || res1 == res0 + 1,
           "... and took the sender's fragments again once it was back "
           "(rndv_shm_resumed +%lld)", res1 - res0);

    long long shm0 = tap_ftw_stat("rndv_shm"), shm1 = shm0;

    cma0 = tap_ftw_stat("rndv_shm_cma_bytes");
    if (rank == 1) {
        tap_fill(buf, BIG, 42);
        ok = MPI_Send(buf, (int)BIG, MPI_BYTE, 0, 2, MPI_COMM_WORLD) ==
             MPI_SUCCESS;
        cma1 = cma0;
    } else {
        ok = MPI_Recv(buf, (int)BIG, MPI_BYTE, 1, 2, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE) == MPI_SUCCESS &&
             tap_check(buf, BIG, 42);
        shm1 = tap_ftw_stat("rndv_shm");
        cma1 = tap_ftw_stat("rndv_shm_cma_bytes");
    }
    tap_ok(ok && (rank != 0 || shm1 == shm0 + 1),
           "a second message right after: intact, pulled by shm, not "
           "left to cma whole (rndv_shm +%lld, %lld bytes with cma)",
           shm1 - shm0, cma1 - cma0);
    free(mem);
    MPI_Finalize();
    return tap_status();
}
