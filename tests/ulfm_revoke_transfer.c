/* ftw-test: np=4 mode=ftwrap timeout=90 link=ftwrap */
/*
 * ulfm_revoke_transfer - large transfers between live processes that are
 * under way when their communicator is revoked, as ULFM programs leave
 * them (api/revshrink): the program waits for each request and then
 * frees the buffers.
 *
 * ROUNDS rounds.  Each round: a duplicate c of MPI_COMM_WORLD; ranks 1-3
 * each post an MPI_Isend of LEN checksummed bytes to the next of them
 * (1->2->3->1) and the matching MPI_Irecv and tell rank 0 so; rank 0
 * revokes c once all three have (the transfers are then under way);
 * ranks 1-3 call MPI_Barrier(c) (MPIX_ERR_REVOKED or success, whichever
 * the revocation reaches first), then MPI_Wait on the send and on the
 * receive, and free both buffers when the wait succeeded.
 *
 * Checked over MPI_COMM_WORLD, which is never revoked:
 *   - every wait returns MPI_SUCCESS or MPIX_ERR_REVOKED (a receive ftwrap
 *     had to give up may say FTW_ERR_BUFFER_UNUSABLE; its buffer is then
 *     left alone, as ftwrap.h asks);
 *   - a receive that returned MPI_SUCCESS holds the sender's bytes;
 *   - a send whose receiver got the whole message returned MPI_SUCCESS:
 *     both ends are alive and waiting, so ftwrap drives the transfer to
 *     its end instead of handing back a buffer the MPI still reads (the
 *     program frees it, and the MPI would read freed memory);
 *   - a shrink of the last c gives all 4 ranks; the runner checks that
 *     every process finished (no crash, no hang) and left nothing.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "tap.h"

#define NP 4
#define ROUNDS 20
#define LEN (16u << 20)

static int ok_class(int rc)
{
    int cls = tap_class(rc);

    return cls == MPI_SUCCESS || cls == MPIX_ERR_REVOKED ||
           cls == FTW_ERR_BUFFER_UNUSABLE;
}

int main(int argc, char **argv)
{
    int rank, classes_ok = 1, data_ok = 1, sends_ok = 1;
    int recvs_done = 0, sends_done = 0, shrunk = -1;
    MPI_Comm c = MPI_COMM_NULL, s;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!tap_need_size(NP))
        return 0;
    tap_plan(4);
    for (int r = 0; r < ROUNDS; r++) {
        int next = rank % 3 + 1, prev = (rank + 1) % 3 + 1;
        int rrc = MPI_SUCCESS, src_rc = MPI_SUCCESS;
        unsigned char *sb = NULL, *rb = NULL;
        MPI_Request sreq, rreq;

        if (c != MPI_COMM_NULL)
            MPI_Comm_free(&c);
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
        if (rank == 0) {
            int note;

            for (int i = 1; i < NP; i++)
                MPI_Recv(&note, 1, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            MPIX_Comm_revoke(c);
        } else {
            int src_class;

            sb = malloc(LEN);
            rb = malloc(LEN);
            tap_fill(sb, LEN, 1000u * r + rank);
            memset(rb, 0, LEN);
            /* A revocation that arrives first refuses the start. */
            src_rc = MPI_Isend(sb, LEN, MPI_BYTE, next, 1, c, &sreq);
            rrc = MPI_Irecv(rb, LEN, MPI_BYTE, prev, 1, c, &rreq);
            MPI_Send(&r, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
            MPI_Barrier(c);
            if (src_rc == MPI_SUCCESS)
                src_rc = MPI_Wait(&sreq, MPI_STATUS_IGNORE);
            if (rrc == MPI_SUCCESS)
                rrc = MPI_Wait(&rreq, MPI_STATUS_IGNORE);
            src_class = tap_class(src_rc);
            if (getenv("TEST_VERBOSE"))
                tap_diag("round %d: send %d, receive %d", r, src_class,
                         tap_class(rrc));
            if (!ok_class(src_rc) || !ok_class(rrc)) {
                classes_ok = 0;
                tap_diag("round %d: send %d, receive %d", r, src_class,
                         tap_class(rrc));
            }
            if (rrc == MPI_SUCCESS) {
                recvs_done++;
                if (!tap_check(rb, LEN, 1000u * r + prev)) {
                    data_ok = 0;
                    tap_diag("round %d: the bytes from %d are wrong", r,
                             prev);
                }
            }
            if (src_rc == MPI_SUCCESS)
                sends_done++;
        }
        /* Tell the sender whether its message arrived whole. */
        if (rank != 0) {
            int got = rrc == MPI_SUCCESS, theirs = 0;

            MPI_Sendrecv(&got, 1, MPI_INT, prev, 2, &theirs, 1, MPI_INT,
                         next, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (theirs && src_rc != MPI_SUCCESS) {
                sends_ok = 0;
                tap_diag("round %d: rank %d received my message whole, but "
                         "my send returned class %d", r, next,
                         tap_class(src_rc));
            }
        }
        if (src_rc == MPI_SUCCESS)
            free(sb);
        if (rrc == MPI_SUCCESS)
            free(rb);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Allreduce(MPI_IN_PLACE, &recvs_done, 1, MPI_INT, MPI_SUM,
                  MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &sends_done, 1, MPI_INT, MPI_SUM,
                  MPI_COMM_WORLD);
    tap_ok(classes_ok, "every wait on the revoked communicator returns "
           "success or MPIX_ERR_REVOKED");
    tap_ok(data_ok, "every receive that succeeded holds the sender's bytes "
           "(%d of %d)", recvs_done, 3 * ROUNDS);
    tap_ok(sends_ok, "every send whose receiver got the whole message "
           "returned MPI_SUCCESS (%d of %d)", sends_done, 3 * ROUNDS);
    if (MPIX_Comm_shrink(c, &s) == MPI_SUCCESS) {
        MPI_Comm_size(s, &shrunk);
        MPI_Comm_free(&s);
    }
    tap_ok(shrunk == NP, "MPIX_Comm_shrink of the last revoked "
           "communicator: %d ranks", shrunk);
    MPI_Comm_free(&c);
    MPI_Finalize();
    return tap_status();
}
