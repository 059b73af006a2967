/* ftw-test: np=2 mode=ftwrap timeout=120 env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=auto env=FTW_INJECT=rank=0+1,at=expose:2 */
/*
 * rndv_persistent_push - a persistent rendezvous round that no transport
 * can expose when it starts (FTW_INJECT at=expose:2: each rank's second
 * round finds none, as a verbs QP still being reconnected does) is pushed
 * whole after its RTS instead of being refused, and the rounds after it
 * are pulled again.
 *
 * Rank 0 sends rank 1 ROUNDS rounds of a contiguous MPI_Send_init of
 * 1 MiB + 7 bytes; then rank 1 sends rank 0 ROUNDS rounds of an
 * MPI_Ssend_init of a strided type (MPI_Type_vector, 1 MiB of data, packed
 * by ftwrap).  The data changes every round; receives alternate between a
 * persistent receive and MPI_Recv.  Asserts:
 *  - every MPI_Start and completion succeeds (before the push, the second
 *    round's start failed with MPI_ERR_OTHER);
 *  - every round arrives intact (its own pattern, the strided receive's
 *    gaps and the byte after the contiguous receive untouched);
 *  - each receiver got exactly one round pushed (rndv_pushed 1) and
 *    pulled the other ROUNDS - 1 (rndv_cma + rndv_shm), so the push did
 *    not stick to the send.
 */
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define LEN (((size_t)1 << 20) + 7)
#define ROUNDS 5
#define BLOCKS 256
#define BLOCK 4096                  /* 1 MiB of data, every other block */
#define CANARY 0x77ull

static int rank;

static uint64_t seed_of(int part, int round)
{
    return ((uint64_t)part << 32) | (uint64_t)(round + 1);
}

/* Part 1: contiguous rounds from 0 to 1. */
static int contiguous(void)
{
    unsigned char *buf = calloc(1, LEN + 1);
    MPI_Request req;
    MPI_Status st;
    int ok = buf != NULL;

    if (!ok)
        return 0;
    if (rank == 0) {
        ok &= mpi_ok(MPI_Send_init(buf, (int)LEN, MPI_BYTE, 1, 1,
                                   MPI_COMM_WORLD, &req), "MPI_Send_init");
        for (int r = 0; ok && r < ROUNDS; r++) {
            tap_fill(buf, LEN, seed_of(1, r));
            ok &= mpi_ok(MPI_Start(&req), "MPI_Start");
            ok &= mpi_ok(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait");
        }
        ok &= mpi_ok(MPI_Request_free(&req), "MPI_Request_free");
    } else {
        ok &= mpi_ok(MPI_Recv_init(buf, (int)LEN + 1, MPI_BYTE, 0, 1,
                                   MPI_COMM_WORLD, &req), "MPI_Recv_init");
        for (int r = 0; ok && r < ROUNDS; r++) {
            int count = -1;

            memset(buf, 0, LEN);
            buf[LEN] = tap_pattern_byte(CANARY, 0);
            if (r % 2 == 0) {
                ok &= mpi_ok(MPI_Start(&req), "MPI_Start(recv)");
                ok &= mpi_ok(MPI_Wait(&req, &st), "MPI_Wait(recv)");
            } else {
                ok &= mpi_ok(MPI_Recv(buf, (int)LEN + 1, MPI_BYTE, 0, 1,
                                      MPI_COMM_WORLD, &st), "MPI_Recv");
            }
            MPI_Get_count(&st, MPI_BYTE, &count);
            if (!ok || count != (int)LEN || !tap_check(buf, LEN, seed_of(1, r))
                || buf[LEN] != tap_pattern_byte(CANARY, 0)) {
                tap_diag("contiguous round %d: %d bytes, %s", r, count,
                         ok ? "corrupted or overrun" : "failed");
                ok = 0;
            }
        }
        ok &= mpi_ok(MPI_Request_free(&req), "MPI_Request_free(recv)");
    }
    free(buf);
    return ok;
}

/* Block b of a strided buffer holds data (even b) or a gap (odd b). */
static void strided_fill(unsigned char *buf, int round)
{
    for (int b = 0; b < 2 * BLOCKS; b++)
        if (b % 2 == 0)
            tap_fill(buf + (size_t)b * BLOCK, BLOCK,
                     seed_of(2, round) * 1000 + (uint64_t)b);
        else
            memset(buf + (size_t)b * BLOCK, 0xee, BLOCK);
}

static int strided_check(const unsigned char *buf, int round)
{
    for (int b = 0; b < 2 * BLOCKS; b++) {
        const unsigned char *p = buf + (size_t)b * BLOCK;

        if (b % 2 == 0 &&
            !tap_check(p, BLOCK, seed_of(2, round) * 1000 + (uint64_t)b))
            return 0;
        for (int i = 0; b % 2 == 1 && i < BLOCK; i++)
            if (p[i] != 0x11)
                return 0;
    }
    return 1;
}

/* Part 2: strided synchronous rounds from 1 to 0. */
static int strided(void)
{
    size_t len = (size_t)2 * BLOCKS * BLOCK;
    unsigned char *buf = calloc(1, len);
    MPI_Datatype vec;
    MPI_Request req;
    int ok = buf != NULL;

    if (!ok)
        return 0;
    MPI_Type_vector(BLOCKS, BLOCK, 2 * BLOCK, MPI_BYTE, &vec);
    MPI_Type_commit(&vec);
    if (rank == 1) {
        ok &= mpi_ok(MPI_Ssend_init(buf, 1, vec, 0, 2, MPI_COMM_WORLD, &req),
                     "MPI_Ssend_init");
        MPI_Type_free(&vec);
        for (int r = 0; ok && r < ROUNDS; r++) {
            strided_fill(buf, r);
            ok &= mpi_ok(MPI_Start(&req), "MPI_Start");
            ok &= mpi_ok(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait");
        }
        ok &= mpi_ok(MPI_Request_free(&req), "MPI_Request_free");
    } else {
        for (int r = 0; ok && r < ROUNDS; r++) {
            memset(buf, 0x11, len);
            ok &= mpi_ok(MPI_Recv(buf, 1, vec, 1, 2, MPI_COMM_WORLD,
                                  MPI_STATUS_IGNORE), "MPI_Recv");
            if (ok && !strided_check(buf, r)) {
                tap_diag("strided round %d corrupted", r);
                ok = 0;
            }
        }
        MPI_Type_free(&vec);
    }
    free(buf);
    return ok;
}

int main(int argc, char **argv)
{
    long long pushed, pulls;
    int ok;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (!tap_need_size(2))
        return tap_status();
    tap_plan(4);
    ok = contiguous();
    tap_ok(ok, "%d contiguous persistent rounds of %zu bytes 0 -> 1, the "
           "second pushed: every start succeeds, every round intact",
           ROUNDS, LEN);
    ok = strided();
    tap_ok(ok, "%d strided synchronous persistent rounds 1 -> 0, the second "
           "pushed: every start succeeds, blocks intact, gaps untouched",
           ROUNDS);
    pushed = tap_ftw_stat("rndv_pushed");
    tap_ok(pushed == 1, "each receiver got exactly one round pushed "
           "(rank %d: rndv_pushed %lld)", rank, pushed);
    pulls = tap_rndv_pulls();
    tap_ok(pulls == ROUNDS - 1, "each receiver pulled the other rounds: the "
           "push did not stick to the send (rank %d: %lld pulled)", rank,
           pulls);
    MPI_Finalize();
    return tap_status();
}
