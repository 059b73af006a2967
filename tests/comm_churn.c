/* ftw-test: np=2 mode=both timeout=120 */
/*
 * comm_churn - making and freeing communicators costs nothing that stays.
 *
 * Asserts, natively and under ftwrap:
 *   - 1500 duplicates of MPI_COMM_WORLD alive at once can be made (each
 *     checked by size and rank, one Allreduce on the last), then freed;
 *     a process gets no fewer communicators than the MPI gives (a
 *     duplicate of its own per communicator would halve them);
 *   - after a warm-up, 20,000 rounds of MPI_Comm_split + MPI_Comm_free,
 *     MPI_Comm_dup + free and MPI_Comm_create_group + free grow no
 *     process's resident memory by more than 4 MiB (a message or record
 *     left per creation would show);
 *   - communicators made by MPI_Comm_idup (completed by MPI_Wait) work as
 *     parents: MPI_Comm_split and MPI_Comm_dup of them give the right
 *     sizes and ranks, and an Allreduce on the grandchild sums right.
 */
#include <stdio.h>
#include <unistd.h>

#include "tap.h"

#define HELD 1500
#define ROUNDS 20000
#define WARMUP 1000
#define GROWTH_KB 4096

static int rank, size;

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;

    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &res) != 2)
        res = -1;
    fclose(f);
    return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

static int comm_is(MPI_Comm c, int want_size, int want_rank)
{
    int n = -1, r = -1;

    if (c == MPI_COMM_NULL)
        return 0;
    MPI_Comm_size(c, &n);
    MPI_Comm_rank(c, &r);
    return n == want_size && r == want_rank;
}

static void held_at_once(void)
{
    static MPI_Comm held[HELD];
    int ok = 1, made = 0, sum = -1;

    for (int i = 0; i < HELD && ok; i++) {
        ok = MPI_Comm_dup(MPI_COMM_WORLD, &held[i]) == MPI_SUCCESS &&
             comm_is(held[i], size, rank);
        made += ok;
    }
    if (ok)
        MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, held[HELD - 1]);
    for (int i = 0; i < made; i++)
        MPI_Comm_free(&held[i]);
    tap_ok(ok && sum == size * (size - 1) / 2,
           "%d duplicates of MPI_COMM_WORLD alive at once (made %d), the "
           "last one sums right", HELD, made);
}

static int churn(int rounds, MPI_Group world)
{
    int ok = 1;

    for (int i = 0; i < rounds; i++) {
        MPI_Comm c;

        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &c);
        ok &= comm_is(c, size / 2 + (size % 2 && rank % 2 == 0),
                      (size - 1 - rank) / 2);     /* key -rank: reversed */
        MPI_Comm_free(&c);
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        ok &= comm_is(c, size, rank);
        MPI_Comm_free(&c);
        MPI_Comm_create_group(MPI_COMM_WORLD, world, 11, &c);
        ok &= comm_is(c, size, rank);
        MPI_Comm_free(&c);
    }
    return ok;
}

static void idup_parents(void)
{
    MPI_Comm a, b, d;
    MPI_Request req;
    int ok, sum = -1, half = size / 2 + (size % 2 && rank % 2 == 0);

    MPI_Comm_idup(MPI_COMM_WORLD, &a, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    ok = comm_is(a, size, rank);
    MPI_Comm_split(a, rank % 2, rank, &b);
    ok &= comm_is(b, half, rank / 2);
    MPI_Comm_dup(b, &d);
    ok &= comm_is(d, half, rank / 2);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, d);
    ok &= sum == (rank % 2 ? (size / 2) * (size / 2) : (half - 1) * half);
    MPI_Comm_free(&d);
    MPI_Comm_free(&b);
    MPI_Comm_free(&a);
    tap_ok(ok, "MPI_Comm_idup's communicator as a parent: split, dup and "
           "an Allreduce on the grandchild (sum %d)", sum);
}

int main(int argc, char **argv)
{
    MPI_Group world;
    long before, after;
    int ok;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    tap_plan(4);

    held_at_once();

    ok = churn(WARMUP, world);
    before = rss_kb();
    ok &= churn(ROUNDS, world);
    after = rss_kb();
    tap_ok(ok, "%d rounds of split, dup and create_group, each freed: "
           "every communicator right", WARMUP + ROUNDS);
    if (after - before > GROWTH_KB)
        tap_diag("resident memory grew by %ld KiB", after - before);
    tap_ok(before > 0 && after - before <= GROWTH_KB,
           "resident memory grows by at most %d KiB over %d rounds",
           GROWTH_KB, ROUNDS);

    idup_parents();
    MPI_Group_free(&world);
    MPI_Finalize();
    return tap_status();
}
