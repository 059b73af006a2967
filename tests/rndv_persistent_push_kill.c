/* ftw-test: np=3 mode=ftwrap timeout=60 link=ftwrap expect-failed=1 fate=1:signal:KILL env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=auto env=FTW_INJECT=rank=1,at=expose:1 */
/*
 * rndv_persistent_push_kill - the sender of a pushed persistent round (no
 * transport could expose it: FTW_INJECT at=expose:1) dies right after its
 * MPI_Start returns, before its receiver takes the push.
 *
 * Rank 1 starts a persistent send of 16 MiB to rank 0 and kills itself
 * (SIGKILL) as soon as the start returns.  Rank 0 receives it only once
 * it knows rank 1 is dead (FTW_Comm_group_failed).  Asserts:
 *  - rank 0's MPI_Recv ends within 5 s: FTW_ERR_PROC_FAIL_STOP; or
 *    FTW_ERR_BUFFER_UNUSABLE (the RTS itself had not arrived: the MPI
 *    may still write the buffer) and the buffer is released within 5 s
 *    (FTW_Buffer_wait_release: its writer is gone); or MPI_SUCCESS with
 *    the data intact (the push was taken before the sender died);
 *  - the receive buffer, filled with a new pattern after that, is still
 *    intact after 0.5 s of MPI traffic with rank 2 (pushed bytes land in
 *    a buffer of ftwrap's own, never the caller's);
 *  - rank 0 and rank 2 then exchange 4 MiB + 3 both ways through the
 *    rendezvous, intact;
 *  - MPI_Finalize returns on the survivors; the runner checks that no
 *    process or file is left behind.
 */
#include "tap.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "ftwrap.h"

#define BIG ((size_t)16 << 20)
#define NEXT ((size_t)(4 << 20) + 3)

/* Ranks 0 and 2 swap NEXT bytes (seeds by sender), checked; 1 if intact. */
static int swap(int rank, unsigned char *buf)
{
    int peer = 2 - rank, ok;

    tap_fill(buf, NEXT, 50 + rank);
    if (rank == 0)
        ok = MPI_Send(buf, (int)NEXT, MPI_BYTE, peer, 5, MPI_COMM_WORLD) ==
             MPI_SUCCESS &&
             MPI_Recv(buf, (int)NEXT, MPI_BYTE, peer, 5, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE) == MPI_SUCCESS;
    else
        ok = MPI_Sendrecv_replace(buf, (int)NEXT, MPI_BYTE, peer, 5, peer, 5,
                                  MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
             MPI_SUCCESS;
    return ok && tap_check(buf, NEXT, 50 + peer);
}

int main(int argc, char **argv)
{
    unsigned char *buf = calloc(1, BIG), *rbuf = calloc(1, BIG);
    int rank, rc, ok, cls, released = 0;
    long long pulls;
    MPI_Request req;
    double t0, dt;

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (buf == NULL || rbuf == NULL || !tap_need_size(3))
        MPI_Abort(MPI_COMM_WORLD, 2);
    if (rank == 1) {
        tap_fill(buf, BIG, 40);
        rc = MPI_Send_init(buf, (int)BIG, MPI_BYTE, 0, 1, MPI_COMM_WORLD,
                           &req);
        if (rc == MPI_SUCCESS)
            rc = MPI_Start(&req);
        if (rc != MPI_SUCCESS)
            tap_diag("rank 1: the pushed start failed (%s)",
                     class_name(class_of(rc)));
        raise(SIGKILL);
        return 1;
    }
    if (rank == 2) {
        ok = swap(rank, buf);
        MPI_Send(&ok, 1, MPI_INT, 0, 6, MPI_COMM_WORLD);
        free(buf);
        MPI_Finalize();
        return ok ? 0 : 1;
    }
    tap_plan(4);
    for (int n = 0; n == 0;) {      /* bounded by the runner's timeout */
        MPI_Group failed;

        FTW_Comm_group_failed(MPI_COMM_WORLD, &failed);
        MPI_Group_size(failed, &n);
        MPI_Group_free(&failed);
        usleep(1000);
    }
    t0 = MPI_Wtime();
    rc = MPI_Recv(rbuf, (int)BIG, MPI_BYTE, 1, 1, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    dt = MPI_Wtime() - t0;
    cls = class_of(rc);
    if (cls == FTW_ERR_BUFFER_UNUSABLE)
        FTW_Buffer_wait_release(rbuf, (MPI_Aint)BIG, 5.0, &released);
    tap_ok_local(dt < 5.0 &&
                 (cls == FTW_ERR_PROC_FAIL_STOP ||
                  (cls == FTW_ERR_BUFFER_UNUSABLE && released) ||
                  (cls == MPI_SUCCESS && tap_check(rbuf, BIG, 40))),
                 "receiving a pushed round whose sender died ends within "
                 "5 s (%.3f s): %s%s", dt, class_name(cls),
                 cls == MPI_SUCCESS ? ", the data intact" :
                 cls == FTW_ERR_BUFFER_UNUSABLE ? ", released" : "");
    tap_fill(rbuf, BIG, 41);
    pulls = tap_rndv_pulls();
    ok = swap(rank, buf);
    t0 = MPI_Wtime();
    while (MPI_Wtime() - t0 < 0.5) {
        int flag;

        MPI_Iprobe(2, MPI_ANY_TAG, MPI_COMM_WORLD, &flag,
                   MPI_STATUS_IGNORE);
    }
    tap_ok_local(tap_check(rbuf, BIG, 41), "the failed receive's buffer, "
                 "written after the error, is untouched 0.5 s later");
    tap_ok_local(ok && tap_rndv_pulls() - pulls == 1, "ranks 0 and 2 swap "
                 "%zu bytes through the rendezvous, intact", NEXT);
    MPI_Recv(&ok, 1, MPI_INT, 2, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    tap_ok_local(ok, "rank 2 got its half intact");
    free(buf);
    free(rbuf);
    MPI_Finalize();
    return tap_status();
}
