/* ftw-test: np=3 mode=ftwrap timeout=40 expect-failed=1 fate=1:signal:KILL env=FTW_RNDV_THRESHOLD=64k env=FTW_RNDV_CHUNK=1m env=FTW_INJECT=rank=1,at=pull:3 env=FTW_XPORT=cma */
/*
 * rndv_persistent_fail - a receiver killed while a persistent rendezvous
 * send to it is started.
 *
 * Rank 0 makes two persistent sends to rank 1: A (64 MiB, tag 1) and B
 * (1 MiB, tag 2, which rank 1 never receives).  It starts B and frees it
 * at once (MPI_Request_free of an active request), then starts A; rank 1
 * receives A, and fault injection (pull:3) kills it before the third
 * 1 MiB chunk of its pull.  Asserts:
 *  - rank 0's MPI_Wait on A returns FTW_ERR_PROC_FAIL_STOP within 5 s,
 *    and A's handle stays (inactive, as a persistent request's does);
 *  - a wait on A again returns MPI_SUCCESS at once (inactive);
 *  - starting A again fails at once with FTW_ERR_PROC_FAIL_STOP;
 *  - MPI_Request_free of A succeeds and sets it to MPI_REQUEST_NULL;
 *  - a persistent rendezvous send from rank 0 to rank 2 (4 MiB + 5, 4
 *    starts with new data each time) arrives intact every time (rank 2
 *    checks the checksums, and that it pulled the 4 messages, and sends
 *    its verdict back);
 *  - MPI_Finalize returns on the survivors; the runner checks that no
 *    process or file is left behind.
 */
#include "tap.h"

#include <stdlib.h>

#include "ftwrap.h"

#define BIG ((size_t)64 << 20)
#define FREED ((size_t)1 << 20)
#define NEXT ((size_t)(4 << 20) + 5)
#define ROUNDS 4

int main(int argc, char **argv)
{
    unsigned char *buf = malloc(BIG), *fbuf = malloc(FREED);
    int rank, ok2 = 0, rc;
    MPI_Request a, b, held, c;
    MPI_Status st;
    double t0, dt;

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (buf == NULL || fbuf == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    if (rank == 1) {
        MPI_Recv(buf, (int)BIG, MPI_BYTE, 0, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        tap_diag("rank 1 survived its pull");
        MPI_Finalize();
        return 1;
    }
    if (rank == 2) {
        long long before = tap_rndv_pulls();

        ok2 = 1;
        for (int i = 0; i < ROUNDS; i++) {
            rc = MPI_Recv(buf, (int)BIG, MPI_BYTE, 0, 2, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE);
            ok2 &= rc == MPI_SUCCESS && tap_check(buf, NEXT, 33 + i);
        }
        ok2 &= tap_rndv_pulls() - before == ROUNDS;
        MPI_Send(&ok2, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
        free(buf);
        free(fbuf);
        MPI_Finalize();
        return ok2 ? 0 : 1;
    }
    tap_plan(8);
    tap_fill(buf, BIG, 32);
    tap_fill(fbuf, FREED, 31);
    rc = MPI_Send_init(buf, (int)BIG, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &a);
    if (rc == MPI_SUCCESS)
        rc = MPI_Send_init(fbuf, (int)FREED, MPI_BYTE, 1, 2, MPI_COMM_WORLD,
                           &b);
    if (rc == MPI_SUCCESS)
        rc = MPI_Start(&b);
    if (rc == MPI_SUCCESS)
        rc = MPI_Request_free(&b);
    tap_ok_local(rc == MPI_SUCCESS && b == MPI_REQUEST_NULL, "a started "
                 "persistent send to rank 1 freed while active");
    held = a;
    t0 = MPI_Wtime();
    rc = MPI_Start(&a);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&a, &st);
    dt = MPI_Wtime() - t0;
    tap_ok_local(class_of(rc) == FTW_ERR_PROC_FAIL_STOP, "started "
                 "persistent send to a receiver killed mid-pull: "
                 "FTW_ERR_PROC_FAIL_STOP (%s)", class_name(class_of(rc)));
    tap_ok_local(dt < 5.0 && a == held, "... within 5 s (%.3f s), the "
                 "handle kept", dt);
    t0 = MPI_Wtime();
    rc = MPI_Wait(&a, &st);
    tap_ok_local(rc == MPI_SUCCESS && MPI_Wtime() - t0 < 1.0 && a == held,
                 "a wait on it again returns at once (inactive)");
    rc = MPI_Start(&a);
    tap_ok_local(class_of(rc) == FTW_ERR_PROC_FAIL_STOP, "starting it "
                 "again fails at once (%s)", class_name(class_of(rc)));
    rc = MPI_Request_free(&a);
    tap_ok_local(rc == MPI_SUCCESS && a == MPI_REQUEST_NULL,
                 "MPI_Request_free of it");
    rc = MPI_Send_init(buf, (int)NEXT, MPI_BYTE, 2, 2, MPI_COMM_WORLD, &c);
    for (int i = 0; i < ROUNDS && rc == MPI_SUCCESS; i++) {
        tap_fill(buf, NEXT, 33 + i);
        rc = MPI_Start(&c);
        if (rc == MPI_SUCCESS)
            rc = MPI_Wait(&c, MPI_STATUS_IGNORE);
    }
    if (rc == MPI_SUCCESS)
        rc = MPI_Request_free(&c);
    tap_ok_local(rc == MPI_SUCCESS, "%d rounds of a persistent rendezvous "
                 "send to rank 2 succeed", ROUNDS);
    MPI_Recv(&ok2, 1, MPI_INT, 2, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    tap_ok_local(ok2, "rank 2 got them intact, through the rendezvous");
    free(buf);
    free(fbuf);
    MPI_Finalize();
    return tap_status();
}
