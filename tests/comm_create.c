/* ftw-test: np=4 mode=both timeout=60 */
/*
 * comm_create - communicator construction is transparent under ftwrap.
 *
 * Asserts that MPI_Comm_dup, MPI_Comm_idup, MPI_Comm_split (colour by
 * parity, keys reversing the order), MPI_Comm_split_type(SHARED),
 * MPI_Comm_create, MPI_Comm_create_group (called by members only),
 * MPI_Intercomm_create between the parity halves and MPI_Intercomm_merge,
 * MPI_Cart_create (periodic, MPI_Dims_create: 2x2 on four ranks),
 * MPI_Graph_create and MPI_Dist_graph_create_adjacent give communicators
 * of the size, rank order and topology the standard defines; that a
 * collective (and on the Cartesian ring a sendrecv, on the graphs
 * MPI_Neighbor_allgather) on each delivers exact data; that a dup compares
 * MPI_CONGRUENT to its parent; that the split comm has its parent's error
 * handler; that an MPI_Comm_dup whose attribute copy function fails
 * returns an error and MPI_COMM_NULL (the handle held garbage before),
 * with the parent still usable; and that MPI_Comm_free releases them all.
 * Expected values are computed from the ranks, so any size >= 2 works.
 */
#include "tap.h"

#define PLAN 27

static int rank, size;

/* Reports a failing MPI call on stderr; returns 1 when rc is MPI_SUCCESS. */
static int ok_rc(int rc, const char *call)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;

        MPI_Error_string(rc, msg, &len);
        tap_diag("%s returned %d: %s", call, rc, msg);
    }
    return rc == MPI_SUCCESS;
}

static int *ints(size_t n)
{
    int *p = malloc((n ? n : 1) * sizeof(int));

    if (!p) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* 1 when comm has the given size and this process the given rank in it. */
static int has_shape(MPI_Comm comm, int want_size, int want_rank)
{
    int s = -1, r = -1;

    if (comm == MPI_COMM_NULL)
        return 0;
    if (!ok_rc(MPI_Comm_size(comm, &s), "MPI_Comm_size")
        || !ok_rc(MPI_Comm_rank(comm, &r), "MPI_Comm_rank"))
        return 0;
    if (s != want_size || r != want_rank)
        tap_diag("comm has size %d rank %d, expected size %d rank %d", s, r,
                 want_size, want_rank);
    return s == want_size && r == want_rank;
}

/*
 * Allgathers world ranks over comm (an intracommunicator of n processes)
 * and checks that local rank i is world rank expect[i].
 */
static int world_ranks_are(MPI_Comm comm, int n, const int *expect)
{
    int ok, *got = ints(n);

    ok = ok_rc(MPI_Allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, comm),
               "MPI_Allgather");
    for (int i = 0; ok && i < n; i++)
        ok = got[i] == expect[i];
    free(got);
    return ok;
}

/* Sum of the world ranks of comm's members, by allreduce over comm. */
static int allreduce_sum_is(MPI_Comm comm, int expect)
{
    int sum = -1;

    return ok_rc(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, comm),
                 "MPI_Allreduce") && sum == expect;
}

/* Frees comm, if it exists, and checks the handle became MPI_COMM_NULL. */
static int free_ok(MPI_Comm *comm)
{
    if (*comm == MPI_COMM_NULL)
        return 1;
    return ok_rc(MPI_Comm_free(comm), "MPI_Comm_free") && *comm == MPI_COMM_NULL;
}

/* ---------------------------------------------------------------------- */

static void test_dup(MPI_Comm *dup)
{
    int ok, cmp = -1;

    ok = ok_rc(MPI_Comm_dup(MPI_COMM_WORLD, dup), "MPI_Comm_dup");
    ok = ok && has_shape(*dup, size, rank);
    ok = ok && ok_rc(MPI_Comm_compare(*dup, MPI_COMM_WORLD, &cmp),
                     "MPI_Comm_compare");
    tap_ok(ok && cmp == MPI_CONGRUENT, "MPI_Comm_dup keeps size and rank "
           "and compares MPI_CONGRUENT to MPI_COMM_WORLD");
    ok = *dup != MPI_COMM_NULL
         && allreduce_sum_is(*dup, size * (size - 1) / 2);
    tap_ok(ok, "MPI_Allreduce on the dup sums every world rank");
}

static int copy_fails(MPI_Comm oldcomm, int keyval, void *extra,
                      void *in, void *out, int *flag)
{
    (void)oldcomm; (void)keyval; (void)extra; (void)in; (void)out;
    *flag = 0;
    return MPI_ERR_OTHER;
}

/* A dup whose attribute copy function fails makes no communicator. */
static void test_dup_copy_fails(void)
{
    MPI_Comm parent = MPI_COMM_NULL, d;
    int key = MPI_KEYVAL_INVALID, rc, ok;

    memset(&d, 0x5a, sizeof(d));
    MPI_Comm_dup(MPI_COMM_WORLD, &parent);
    MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
    MPI_Comm_create_keyval(copy_fails, MPI_COMM_NULL_DELETE_FN, &key, NULL);
    MPI_Comm_set_attr(parent, key, &key);
    rc = MPI_Comm_dup(parent, &d);
    ok = rc != MPI_SUCCESS && d == MPI_COMM_NULL;
    MPI_Comm_delete_attr(parent, key);
    MPI_Comm_free_keyval(&key);
    tap_ok(ok && allreduce_sum_is(parent, size * (size - 1) / 2),
           "MPI_Comm_dup whose attribute copy function fails returns an "
           "error and MPI_COMM_NULL; the parent still works");
    MPI_Comm_free(&parent);
}

static void test_idup(MPI_Comm *dup)
{
    int ok, cmp = -1, val = rank == size - 1 ? 4242 : -1;
    MPI_Request req = MPI_REQUEST_NULL;

    ok = ok_rc(MPI_Comm_idup(MPI_COMM_WORLD, dup, &req), "MPI_Comm_idup");
    ok = ok && ok_rc(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait");
    ok = ok && has_shape(*dup, size, rank);
    ok = ok && ok_rc(MPI_Comm_compare(*dup, MPI_COMM_WORLD, &cmp),
                     "MPI_Comm_compare");
    tap_ok(ok && cmp == MPI_CONGRUENT, "MPI_Comm_idup completed by MPI_Wait "
           "keeps size and rank and compares MPI_CONGRUENT");
    ok = *dup != MPI_COMM_NULL
         && ok_rc(MPI_Bcast(&val, 1, MPI_INT, size - 1, *dup), "MPI_Bcast")
         && val == 4242;
    tap_ok(ok, "MPI_Bcast on the idup from the last rank delivers its value");
}

/* World ranks of one parity, highest first (the split's rank order). */
static int parity_members(int parity, int *out)
{
    int n = 0;

    for (int q = size - 1; q >= 0; q--)
        if (q % 2 == parity)
            out[n++] = q;
    return n;
}

/* Position of world rank r in the list. */
static int index_of(const int *list, int n, int r)
{
    for (int i = 0; i < n; i++)
        if (list[i] == r)
            return i;
    return -1;
}

static void test_split(MPI_Comm *half)
{
    int ok, *members = ints(size), n = parity_members(rank % 2, members);

    ok = ok_rc(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, half),
               "MPI_Comm_split");
    ok = ok && has_shape(*half, n, index_of(members, n, rank));
    tap_ok(ok, "MPI_Comm_split by parity with reversing keys gives the "
           "expected size and reversed rank");
    ok = *half != MPI_COMM_NULL && world_ranks_are(*half, n, members);
    tap_ok(ok, "MPI_Allgather on the split comm lists its world ranks in "
           "descending order");
    {
        MPI_Errhandler eh = MPI_ERRHANDLER_NULL;

        ok = *half != MPI_COMM_NULL &&
             MPI_Comm_get_errhandler(*half, &eh) == MPI_SUCCESS &&
             eh == MPI_ERRORS_RETURN;
        if (eh != MPI_ERRHANDLER_NULL)
            MPI_Errhandler_free(&eh);
        tap_ok(ok, "the split comm has its parent's error handler "
               "(MPI_ERRORS_RETURN)");
    }
    free(members);
}

static void test_split_type(MPI_Comm *node)
{
    char name[MPI_MAX_PROCESSOR_NAME], *all;
    int ok, len = 0, n = 0, *members = ints(size), myidx = -1;

    /* Processes sharing memory are those on the same host; count them. */
    memset(name, 0, sizeof name);
    MPI_Get_processor_name(name, &len);
    all = malloc((size_t)size * MPI_MAX_PROCESSOR_NAME);
    ok = all && ok_rc(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                                    all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                                    MPI_COMM_WORLD), "MPI_Allgather");
    for (int q = 0; ok && q < size; q++)
        if (strcmp(all + (size_t)q * MPI_MAX_PROCESSOR_NAME, name) == 0) {
            if (q == rank)
                myidx = n;
            members[n++] = q;
        }
    free(all);

    ok = ok_rc(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                                   MPI_INFO_NULL, node),
               "MPI_Comm_split_type") && ok;
    ok = ok && has_shape(*node, n, myidx);
    tap_ok(ok, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) groups the %d "
           "processes on this host in world-rank order", n);
    ok = *node != MPI_COMM_NULL && world_ranks_are(*node, n, members);
    tap_ok(ok, "MPI_Allgather on the shared-memory comm lists its world "
           "ranks");
    free(members);
}

/* MPI_Comm_create on the group of all ranks but 0, in reverse order. */
static void test_create(MPI_Comm *sub)
{
    int ok, n = size - 1, *members = ints(size);
    MPI_Group world, group = MPI_GROUP_NULL;

    for (int i = 0; i < n; i++)
        members[i] = size - 1 - i;
    ok = ok_rc(MPI_Comm_group(MPI_COMM_WORLD, &world), "MPI_Comm_group");
    ok = ok && ok_rc(MPI_Group_incl(world, n, members, &group),
                     "MPI_Group_incl");
    ok = ok && ok_rc(MPI_Comm_create(MPI_COMM_WORLD, group, sub),
                     "MPI_Comm_create");
    if (rank == 0)
        ok = ok && *sub == MPI_COMM_NULL;
    else
        ok = ok && has_shape(*sub, n, size - 1 - rank);
    tap_ok(ok, "MPI_Comm_create gives members a comm in group order and "
           "rank 0, left out, MPI_COMM_NULL");
    ok = rank == 0 || (*sub != MPI_COMM_NULL
                       && world_ranks_are(*sub, n, members));
    tap_ok(ok, "MPI_Allgather on the MPI_Comm_create comm lists its members "
           "in group order");
    if (group != MPI_GROUP_NULL)
        MPI_Group_free(&group);
    MPI_Group_free(&world);
    free(members);
}

/* MPI_Comm_create_group on the even ranks; odd ranks do not call it. */
static void test_create_group(MPI_Comm *evens)
{
    int ok = 1, n = 0, *members = ints(size);
    MPI_Group world, group = MPI_GROUP_NULL;

    for (int q = 0; q < size; q += 2)
        members[n++] = q;
    if (rank % 2 == 0) {
        ok = ok_rc(MPI_Comm_group(MPI_COMM_WORLD, &world), "MPI_Comm_group");
        ok = ok && ok_rc(MPI_Group_incl(world, n, members, &group),
                         "MPI_Group_incl");
        ok = ok && ok_rc(MPI_Comm_create_group(MPI_COMM_WORLD, group, 31,
                                               evens),
                         "MPI_Comm_create_group");
        ok = ok && has_shape(*evens, n, rank / 2);
        if (group != MPI_GROUP_NULL)
            MPI_Group_free(&group);
        MPI_Group_free(&world);
    }
    tap_ok(ok, "MPI_Comm_create_group called by the %d even ranks only gives "
           "them a comm of that size", n);
    ok = rank % 2 == 1 || (*evens != MPI_COMM_NULL
                           && world_ranks_are(*evens, n, members));
    tap_ok(ok, "MPI_Allgather on the MPI_Comm_create_group comm lists the "
           "even ranks in order");
    free(members);
}

/*
 * MPI_Intercomm_create between the parity halves of MPI_Comm_split (whose
 * local leader, local rank 0, is the highest rank of each parity), then
 * MPI_Intercomm_merge with the odd half high.
 */
static void test_intercomm(MPI_Comm half, MPI_Comm *inter, MPI_Comm *merged)
{
    int ok, flag = 0, rsize = -1, mine = rank % 2, other = 1 - mine;
    int *local = ints(size), *remote = ints(size), *order = ints(size);
    int nl = parity_members(mine, local), nr = parity_members(other, remote);
    int rsum = 0, got = -1, m = 0;

    for (int i = 0; i < nr; i++)
        rsum += remote[i];
    ok = half != MPI_COMM_NULL
         && ok_rc(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, remote[0], 55,
                                       inter), "MPI_Intercomm_create");
    ok = ok && ok_rc(MPI_Comm_test_inter(*inter, &flag), "MPI_Comm_test_inter");
    ok = ok && flag && has_shape(*inter, nl, index_of(local, nl, rank));
    ok = ok && ok_rc(MPI_Comm_remote_size(*inter, &rsize),
                     "MPI_Comm_remote_size");
    tap_ok(ok && rsize == nr, "MPI_Intercomm_create between the parity "
           "halves gives an intercomm with the right local and remote sizes");

    /* On an intercommunicator each group receives the remote group's sum. */
    ok = *inter != MPI_COMM_NULL
         && ok_rc(MPI_Allreduce(&rank, &got, 1, MPI_INT, MPI_SUM, *inter),
                  "MPI_Allreduce") && got == rsum;
    tap_ok(ok, "MPI_Allreduce on the intercomm gives each half the sum of "
           "the other half's ranks");

    /* Merged order: the low (even) group first, each in its local order. */
    m += parity_members(0, order);
    parity_members(1, order + m);
    ok = *inter != MPI_COMM_NULL
         && ok_rc(MPI_Intercomm_merge(*inter, mine == 1, merged),
                  "MPI_Intercomm_merge");
    ok = ok && ok_rc(MPI_Comm_test_inter(*merged, &flag), "MPI_Comm_test_inter")
         && !flag;
    ok = ok && has_shape(*merged, size, index_of(order, size, rank));
    tap_ok(ok, "MPI_Intercomm_merge with the odd half high gives an "
           "intracomm of all ranks, even half first");
    ok = *merged != MPI_COMM_NULL && world_ranks_are(*merged, size, order);
    tap_ok(ok, "MPI_Allgather on the merged comm lists the ranks in merged "
           "order");
    free(local);
    free(remote);
    free(order);
}

/* Periodic 2-D grid from MPI_Dims_create (2x2 on four ranks), reorder 0. */
static void test_cart(MPI_Comm *cart)
{
    int dims[2] = { 0, 0 }, periods[2] = { 1, 1 }, coords[2] = { -1, -1 };
    int ok, topo = -1, c[2];

    ok = ok_rc(MPI_Dims_create(size, 2, dims), "MPI_Dims_create");
    ok = ok && ok_rc(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0,
                                     cart), "MPI_Cart_create");
    ok = ok && has_shape(*cart, size, rank);
    ok = ok && ok_rc(MPI_Topo_test(*cart, &topo), "MPI_Topo_test")
         && topo == MPI_CART;
    ok = ok && ok_rc(MPI_Cart_coords(*cart, rank, 2, coords),
                     "MPI_Cart_coords");
    /* Row-major numbering: rank = c0 * dims[1] + c1. */
    c[0] = rank / (dims[1] ? dims[1] : 1);
    c[1] = rank % (dims[1] ? dims[1] : 1);
    tap_ok(ok && coords[0] == c[0] && coords[1] == c[1],
           "MPI_Cart_create makes a %dx%d MPI_CART comm with row-major "
           "MPI_Cart_coords", dims[0], dims[1]);

    /* Shift by +1 along each dimension, wrapping around. */
    {
        int good = ok, src[2], dst[2], in[2] = { -1, -1 };

        for (int d = 0; good && d < 2; d++) {
            int lo[2] = { c[0], c[1] }, hi[2] = { c[0], c[1] }, esrc, edst;

            lo[d] = (c[d] - 1 + dims[d]) % dims[d];
            hi[d] = (c[d] + 1) % dims[d];
            esrc = lo[0] * dims[1] + lo[1];
            edst = hi[0] * dims[1] + hi[1];
            good = ok_rc(MPI_Cart_shift(*cart, d, 1, &src[d], &dst[d]),
                         "MPI_Cart_shift")
                   && src[d] == esrc && dst[d] == edst;
        }
        tap_ok(good, "MPI_Cart_shift by +1 names the periodic neighbours "
               "along both dimensions");

        /* Pass the world rank one step along each ring. */
        for (int d = 0; good && d < 2; d++)
            good = ok_rc(MPI_Sendrecv(&rank, 1, MPI_INT, dst[d], 60 + d,
                                      &in[d], 1, MPI_INT, src[d], 60 + d,
                                      *cart, MPI_STATUS_IGNORE),
                         "MPI_Sendrecv") && in[d] == src[d];
        tap_ok(good, "MPI_Sendrecv along each periodic ring receives the "
               "shift source's rank");
    }
    ok = *cart != MPI_COMM_NULL
         && allreduce_sum_is(*cart, size * (size - 1) / 2);
    tap_ok(ok, "MPI_Allreduce on the Cartesian comm sums every rank");
}

/* Bidirectional ring as an MPI_Graph: neighbours rank+1 then rank-1. */
static void test_graph(MPI_Comm *graph)
{
    int ok, topo = -1, nn = -1, nb[2] = { -1, -1 }, got[2] = { -1, -1 };
    int *index = ints(size), *edges = ints(2 * (size_t)size);
    int right = (rank + 1) % size, left = (rank - 1 + size) % size;

    for (int q = 0; q < size; q++) {
        index[q] = 2 * (q + 1);
        edges[2 * q] = (q + 1) % size;
        edges[2 * q + 1] = (q - 1 + size) % size;
    }
    ok = ok_rc(MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, graph),
               "MPI_Graph_create");
    ok = ok && has_shape(*graph, size, rank);
    ok = ok && ok_rc(MPI_Topo_test(*graph, &topo), "MPI_Topo_test")
         && topo == MPI_GRAPH;
    ok = ok && ok_rc(MPI_Graph_neighbors_count(*graph, rank, &nn),
                     "MPI_Graph_neighbors_count") && nn == 2;
    ok = ok && ok_rc(MPI_Graph_neighbors(*graph, rank, 2, nb),
                     "MPI_Graph_neighbors")
         && nb[0] == right && nb[1] == left;
    tap_ok(ok, "MPI_Graph_create makes an MPI_GRAPH ring whose neighbours "
           "are rank+1 and rank-1");

    ok = *graph != MPI_COMM_NULL
         && ok_rc(MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT,
                                         *graph), "MPI_Neighbor_allgather")
         && got[0] == right && got[1] == left;
    tap_ok(ok, "MPI_Neighbor_allgather on the graph comm receives each "
           "neighbour's rank in neighbour order");
    free(index);
    free(edges);
}

/*
 * MPI_UNWEIGHTED is a sentinel address that gcc 12 takes for a zero-size
 * array and warns about; the warnings are wrong for it, so they are
 * silenced for this function only.
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overread"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

/*
 * Directed distributed graph: rank i sends to i+1 and i+2 and receives
 * from i-1 and i-2 (mod size), so in- and out-neighbours differ.
 */
static void test_dist_graph(MPI_Comm *dg)
{
    int src[2] = { (rank - 1 + size) % size, (rank - 2 + 2 * size) % size };
    int dst[2] = { (rank + 1) % size, (rank + 2) % size };
    int ok, topo = -1, indeg = -1, outdeg = -1, weighted = -1;
    int gs[2] = { -1, -1 }, gd[2] = { -1, -1 }, out[2], in[4];

    ok = ok_rc(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, src,
                                              MPI_UNWEIGHTED, 2, dst,
                                              MPI_UNWEIGHTED, MPI_INFO_NULL,
                                              0, dg),
               "MPI_Dist_graph_create_adjacent");
    ok = ok && has_shape(*dg, size, rank);
    ok = ok && ok_rc(MPI_Topo_test(*dg, &topo), "MPI_Topo_test")
         && topo == MPI_DIST_GRAPH;
    ok = ok && ok_rc(MPI_Dist_graph_neighbors_count(*dg, &indeg, &outdeg,
                                                    &weighted),
                     "MPI_Dist_graph_neighbors_count")
         && indeg == 2 && outdeg == 2 && !weighted;
    ok = ok && ok_rc(MPI_Dist_graph_neighbors(*dg, 2, gs, MPI_UNWEIGHTED, 2,
                                              gd, MPI_UNWEIGHTED),
                     "MPI_Dist_graph_neighbors")
         && gs[0] == src[0] && gs[1] == src[1]
         && gd[0] == dst[0] && gd[1] == dst[1];
    tap_ok(ok, "MPI_Dist_graph_create_adjacent makes an unweighted "
           "MPI_DIST_GRAPH with the given in- and out-neighbours");

    out[0] = rank * 10 + 1;
    out[1] = rank * 10 + 2;
    for (int i = 0; i < 4; i++)
        in[i] = -1;
    ok = *dg != MPI_COMM_NULL
         && ok_rc(MPI_Neighbor_allgather(out, 2, MPI_INT, in, 2, MPI_INT, *dg),
                  "MPI_Neighbor_allgather");
    for (int k = 0; ok && k < 2; k++)
        ok = in[2 * k] == src[k] * 10 + 1 && in[2 * k + 1] == src[k] * 10 + 2;
    tap_ok(ok, "MPI_Neighbor_allgather on the distributed graph receives "
           "each in-neighbour's block in order");
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

int main(int argc, char **argv)
{
    MPI_Comm dup = MPI_COMM_NULL, idup = MPI_COMM_NULL, half = MPI_COMM_NULL;
    MPI_Comm node = MPI_COMM_NULL, sub = MPI_COMM_NULL;
    MPI_Comm evens = MPI_COMM_NULL, inter = MPI_COMM_NULL;
    MPI_Comm merged = MPI_COMM_NULL, cart = MPI_COMM_NULL;
    MPI_Comm graph = MPI_COMM_NULL, dg = MPI_COMM_NULL;
    int ok = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        if (rank == 0)
            printf("1..0 # SKIP needs at least 2 processes\n");
        MPI_Finalize();
        return 0;
    }
    tap_plan(PLAN);

    test_dup(&dup);
    test_dup_copy_fails();
    test_idup(&idup);
    test_split(&half);
    test_split_type(&node);
    test_create(&sub);
    test_create_group(&evens);
    test_intercomm(half, &inter, &merged);
    test_cart(&cart);
    test_graph(&graph);
    test_dist_graph(&dg);

    ok = free_ok(&dup) && ok;
    ok = free_ok(&idup) && ok;
    ok = free_ok(&half) && ok;
    ok = free_ok(&node) && ok;
    ok = free_ok(&sub) && ok;
    ok = free_ok(&evens) && ok;
    ok = free_ok(&inter) && ok;
    ok = free_ok(&merged) && ok;
    ok = free_ok(&cart) && ok;
    ok = free_ok(&graph) && ok;
    ok = free_ok(&dg) && ok;
    tap_ok(ok, "MPI_Comm_free releases every communicator and sets its "
           "handle to MPI_COMM_NULL");

    MPI_Finalize();
    return tap_status();
}
