/* ftw-test: np=2 mode=both timeout=60 env=FTW_RNDV_THRESHOLD=1k */
/*
 * rndv_status_ignore - receives completed by the test calls with
 * MPI_STATUS_IGNORE / MPI_STATUSES_IGNORE while ftwrap's rendezvous is on
 * (every receive may get an RTS, so ftwrap needs the status the program
 * does not ask for: it must take its own, not read stack garbage).
 *
 * Rank 0 sends ROUNDS rounds of a 40-byte message (smaller than the RTS
 * header: the receive goes through ftwrap's scratch) and a 4 KiB one
 * (the rendezvous), each checksummed.  Rank 1 receives each with
 * MPI_Irecv and completes it by an MPI_Test, MPI_Testany, MPI_Testsome
 * or MPI_Testall loop (by round) with the statuses ignored, after filling
 * the stack below it with byte patterns (read as a status: large counts).
 * Asserted: every test call returns MPI_SUCCESS (before the fix: a
 * garbage status made MPI_Test report MPI_ERR_TRUNCATE, MPICH's
 * coll/nonblocking3), and every message arrives intact.
 */
#include "tap.h"

#define ROUNDS 1000
#define SMALL 40
#define BIG 4096

/* Leave a pattern on the stack where the next call's locals will be. */
static __attribute__((noinline)) void dirty_stack(unsigned seed)
{
    volatile unsigned char junk[8192];

    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (unsigned char)(0x7f ^ (seed + i / 64));
}

/* MPI_STATUSES_IGNORE, read at run time: MPICH defines it as a cast of 1,
 * which GCC takes for an array of no elements. */
static MPI_Status *statuses_ignore;

/* Complete *req by the test call of kind k, statuses ignored. */
static int test_until_done(MPI_Request *req, int k)
{
    int flag = 0, rc = MPI_SUCCESS, idx, n;

    for (unsigned spin = 0; rc == MPI_SUCCESS && !flag; spin++) {
        dirty_stack(spin);
        switch (k) {
        case 0:
            rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
            break;
        case 1:
            rc = MPI_Testany(1, req, &idx, &flag, MPI_STATUS_IGNORE);
            break;
        case 2:
            rc = MPI_Testsome(1, req, &n, &idx, statuses_ignore);
            flag = n == 1;
            break;
        default:
            rc = MPI_Testall(1, req, &flag, statuses_ignore);
            break;
        }
    }
    return rc;
}

int main(int argc, char **argv)
{
    static unsigned char small[SMALL], big[BIG];
    int rank, rc_ok = 1, data_ok = 1;

    MPI_Init(&argc, &argv);
    statuses_ignore = MPI_STATUSES_IGNORE;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (!tap_need_size(2))
        return 0;
    rank = tap_rank();
    tap_plan(2);
    for (int r = 0; r < ROUNDS; r++) {
        if (rank == 0) {
            tap_fill(small, SMALL, 2u * r);
            tap_fill(big, BIG, 2u * r + 1);
            MPI_Send(small, SMALL, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Send(big, BIG, MPI_BYTE, 1, 2, MPI_COMM_WORLD);
            continue;
        }
        for (int m = 0; m < 2; m++) {
            MPI_Request req;
            unsigned char *buf = m ? big : small;
            int len = m ? BIG : SMALL, rc;

            memset(buf, 0, (size_t)len);
            MPI_Irecv(buf, len, MPI_BYTE, 0, m + 1, MPI_COMM_WORLD, &req);
            rc = test_until_done(&req, r % 4);
            if (rc != MPI_SUCCESS && rc_ok) {
                rc_ok = 0;
                tap_diag("round %d: test call %d on the %d-byte receive "
                         "returned %d", r, r % 4, len, rc);
            }
            if (!tap_check(buf, (size_t)len, 2u * r + (unsigned)m) &&
                data_ok) {
                data_ok = 0;
                tap_diag("round %d: the %d-byte message is wrong", r, len);
            }
        }
    }
    tap_ok(rc_ok, "MPI_Test, Testany, Testsome and Testall with statuses "
           "ignored return MPI_SUCCESS for %d-byte and %d-byte receives",
           SMALL, BIG);
    tap_ok(data_ok, "all %d messages arrive intact", 2 * ROUNDS);
    MPI_Finalize();
    return tap_status();
}
