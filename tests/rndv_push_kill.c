/* ftw-test: np=3 mode=ftwrap timeout=40 expect-failed=1 fate=1:signal:KILL env=FTW_INJECT=rank=1,at=pulled:5 env=FTW_XPORT=shm */
/*
 * rndv_push_kill - a sender killed while its push slots hold messages
 * its receiver has not copied out yet.
 *
 * Rank 1 posts a window of 16 MPI_Isend of 256 KiB (a buffer each) to
 * rank 0, tells rank 0 so with a small message, and waits in
 * MPI_Waitall, where it fills its push slots (FTW_SHM_PUSH, 16 of
 * 64 KiB) with the window's first four messages.  Rank 0 waits 50 ms, then posts its 16
 * receives and one MPI_Waitall; fault injection (pulled:5) has it
 * SIGKILL rank 1 before it copies the fifth message out.  Asserts on
 * rank 0:
 *  - MPI_Waitall returns an error (MPI_ERR_IN_STATUS or
 *    FTW_ERR_PROC_FAIL_STOP) within 5 s;
 *  - the four messages copied before the kill completed, intact
 *    (checksum of every byte), and came from the push slots
 *    (rndv_shm_pushed); no message completed that was not whole;
 *  - every other request completed with FTW_ERR_PROC_FAIL_STOP and its
 *    handle is MPI_REQUEST_NULL;
 *  - afterwards rank 2 sends rank 0 a 4 MiB + 5 rendezvous message and
 *    an eager one, both intact.
 */
#include "tap.h"

#include <stdlib.h>
#include <unistd.h>

#include "ftwrap.h"
#include "killed_sender.h"

#define WIN 16
#define LEN ((size_t)256 << 10)
#define NEXT ((size_t)(4 << 20) + 5)
#define TAG_POSTED 99     /* above the window's tags 0..WIN-1 */

static int victim(unsigned char *buf)
{
    MPI_Request req[WIN];
    MPI_Status *volatile ignore = MPI_STATUSES_IGNORE;

    for (int i = 0; i < WIN; i++) {
        tap_fill(buf + i * LEN, LEN, (uint64_t)(100 + i));
        MPI_Isend(buf + i * LEN, (int)LEN, MPI_BYTE, 0, i, MPI_COMM_WORLD,
                  &req[i]);
    }
    MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_POSTED, MPI_COMM_WORLD);
    MPI_Waitall(WIN, req, ignore);
    tap_diag("rank 1 survived its window");
    MPI_Finalize();
    return 1;
}

int main(int argc, char **argv)
{
    unsigned char *buf = malloc(WIN * LEN > NEXT ? WIN * LEN : NEXT);
    MPI_Request req[WIN];
    MPI_Status st[WIN];
    int rank, rc, whole = 0, failed = 0, bad = 0, nulls = 0;
    long long pushed0, pushed;
    double t0, dt;

    rank = ks_start(&argc, &argv, buf);
    if (rank == 1)
        return victim(buf);
    if (rank == 2)
        return ks_bystander(buf, NEXT);
    tap_plan(5);
    memset(buf, 0, WIN * LEN);
    MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_POSTED, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    usleep(50000);      /* rank 1 fills its push slots meanwhile */
    pushed0 = tap_ftw_stat("rndv_shm_pushed");
    for (int i = 0; i < WIN; i++)
        st[i].MPI_ERROR = -12345;
    t0 = MPI_Wtime();
    for (int i = 0; i < WIN; i++)
        MPI_Irecv(buf + i * LEN, (int)LEN, MPI_BYTE, 1, i, MPI_COMM_WORLD,
                  &req[i]);
    rc = MPI_Waitall(WIN, req, st);
    dt = MPI_Wtime() - t0;
    pushed = tap_ftw_stat("rndv_shm_pushed") - pushed0;
    for (int i = 0; i < WIN; i++) {
        int err = rc == MPI_ERR_IN_STATUS ? st[i].MPI_ERROR : rc;
        int n = -1;

        nulls += req[i] == MPI_REQUEST_NULL;
        if (err == MPI_SUCCESS) {
            MPI_Get_count(&st[i], MPI_BYTE, &n);
            if (n == (int)LEN &&
                tap_check(buf + i * LEN, LEN, (uint64_t)(100 + i)))
                whole++;
            else
                bad++;
        } else if (tap_class(err) == FTW_ERR_PROC_FAIL_STOP) {
            failed++;
        } else {
            bad++;
        }
    }
    tap_ok_local((tap_class(rc) == MPI_ERR_IN_STATUS ||
                  tap_class(rc) == FTW_ERR_PROC_FAIL_STOP) && dt < 5.0,
                 "MPI_Waitall on a window whose sender was killed fails "
                 "(class %d) within 5 s (%.3f s)", tap_class(rc), dt);
    tap_ok_local(whole >= 4 && bad == 0, "the messages copied out before "
                 "the kill are whole and intact, no other completed (%d "
                 "whole, %d wrong)", whole, bad);
    tap_ok_local(pushed >= 4, "they came from the sender's push slots "
                 "(rndv_shm_pushed +%lld)", pushed);
    tap_ok_local(whole + failed == WIN && failed > 0 && nulls == WIN,
                 "the others failed with FTW_ERR_PROC_FAIL_STOP (%d), every "
                 "handle is null (%d)", failed, nulls);
    tap_ok_local(ks_bystander_intact(buf, NEXT, NEXT) &&
                 ks_bystander_verdict(), "a later rendezvous and eager "
                 "message from rank 2 arrive intact");
    free(buf);
    MPI_Finalize();
    return tap_status();
}
