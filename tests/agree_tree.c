/* ftw-test: np=16 mode=ftwrap timeout=120 link=ftwrap expect-failed=8 fate=8:signal:KILL env=FTW_IDLE=sleep env=FTW_INJECT=rank=8,at=agree_down:121 */
/*
 * agree_tree - agreements back to back over 16 processes, one tree node
 * killed in the middle of one (here the inner node 8, whose children are
 * 9, 10 and 12: it dies after its parent's decision reached it, before it
 * forwards it, in agreement 41; FTW_INJECT counts its decision messages,
 * three per agreement).  agree_tree_root.c and agree_tree_two.c kill the
 * root, and two inner nodes at once.
 *
 * Every process registers a failure handler on MPI_COMM_WORLD in SUBSET
 * mode (whose agreements run inside the others' waits, numbered apart),
 * then runs ITERS agreements on MPI_COMM_WORLD: FTW_Comm_validate and
 * MPIX_Comm_agree in turn (the agree's flag: a pattern of the iteration
 * with one bit cleared by one rank, so the AND says who took part).  Each
 * survivor folds what each call returned (its error class, the failed
 * set as a bit mask, the flag) into a checksum, and checks each call
 * returned within BOUND s.  Then MPIX_Comm_shrink: over its result the
 * survivors compare checksums (MPI_MIN and MPI_MAX of them), the shrunk
 * size, the last validate's failed set (exactly the victims), and that
 * the handler ran once per victim everywhere.  The lowest survivor
 * prints TAP.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "tap.h"

#define NP 16
#ifndef VICTIMS
#define VICTIMS ((1u << 8))
#endif
#define ITERS 120
#define BOUND 10.0

static int handler_calls;

static void on_failure(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    (void)code;
    handler_calls++;
}

static uint32_t mask_of(MPI_Group g)
{
    MPI_Group world;
    int n = 0, in[NP], out[NP];
    uint32_t m = 0;

    MPI_Group_size(g, &n);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    for (int i = 0; i < n && i < NP; i++)
        in[i] = i;
    MPI_Group_translate_ranks(g, n, in, world, out);
    for (int i = 0; i < n && i < NP; i++)
        if (out[i] >= 0)
            m |= 1u << out[i];
    MPI_Group_free(&world);
    return m;
}

static uint64_t fold(uint64_t h, uint64_t v)
{
    h ^= v;
    return h * 0x100000001b3ull;
}

int main(int argc, char **argv)
{
    int rank, size, nvict = __builtin_popcount(VICTIMS);
    uint64_t h = 0xcbf29ce484222325ull, hmin = 0, hmax = 0;
    uint32_t last_failed = 0;
    double slowest = 0;
    int bad_class = 0, not_excluded = 0;
    MPI_Errhandler eh;
    MPI_Comm shrunk = MPI_COMM_NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != NP) {
        if (rank == 0)
            printf("1..0 # SKIP needs %d processes\n", NP);
        MPI_Finalize();
        return 0;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    FTW_Failhandler_set_mode(FTW_FAILHANDLER_MODE_SUBSET);
    MPI_Comm_create_errhandler(on_failure, &eh);
    FTW_Comm_set_failhandler(MPI_COMM_WORLD, eh);

    for (int i = 0; i < ITERS; i++) {
        double t0 = MPI_Wtime(), dt;
        int rc, cls;

        if (i % 2 == 0) {
            MPI_Group g;

            rc = FTW_Comm_validate(MPI_COMM_WORLD, &g);
            if (rc == MPI_SUCCESS) {
                last_failed = mask_of(g);
                MPI_Group_free(&g);
            }
            h = fold(h, last_failed);
            /* Once a victim's failure held up one agreement, every later
             * one names it (checked well after the kill). */
            if (i > ITERS - 20 && last_failed != VICTIMS)
                not_excluded++;
        } else {
            int flag = (int)(0x5a5a0000u ^ (uint32_t)i) | 0xffff;

            flag &= ~(1 << rank);
            rc = MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
            h = fold(h, (uint32_t)flag);
            if (rc != MPI_SUCCESS)
                MPIX_Comm_failure_ack(MPI_COMM_WORLD);
        }
        dt = MPI_Wtime() - t0;
        if (dt >= BOUND)
            tap_diag("rank %d: call %d took %.3f s", rank, i, dt);
        slowest = dt > slowest ? dt : slowest;
        cls = tap_class(rc);
        if (cls != MPI_SUCCESS && cls != MPIX_ERR_PROC_FAILED)
            bad_class++;
        h = fold(h, (uint64_t)cls);
    }
    MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk);
    {
        int sr = -1, ss = 0, bad = 0, allbad = 0, calls_min = 0,
            calls_max = 0;

        MPI_Comm_rank(shrunk, &sr);
        MPI_Comm_size(shrunk, &ss);
        MPI_Allreduce(&h, &hmin, 1, MPI_UINT64_T, MPI_MIN, shrunk);
        MPI_Allreduce(&h, &hmax, 1, MPI_UINT64_T, MPI_MAX, shrunk);
        MPI_Allreduce(&handler_calls, &calls_min, 1, MPI_INT, MPI_MIN,
                      shrunk);
        MPI_Allreduce(&handler_calls, &calls_max, 1, MPI_INT, MPI_MAX,
                      shrunk);
        bad = (slowest >= BOUND) + (bad_class != 0) * 2 +
              (not_excluded != 0) * 4;
        MPI_Allreduce(&bad, &allbad, 1, MPI_INT, MPI_BOR, shrunk);
        if (sr == 0) {
            printf("1..6\n");
            printf("%sok 1 - %d agreements, each back within %.0f s "
                   "(slowest here %.3f s)\n", allbad & 1 ? "not " : "",
                   ITERS, BOUND, slowest);
            printf("%sok 2 - every call returned MPI_SUCCESS or "
                   "MPIX_ERR_PROC_FAILED\n", allbad & 2 ? "not " : "");
            printf("%sok 3 - the same %d results on every survivor "
                   "(checksum %016llx, min %016llx)\n",
                   hmin == hmax ? "" : "not ", ITERS,
                   (unsigned long long)hmax, (unsigned long long)hmin);
            printf("%sok 4 - the last validates name exactly the victims "
                   "(0x%x, want 0x%x)\n", allbad & 4 ? "not " : "",
                   last_failed, VICTIMS);
            printf("%sok 5 - shrink: %d survivors (want %d)\n",
                   ss == NP - nvict ? "" : "not ", ss, NP - nvict);
            printf("%sok 6 - the SUBSET failure handler ran once per victim "
                   "everywhere (%d..%d, want %d)\n",
                   calls_min == nvict && calls_max == nvict ? "" : "not ",
                   calls_min, calls_max, nvict);
            fflush(stdout);
        }
    }
    MPI_Comm_free(&shrunk);
    MPI_Errhandler_free(&eh);
    MPI_Finalize();
    return 0;
}
