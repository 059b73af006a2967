/* ftw-test: np=3 mode=ftwrap timeout=60 */
/*
 * waitall_pieces - one MPI_Waitall whose requests finish in pieces, in
 * array order and out of it: every status, every error and every byte
 * where MPI_Waitall puts it.
 *
 * Rank 0 posts, in this order: FIRST receives from rank 1, then LATE
 * receives from rank 2, then REST receives from rank 1, and waits for
 * them all with one MPI_Waitall and an array of statuses, which it calls
 * once rank 1 says all its messages went out.  Rank 2 sends its own only
 * 50 ms after that, so the wait finds the first and the last part
 * finished and the middle one not.  The messages are 8 bytes, 1 KiB and
 * (every fifth) 300 KiB, which ftwrap moves by its own rendezvous;
 * in each round but the last, one receive is one byte too small for its
 * message (short_of).  They go over a duplicate of MPI_COMM_WORLD whose
 * error handler is MPI_ERRORS_RETURN, while MPI_COMM_WORLD keeps
 * MPI_ERRORS_ARE_FATAL in the first rounds: a truncation ftwrap finds
 * must be reported on the request's communicator (an error reported on
 * MPI_COMM_WORLD aborts the test).
 *
 * 1: MPI_Waitall returns MPI_ERR_IN_STATUS; the short receive's status
 *    says MPI_ERR_TRUNCATE and every other's MPI_SUCCESS: ftwrap's wait
 *    finishes every request (both MPIs' own leave those after the
 *    error pending, MPI_ERR_PENDING, which the standard allows too).
 * 2: every other status has the right source, tag and byte count, and
 *    every buffer holds its message, every byte checked.  The 300 KiB
 *    messages after the late ones are sent before rank 2 sends: their
 *    senders finish only if the wait pulls them meanwhile.
 * 3: every handle is MPI_REQUEST_NULL, and the same set waited for again
 *    with MPI_STATUSES_IGNORE and no truncation returns MPI_SUCCESS with
 *    every byte right.
 * 4: MPI_COMM_WORLD's error handler is what the program set, before and
 *    after: MPI_ERRORS_ARE_FATAL for the first rounds, then a handler of
 *    the test's own (whose reference the test frees at once), still there
 *    for MPI_Comm_call_errhandler after the waits, and called by them only
 *    where the MPI itself calls it.  The short receive is 8 bytes (in
 *    ftwrap's scratch header), 300 KiB (ftwrap's rendezvous: the
 *    truncation is ftwrap's to find and report) or, in the last two
 *    rounds, 1 KiB (the MPI's own: MPICH 4.0 reports it from its
 *    multi-request calls on MPI_COMM_WORLD, so there only the test's
 *    handler can be on MPI_COMM_WORLD, and is called once a round; Open
 *    MPI reports it on the request's communicator).  ftwrap's wait on MPICH looks at the
 *    requests in array order with MPI_Request_get_status, which reports
 *    on MPI_COMM_WORLD too, while MPI_COMM_WORLD returns errors.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

#define FIRST 20
#define LATE 12
#define REST 20
#define N (FIRST + LATE + REST)
#define BIG (300 * 1024)

/* The traffic's communicator: MPI_ERRORS_RETURN, while MPI_COMM_WORLD
 * keeps MPI_ERRORS_ARE_FATAL (an error reported on the wrong
 * communicator aborts the test). */
static MPI_Comm comm;

/* Rank 0's request i: its sender, tag and size. */
static int src_of(int i)
{
    return i >= FIRST && i < FIRST + LATE ? 2 : 1;
}

static int size_of(int i)
{
    return i % 5 == 4 ? BIG : i % 2 ? 1024 : 8;
}

/* The seed of message i's bytes in round (tap_fill). */
static uint64_t seed_of(int i, int round)
{
    return (uint64_t)round * N + (uint64_t)i + 1;
}

static void send_mine(int rank, int round)
{
    unsigned char *buf = malloc(BIG);

    for (int i = 0; i < N; i++) {
        if (src_of(i) != rank)
            continue;
        tap_fill(buf, (size_t)size_of(i), seed_of(i, round));
        MPI_Send(buf, size_of(i), MPI_BYTE, 0, i, comm);
    }
    free(buf);
}

/* Rank 0's side of one round; short_one: the request whose buffer is one
 * byte short, or -1.  Returns MPI_Waitall's code; *bad_* count what went
 * wrong. */
static int wait_round(int round, int short_one, int statuses,
                      int *bad_err, int *bad_st, int *bad_data,
                      int *bad_null)
{
    static unsigned char *buf[N];
    MPI_Request req[N];
    MPI_Status st[N];
    int rc;

    for (int i = 0; i < N; i++) {
        int cap = size_of(i) - (i == short_one);

        if (buf[i] == NULL)
            buf[i] = malloc(BIG);
        memset(buf[i], 0, BIG);
        MPI_Irecv(buf[i], cap, MPI_BYTE, src_of(i), i, comm,
                  &req[i]);
    }
    /* Rank 1 sends now; rank 2 waits for its word, then 50 ms. */
    MPI_Send(&round, 1, MPI_INT, 1, 1000, MPI_COMM_WORLD);
    MPI_Send(&round, 1, MPI_INT, 2, 1000, MPI_COMM_WORLD);
    MPI_Recv(&rc, 1, MPI_INT, 1, 1002, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    rc = MPI_Waitall(N, req, statuses ? st : MPI_STATUSES_IGNORE);
    for (int i = 0; i < N; i++) {
        int count = -1;

        *bad_null += req[i] != MPI_REQUEST_NULL;
        if (i == short_one) {
            if (st[i].MPI_ERROR == MPI_SUCCESS ||
                tap_class(st[i].MPI_ERROR) != MPI_ERR_TRUNCATE)
                (*bad_err)++;
            continue;
        }
        if (statuses) {
            if (rc == MPI_ERR_IN_STATUS && st[i].MPI_ERROR != MPI_SUCCESS)
                (*bad_err)++;
            MPI_Get_count(&st[i], MPI_BYTE, &count);
            if (st[i].MPI_SOURCE != src_of(i) || st[i].MPI_TAG != i ||
                count != size_of(i)) {
                if (*bad_st == 0)
                    tap_diag("request %d: source %d tag %d count %d", i,
                             st[i].MPI_SOURCE, st[i].MPI_TAG, count);
                (*bad_st)++;
            }
        }
        if (!tap_check(buf[i], (size_t)size_of(i), seed_of(i, round)))
            (*bad_data)++;
    }
    return rc;
}

static int world_calls;

static void world_handler(MPI_Comm *c, int *code, ...)
{
    (void)c, (void)code;
    world_calls++;
}

/* The request a round's receive is one byte short for: 8 bytes and
 * 300 KiB in the first part of the set; in the last two rounds 1 KiB,
 * in the first part and in the last (MPICH reports those on
 * MPI_COMM_WORLD). */
#define ROUNDS 6

static int short_of(int round)
{
    if (round >= ROUNDS - 2)
        return round == ROUNDS - 2 ? 11 : FIRST + LATE + 5;
    return round % 2 ? 14 : 10;
}

int main(int argc, char **argv)
{
    int rank, rounds = ROUNDS, ok_err = 1, ok_st = 1, ok_again = 1, ok_world = 1;

    MPI_Init(&argc, &argv);
    if (!tap_need_size(3))
        return 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    tap_plan(4);
    if (rank != 0) {
        for (int r = 0; r < rounds + 1; r++) {
            int word;

            MPI_Recv(&word, 1, MPI_INT, 0, 1000, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            if (rank == 2) {
                MPI_Recv(&word, 1, MPI_INT, 1, 1001, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                usleep(50000);
            }
            send_mine(rank, r);
            if (rank == 1) {
                MPI_Send(&word, 1, MPI_INT, 2, 1001, MPI_COMM_WORLD);
                MPI_Send(&word, 1, MPI_INT, 0, 1002, MPI_COMM_WORLD);
            }
        }
    } else {
        int bad_err = 0, bad_st = 0, bad_data = 0, bad_null = 0;
        int bad_rc = 0, bad_data2 = 0, rc;
        MPI_Errhandler eh;

        for (int r = 0; r < rounds; r++) {
            if (r == rounds / 2) {
                MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
                if (eh != MPI_ERRORS_ARE_FATAL) {
                    tap_diag("MPI_COMM_WORLD's handler changed");
                    ok_world = 0;
                }
                MPI_Comm_create_errhandler(world_handler, &eh);
                MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
                MPI_Errhandler_free(&eh);
            }
            rc = wait_round(r, short_of(r), 1, &bad_err, &bad_st, &bad_data,
                            &bad_null);
            if (rc != MPI_ERR_IN_STATUS) {
                tap_diag("round %d: MPI_Waitall returned %d", r, rc);
                bad_rc++;
            }
        }
        rc = wait_round(rounds, -1, 0, &bad_err, &bad_st, &bad_data2,
                        &bad_null);
#if defined(MPICH_VERSION)
        int native_calls = 2;
#else
        int native_calls = 0;
#endif
        if (world_calls != native_calls) {
            tap_diag("MPI_COMM_WORLD's handler called %d times, not %d",
                     world_calls, native_calls);
            ok_world = 0;
        }
        MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER);
        if (world_calls != native_calls + 1) {
            tap_diag("MPI_COMM_WORLD's own handler gone");
            ok_world = 0;
        }
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        ok_err = !bad_rc && !bad_err;
        ok_st = !bad_st && !bad_data;
        ok_again = rc == MPI_SUCCESS && !bad_data2 && !bad_null;
        if (bad_err)
            tap_diag("%d statuses with the wrong error", bad_err);
        if (bad_st || bad_data)
            tap_diag("%d wrong statuses, %d wrong buffers", bad_st,
                     bad_data);
        if (!ok_again)
            tap_diag("rc %d, %d wrong buffers, %d handles not null", rc,
                     bad_data2, bad_null);
    }
    tap_ok(ok_err, "MPI_Waitall: MPI_ERR_IN_STATUS, the short receive's "
           "status MPI_ERR_TRUNCATE, the others MPI_SUCCESS");
    tap_ok(ok_st, "every other status has its source, tag and count, "
           "every buffer its bytes");
    tap_ok(ok_again, "every handle null; again with statuses ignored: "
           "MPI_SUCCESS, every byte right");
    tap_ok(ok_world, "MPI_COMM_WORLD's error handler stays the program's "
           "through the waits, called by them only where the MPI calls it");
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
