/* ftw-test: np=2 mode=ftwrap timeout=60 env=FTW_XPORT=shm */
/*
 * rndv_push_stale - a message the sender pushed that its receiver never
 * copied out must not be handed to a later receive of the same bytes.
 *
 * 10 rounds: rank 1 fills one 128 KiB buffer with the round's data and
 * sends it (MPI_Isend + MPI_Wait); the send waits in ftwrap, where it
 * copies the message into a push slot.  Rank 0, 20 ms later, receives
 * it with a count of 0: MPI_ERR_TRUNCATE, and nothing is pulled, so the
 * push slot is left full.  Then rank 1 refills the same buffer with new
 * data and sends it again, and rank 0 receives it whole.  Asserts:
 *  - every truncated receive fails with MPI_ERR_TRUNCATE, and rank 1's
 *    sends succeed;
 *  - every whole receive has the refilled data (checksum of every byte,
 *    count), never the bytes left in the push slot: the slot of a send
 *    that ended is emptied before the buffer is the program's again.
 */
#include "tap.h"

#include <stdlib.h>
#include <unistd.h>

#define LEN ((size_t)128 << 10)
#define ROUNDS 10

int main(int argc, char **argv)
{
    unsigned char *buf = malloc(LEN);
    int rank, trunc_ok = 1, send_ok = 1, data_ok = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (buf == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    tap_plan(2);
    for (int r = 0; r < ROUNDS; r++) {
        for (int half = 0; half < 2; half++) {
            uint64_t seed = (uint64_t)(2 * r + half + 1);
            MPI_Request req;
            MPI_Status st;
            int n = -1;

            if (rank == 1) {
                tap_fill(buf, LEN, seed);
                send_ok &= MPI_Isend(buf, (int)LEN, MPI_BYTE, 0, half,
                                     MPI_COMM_WORLD, &req) == MPI_SUCCESS &&
                           MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS;
            } else if (half == 0) {
                usleep(20000);      /* the sender pushes it meanwhile */
                trunc_ok &= tap_class(MPI_Recv(buf, 0, MPI_BYTE, 1, 0,
                                               MPI_COMM_WORLD, &st)) ==
                            MPI_ERR_TRUNCATE;
            } else {
                memset(buf, 0, LEN);
                usleep(20000);
                data_ok &= MPI_Recv(buf, (int)LEN, MPI_BYTE, 1, 1,
                                    MPI_COMM_WORLD, &st) == MPI_SUCCESS &&
                           MPI_Get_count(&st, MPI_BYTE, &n) == MPI_SUCCESS &&
                           n == (int)LEN && tap_check(buf, LEN, seed);
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    tap_ok(trunc_ok && send_ok, "%d receives of 0 bytes: MPI_ERR_TRUNCATE; "
           "the sends succeed", ROUNDS);
    tap_ok(data_ok, "%d receives of the same buffer refilled: whole, with "
           "the new data", ROUNDS);
    free(buf);
    MPI_Finalize();
    return tap_status();
}
