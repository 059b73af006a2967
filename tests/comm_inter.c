/* ftw-test: np=5 mode=both timeout=90 */
/*
 * comm_inter - intercommunicators made one after another, many ways, work.
 *
 * Makes intercommunicators the ways MPICH's test suite does, freeing each
 * before the next so that the MPI reuses its context ids: MPI_COMM_WORLD
 * split into halves, into 1 and the rest and into 2 and the rest
 * (MPI_Intercomm_create), a dup and a split of an intercommunicator,
 * MPI_Comm_create on an intercommunicator dropping each group's rank 0,
 * and a merge back into an intracommunicator.  On each it asserts that
 * the size and remote size are right; that point-to-point works across
 * the groups (every process sends to remote rank 0, which finds each
 * message with MPI_Probe and MPI_Iprobe before receiving it); and that
 * barrier, bcast (MPI_ROOT / MPI_PROC_NULL), allreduce, allgather and
 * alltoall deliver the remote group's data.  Five processes, so the
 * halves differ in size.
 */
#include "tap.h"

#define ROUNDS 3
#define PLAN (7 * 7 * ROUNDS + 1)
#define TAG 41

static int rank, size;

/* The world rank of each process of comm's remote group. */
static void remote_world(MPI_Comm comm, int n, int *world)
{
    MPI_Group remote, wg;
    int ranks[64];

    for (int i = 0; i < n; i++)
        ranks[i] = i;
    MPI_Comm_remote_group(comm, &remote);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_translate_ranks(remote, n, ranks, wg, world);
    MPI_Group_free(&wg);
    MPI_Group_free(&remote);
}

/* Every process sends its world rank to remote rank 0, which probes for
 * each message (blocking and not) before receiving it. */
static int check_p2p(MPI_Comm ic, int lrank, int rsize, const int *rworld)
{
    int ok = 1, got[64] = { 0 };

    MPI_Send(&rank, 1, MPI_INT, 0, TAG, ic);
    if (lrank != 0)
        return ok;
    for (int i = 0; i < rsize; i++) {
        MPI_Status st;
        int flag = 0, count = -1, v = -1;

        MPI_Probe(MPI_ANY_SOURCE, TAG, ic, &st);
        MPI_Get_count(&st, MPI_INT, &count);
        ok &= count == 1 && st.MPI_SOURCE >= 0 && st.MPI_SOURCE < rsize;
        while (!flag)
            MPI_Iprobe(st.MPI_SOURCE, TAG, ic, &flag, &st);
        MPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, TAG, ic, MPI_STATUS_IGNORE);
        if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < rsize) {
            ok &= v == rworld[st.MPI_SOURCE];
            got[st.MPI_SOURCE]++;
        }
    }
    for (int i = 0; i < rsize; i++)
        ok &= got[i] == 1;
    return ok;
}

/* Group A's rank 0 broadcasts its world rank to group B, and back. */
static int check_bcast(MPI_Comm ic, int left, int lrank, const int *rworld)
{
    int ok = 1;

    for (int from_left = 1; from_left >= 0; from_left--) {
        int v = -1;

        if (left == from_left) {
            v = rank;
            MPI_Bcast(&v, 1, MPI_INT, lrank == 0 ? MPI_ROOT : MPI_PROC_NULL,
                      ic);
        } else {
            MPI_Bcast(&v, 1, MPI_INT, 0, ic);
            ok &= v == rworld[0];
        }
    }
    return ok;
}

/* Allreduce (the remote group's sum), allgather and alltoall of world
 * ranks. */
static int check_colls(MPI_Comm ic, int lrank, int rsize, const int *rworld)
{
    int ok = 1, sum = -1, want = 0, in[64], out[64];

    for (int i = 0; i < rsize; i++)
        want += rworld[i];
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, ic);
    ok &= sum == want;
    MPI_Allgather(&rank, 1, MPI_INT, out, 1, MPI_INT, ic);
    for (int i = 0; i < rsize; i++)
        ok &= out[i] == rworld[i];
    for (int i = 0; i < rsize; i++)
        in[i] = rank * 100 + i;
    MPI_Alltoall(in, 1, MPI_INT, out, 1, MPI_INT, ic);
    for (int i = 0; i < rsize; i++)
        ok &= out[i] == rworld[i] * 100 + lrank;
    return ok;
}

/* Seven checks on intercommunicator ic (MPI_COMM_NULL: this process is
 * in neither group; it takes part in the verdicts only). */
static void check(MPI_Comm ic, int left, int want_local, int want_remote,
                  const char *how)
{
    int lsize = -1, rsize = -1, lrank = -1, inter = 0, rworld[64];
    int in = ic != MPI_COMM_NULL;

    if (in) {
        MPI_Comm_test_inter(ic, &inter);
        MPI_Comm_size(ic, &lsize);
        MPI_Comm_remote_size(ic, &rsize);
        MPI_Comm_rank(ic, &lrank);
        remote_world(ic, rsize, rworld);
    }
    tap_ok(!in || (inter && lsize == want_local && rsize == want_remote),
           "%s: an intercommunicator of %d and %d", how, want_local,
           want_remote);
    tap_ok(!in || check_p2p(ic, lrank, rsize, rworld),
           "%s: send, probe, iprobe and receive across", how);
    tap_ok(!in || MPI_Barrier(ic) == MPI_SUCCESS, "%s: barrier", how);
    tap_ok(!in || check_bcast(ic, left, lrank, rworld),
           "%s: bcast both ways", how);
    tap_ok(!in || check_colls(ic, lrank, rsize, rworld),
           "%s: allreduce, allgather, alltoall", how);
    tap_ok(!in || MPI_Barrier(ic) == MPI_SUCCESS, "%s: barrier again", how);
    tap_ok(!in || MPI_Comm_free(&ic) == MPI_SUCCESS, "%s: free", how);
}

/* MPI_COMM_WORLD's ranks below cut against the rest. */
static MPI_Comm split_world(int cut, int tag)
{
    MPI_Comm half, ic;
    int left = rank < cut;

    MPI_Comm_split(MPI_COMM_WORLD, left, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, left ? cut : 0, tag, &ic);
    MPI_Comm_free(&half);
    return ic;
}

static void round_of_intercomms(void)
{
    int h = size / 2, left = rank < h;
    MPI_Comm ic, ic2, merged;
    MPI_Group g, keep;
    int zero = 0;

    check(split_world(h, 12345), left, left ? h : size - h,
          left ? size - h : h, "halves");
    check(split_world(1, 12346), rank < 1, rank < 1 ? 1 : size - 1,
          rank < 1 ? size - 1 : 1, "1 and the rest");
    check(split_world(2, 12347), rank < 2, rank < 2 ? 2 : size - 2,
          rank < 2 ? size - 2 : 2, "2 and the rest");

    ic = split_world(h, 12345);
    MPI_Comm_dup(ic, &ic2);
    MPI_Comm_free(&ic);
    check(ic2, left, left ? h : size - h, left ? size - h : h, "dup");

    ic = split_world(h, 12345);
    MPI_Comm_split(ic, 0, rank, &ic2);
    MPI_Comm_free(&ic);
    check(ic2, left, left ? h : size - h, left ? size - h : h, "split");

    /* Drop each group's rank 0: the local group is given by this side. */
    ic = split_world(h, 12345);
    MPI_Comm_group(ic, &g);
    MPI_Group_excl(g, 1, &zero, &keep);
    MPI_Comm_create(ic, keep, &ic2);
    MPI_Group_free(&keep);
    MPI_Group_free(&g);
    MPI_Comm_free(&ic);
    check(ic2, left, left ? h - 1 : size - h - 1,
          left ? size - h - 1 : h - 1, "create without rank 0");

    /* Merge, then split the merged one into an intercommunicator again. */
    ic = split_world(h, 12345);
    MPI_Intercomm_merge(ic, !left, &merged);
    MPI_Comm_free(&ic);
    {
        MPI_Comm half;

        MPI_Comm_split(merged, left, rank, &half);
        MPI_Intercomm_create(half, 0, merged, left ? h : 0, 9, &ic2);
        MPI_Comm_free(&half);
    }
    MPI_Comm_free(&merged);
    check(ic2, left, left ? h : size - h, left ? size - h : h,
          "merged and made again");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 4 || size > 64) {
        if (rank == 0)
            printf("1..0 # SKIP needs 4 to 64 processes\n");
        MPI_Finalize();
        return 0;
    }
    tap_plan(PLAN);
    for (int i = 0; i < ROUNDS; i++)
        round_of_intercomms();
    tap_ok(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS,
           "the world still works");
    MPI_Finalize();
    return tap_status();
}
