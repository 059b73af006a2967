/* ftw-test: np=4 mode=both timeout=60 */
/*
 * intercomm - intercommunicators work as they do without ftwrap.
 *
 * The even and the odd ranks of MPI_COMM_WORLD form two groups joined by
 * MPI_Intercomm_create.  On the intercommunicator and on its MPI_Comm_dup,
 * asserts: point-to-point to the remote group (each rank sends its
 * checksummed block to the same rank of the other group), found first by
 * MPI_Probe and MPI_Iprobe with MPI_ANY_SOURCE (status names the remote
 * rank, MPI_Get_count the size) and then received; MPI_Mprobe/MPI_Mrecv
 * the same way; MPI_Allreduce (each group gets the other's sum) and
 * MPI_Bcast from a root of one group into the other; MPI_Comm_split of
 * the intercommunicator; MPI_Intercomm_merge into an intracommunicator on
 * which MPI_Allreduce and MPI_Comm_dup work; and every one of them freed.
 */
#include "tap.h"

#define LEN 4096
#define TAG 31

static int wrank, wsize;

static uint64_t seed_of(int from)
{
    return 0x1C0u + (uint64_t)from;
}

/* Each rank sends its block to the same rank of the remote group and
 * receives that rank's block, found by a probe of kind how.  Groups hold
 * the even and the odd world ranks in ascending order, or descending
 * (reversed). */
static int exchange(MPI_Comm ic, int how, int reversed)
{
    static unsigned char out[LEN], in[LEN];
    MPI_Status st;
    MPI_Request req;
    MPI_Message msg;
    int rank, rsize, flag = 0, n = -1, ok;

    MPI_Comm_rank(ic, &rank);
    MPI_Comm_remote_size(ic, &rsize);
    if (rank >= rsize)
        return 1;
    tap_fill(out, LEN, seed_of(wrank));
    memset(in, 0, LEN);
    MPI_Isend(out, LEN, MPI_BYTE, rank, TAG, ic, &req);
    if (how == 0) {
        MPI_Probe(MPI_ANY_SOURCE, TAG, ic, &st);
    } else if (how == 1) {
        while (!flag)
            MPI_Iprobe(MPI_ANY_SOURCE, TAG, ic, &flag, &st);
    } else {
        MPI_Mprobe(MPI_ANY_SOURCE, TAG, ic, &msg, &st);
    }
    MPI_Get_count(&st, MPI_BYTE, &n);
    ok = st.MPI_SOURCE == rank && n == LEN;
    if (how == 2)
        MPI_Mrecv(in, LEN, MPI_BYTE, &msg, &st);
    else
        MPI_Recv(in, LEN, MPI_BYTE, st.MPI_SOURCE, TAG, ic, &st);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    /* The sender is the same rank of the other group. */
    return ok && st.MPI_SOURCE == rank &&
           tap_check(in, LEN, seed_of((1 - wrank % 2) +
                                      2 * (reversed ? rsize - 1 - rank
                                                    : rank)));
}

/* Collectives across the two groups. */
static int collectives(MPI_Comm ic)
{
    int rank, sum = -1, want = 0, root, v = -1;

    MPI_Comm_rank(ic, &rank);
    /* Each group gets the sum of the other group's world ranks. */
    for (int r = 0; r < wsize; r++)
        if (r % 2 != wrank % 2)
            want += r;
    MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, ic);
    /* Rank 0 of the even group broadcasts to the odd group. */
    if (wrank % 2 == 0)
        root = rank == 0 ? MPI_ROOT : MPI_PROC_NULL;
    else
        root = 0;
    if (root == MPI_ROOT)
        v = 4242;
    MPI_Bcast(&v, 1, MPI_INT, root, ic);
    return sum == want && (wrank % 2 == 0 ? 1 : v == 4242);
}

int main(int argc, char **argv)
{
    MPI_Comm half, ic, dup, sp, merged, mdup;
    int ok, inter = 0, sum = -1, mrank = -1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    tap_plan(6);

    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &half);
    /* Local leader 0 of each half; remote leader: world rank 1 or 0. */
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, wrank % 2 ? 0 : 1, 7, &ic);
    MPI_Comm_test_inter(ic, &inter);
    ok = inter;
    for (int how = 0; how < 3; how++)
        ok &= exchange(ic, how, 0);
    tap_ok(ok, "intercommunicator: MPI_Probe, MPI_Iprobe (MPI_ANY_SOURCE) "
           "and MPI_Mprobe find the remote rank's message, received intact");

    MPI_Comm_dup(ic, &dup);
    MPI_Comm_test_inter(dup, &inter);
    ok = inter;
    for (int how = 0; how < 3; how++)
        ok &= exchange(dup, how, 0);
    tap_ok(ok, "MPI_Comm_dup of it: an intercommunicator, the same "
           "exchanges intact");

    tap_ok(collectives(ic) && collectives(dup),
           "MPI_Allreduce and MPI_Bcast across the groups, on both");

    MPI_Comm_split(ic, 0, -wrank, &sp);
    ok = sp != MPI_COMM_NULL && exchange(sp, 0, 1);
    tap_ok(ok, "MPI_Comm_split of the intercommunicator (key -rank: both "
           "groups reversed): exchange intact");

    MPI_Intercomm_merge(ic, wrank % 2, &merged);
    MPI_Comm_rank(merged, &mrank);
    MPI_Comm_dup(merged, &mdup);
    MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, mdup);
    tap_ok(sum == wsize * (wsize - 1) / 2 &&
           mrank == (wrank % 2 ? wsize / 2 + wrank / 2 : wrank / 2),
           "MPI_Intercomm_merge (evens first), its MPI_Comm_dup: rank %d, "
           "MPI_Allreduce %d", mrank, sum);

    MPI_Comm_free(&mdup);
    MPI_Comm_free(&merged);
    MPI_Comm_free(&sp);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&ic);
    MPI_Comm_free(&half);
    tap_ok(ic == MPI_COMM_NULL && dup == MPI_COMM_NULL &&
           merged == MPI_COMM_NULL, "every communicator freed");
    MPI_Finalize();
    return tap_status();
}
