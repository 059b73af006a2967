/* ftw-test: np=4 mode=both timeout=60 */
/*
 * coll_blocking - blocking collectives are transparent under ftwrap.
 *
 * Asserts that each blocking collective on MPI_COMM_WORLD returns
 * MPI_SUCCESS and leaves exactly the data the MPI standard defines in the
 * receive buffers: barrier, bcast from a non-zero root (small and large),
 * reduce (int and double MPI_SUM, MPI_MAX, a non-commutative user op),
 * allreduce (plain and MPI_IN_PLACE), scan, exscan, gather, gatherv,
 * scatter, scatterv, allgather (plain and MPI_IN_PLACE), allgatherv,
 * alltoall, alltoallv, alltoallw, reduce_scatter and reduce_scatter_block.
 * Receive buffers are pre-filled with a sentinel byte, and the bytes a
 * collective must not write (gaps between displacements, slack after a
 * block, the holes of strided datatypes) are checked to keep it.  Counts
 * are uneven, include zero, and depend on the communicator size only
 * through the ranks, so nothing assumes a power-of-two size.
 */
#include "tap.h"

#define PLAN 25
#define SENTINEL 0xA5

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

/* 1 when ok holds on every rank. */
static int all_ok(int ok)
{
    int all = 0;

    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD)
        != MPI_SUCCESS)
        return 0;
    return all;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (!p) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* A buffer of n ints, every byte set to the sentinel. */
static int *sentinel_ints(size_t n)
{
    int *p = xmalloc(n * sizeof(int));

    memset(p, SENTINEL, n * sizeof(int));
    return p;
}

/* 1 when ints [from, to) of buf still hold the sentinel bytes. */
static int untouched(const int *buf, size_t from, size_t to)
{
    const unsigned char *p = (const unsigned char *)(buf + from);

    for (size_t i = 0; i < (to - from) * sizeof(int); i++)
        if (p[i] != SENTINEL)
            return 0;
    return 1;
}

/* The k-th element rank src sends to rank dst in the personalised tests. */
static int pval(int src, int dst, int k)
{
    return src * 10000 + dst * 100 + k;
}

/* Uneven per-rank counts that include zero (2, 0, 5, 3 on four ranks). */
static int vcount(int q)
{
    return (q * 5 + 2) % 7;
}

static void test_barrier(void)
{
    tap_ok(ok_rc(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"),
           "MPI_Barrier returns MPI_SUCCESS");
}

static void test_bcast(size_t len, uint64_t seed, const char *what)
{
    int root = size - 1, ok;
    unsigned char *buf = xmalloc(len);

    if (rank == root)
        tap_fill(buf, len, seed);
    else
        memset(buf, 0, len);
    ok = ok_rc(MPI_Bcast(buf, (int)len, MPI_BYTE, root, MPI_COMM_WORLD),
               "MPI_Bcast");
    ok = ok && tap_check(buf, len, seed);
    tap_ok(ok, "MPI_Bcast of %zu bytes (%s) from root %d delivers the "
           "root's bytes", len, what, root);
    free(buf);
}

static void test_reduce_int_sum(void)
{
    enum { N = 1000 };
    int root = 1 % size, ok, in[N], *out = sentinel_ints(N);

    for (int i = 0; i < N; i++)
        in[i] = rank * 1000 + i;
    ok = ok_rc(MPI_Reduce(in, out, N, MPI_INT, MPI_SUM, root,
                          MPI_COMM_WORLD), "MPI_Reduce");
    if (rank == root)
        for (int i = 0; i < N; i++)
            ok = ok && out[i] == 1000 * size * (size - 1) / 2 + size * i;
    tap_ok(ok, "MPI_Reduce MPI_SUM on MPI_INT to root %d is exact", root);
    free(out);
}

static void test_reduce_double_sum(void)
{
    enum { N = 300 };
    int root = 2 % size, ok;
    double in[N], out[N];

    /* Multiples of 1/4: every partial sum is exact in any order. */
    for (int i = 0; i < N; i++) {
        in[i] = (rank + 1) * 0.25 + i;
        out[i] = -1.0;
    }
    ok = ok_rc(MPI_Reduce(in, out, N, MPI_DOUBLE, MPI_SUM, root,
                          MPI_COMM_WORLD), "MPI_Reduce");
    if (rank == root)
        for (int i = 0; i < N; i++)
            ok = ok && out[i] == 0.25 * size * (size + 1) / 2 + (double)size * i;
    tap_ok(ok, "MPI_Reduce MPI_SUM on MPI_DOUBLE to root %d is exact", root);
}

static int max_input(int r, int i)
{
    return ((r + 1) * (i + 3) * 7919) % 1009 - 500;
}

static void test_reduce_max(void)
{
    enum { N = 257 };
    int root = 0, ok, in[N], out[N];

    for (int i = 0; i < N; i++) {
        in[i] = max_input(rank, i);
        out[i] = 0;
    }
    ok = ok_rc(MPI_Reduce(in, out, N, MPI_INT, MPI_MAX, root,
                          MPI_COMM_WORLD), "MPI_Reduce");
    if (rank == root)
        for (int i = 0; i < N; i++) {
            int m = max_input(0, i);

            for (int r = 1; r < size; r++)
                if (max_input(r, i) > m)
                    m = max_input(r, i);
            ok = ok && out[i] == m;
        }
    tap_ok(ok, "MPI_Reduce MPI_MAX on MPI_INT to root %d is exact", root);
}

/*
 * The user-defined op composes affine maps x -> a*x + b modulo 2^32.
 * Composition is associative but not commutative, so a result computed
 * in any order other than ascending rank order is detected.
 */
struct affine {
    unsigned a, b;
};

static struct affine compose(struct affine f, struct affine g)
{
    struct affine h = { f.a * g.a, f.a * g.b + f.b };

    return h;
}

static void affine_op(void *invec, void *inoutvec, int *len,
                      MPI_Datatype *type)
{
    struct affine *in = invec, *io = inoutvec;

    (void)type;
    for (int i = 0; i < *len; i++)
        io[i] = compose(in[i], io[i]);
}

static struct affine affine_input(int r, int i)
{
    struct affine f = { 2u * (unsigned)(r + i) + 3u,
                        7u * (unsigned)r + 13u * (unsigned)i + 1u };

    return f;
}

static void test_reduce_user_op(void)
{
    enum { N = 64 };
    int root = size - 1, ok, commute = -1;
    struct affine in[N], out[N];
    MPI_Datatype t = MPI_DATATYPE_NULL;
    MPI_Op op = MPI_OP_NULL;

    ok = ok_rc(MPI_Type_contiguous(2, MPI_UNSIGNED, &t), "MPI_Type_contiguous");
    ok = ok && ok_rc(MPI_Type_commit(&t), "MPI_Type_commit");
    ok = ok && ok_rc(MPI_Op_create(affine_op, 0, &op), "MPI_Op_create");
    ok = ok && ok_rc(MPI_Op_commutative(op, &commute), "MPI_Op_commutative");
    /* tap_ok's verdict is global, so every rank takes the same path. */
    ok = tap_ok(ok && commute == 0, "MPI_Op_create makes a non-commutative op "
           "that MPI_Op_commutative reports as such");

    for (int i = 0; i < N; i++) {
        in[i] = affine_input(rank, i);
        out[i].a = out[i].b = 0;
    }
    if (ok)
        ok = ok_rc(MPI_Reduce(in, out, N, t, op, root, MPI_COMM_WORLD),
                   "MPI_Reduce");
    if (rank == root)
        for (int i = 0; i < N; i++) {
            struct affine e = affine_input(0, i);

            for (int r = 1; r < size; r++)
                e = compose(e, affine_input(r, i));
            ok = ok && out[i].a == e.a && out[i].b == e.b;
        }
    tap_ok(ok, "MPI_Reduce with a non-commutative user op on a derived "
           "type to root %d combines in rank order", root);

    for (int i = 0; i < N; i++)
        out[i].a = out[i].b = 0;
    ok = op != MPI_OP_NULL
         && ok_rc(MPI_Allreduce(in, out, N, t, op, MPI_COMM_WORLD),
                  "MPI_Allreduce");
    for (int i = 0; i < N; i++) {
        struct affine e = affine_input(0, i);

        for (int r = 1; r < size; r++)
            e = compose(e, affine_input(r, i));
        ok = ok && out[i].a == e.a && out[i].b == e.b;
    }
    tap_ok(ok, "MPI_Allreduce with the user op gives every rank the "
           "rank-ordered result");

    if (op != MPI_OP_NULL)
        MPI_Op_free(&op);
    if (t != MPI_DATATYPE_NULL)
        MPI_Type_free(&t);
}

static void test_allreduce(void)
{
    enum { N = 777 };
    int ok, in[N], out[N];

    for (int i = 0; i < N; i++) {
        in[i] = rank * 1000 + i;
        out[i] = -1;
    }
    ok = ok_rc(MPI_Allreduce(in, out, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
               "MPI_Allreduce");
    for (int i = 0; i < N; i++)
        ok = ok && out[i] == 1000 * size * (size - 1) / 2 + size * i;
    tap_ok(ok, "MPI_Allreduce MPI_SUM on MPI_INT is exact on every rank");
}

static unsigned xor_input(int r, int i)
{
    return (unsigned)(r + 1) * 2654435761u ^ (unsigned)i * 40503u;
}

static void test_allreduce_in_place(void)
{
    enum { N = 100 };
    int ok;
    unsigned buf[N];

    for (int i = 0; i < N; i++)
        buf[i] = xor_input(rank, i);
    ok = ok_rc(MPI_Allreduce(MPI_IN_PLACE, buf, N, MPI_UNSIGNED, MPI_BXOR,
                             MPI_COMM_WORLD), "MPI_Allreduce");
    for (int i = 0; i < N; i++) {
        unsigned e = 0;

        for (int r = 0; r < size; r++)
            e ^= xor_input(r, i);
        ok = ok && buf[i] == e;
    }
    tap_ok(ok, "MPI_Allreduce MPI_IN_PLACE MPI_BXOR is exact on every rank");
}

static void test_scan(void)
{
    enum { N = 50 };
    int ok;
    long long in[N], out[N];

    for (int i = 0; i < N; i++) {
        in[i] = (long long)(rank + 1) * (i + 1);
        out[i] = -1;
    }
    ok = ok_rc(MPI_Scan(in, out, N, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD),
               "MPI_Scan");
    for (int i = 0; i < N; i++)
        ok = ok && out[i] == (long long)(i + 1) * (rank + 1) * (rank + 2) / 2;
    tap_ok(ok, "MPI_Scan MPI_SUM gives each rank its inclusive prefix sum");
}

static void test_exscan(void)
{
    enum { N = 50 };
    int ok, in[N], out[N];

    for (int i = 0; i < N; i++) {
        in[i] = rank * 10 + i + 1;
        out[i] = -1;
    }
    ok = ok_rc(MPI_Exscan(in, out, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
               "MPI_Exscan");
    /* Rank 0's result is undefined. */
    if (rank > 0)
        for (int i = 0; i < N; i++)
            ok = ok && out[i] == 10 * rank * (rank - 1) / 2 + rank * (i + 1);
    tap_ok(ok, "MPI_Exscan MPI_SUM gives ranks > 0 their exclusive prefix "
           "sum");
}

static void test_gather(void)
{
    enum { B = 513 };
    int root = 2 % size, ok;
    unsigned char in[B], *out = xmalloc((size_t)B * size);

    tap_fill(in, B, 100 + rank);
    memset(out, 0, (size_t)B * size);
    ok = ok_rc(MPI_Gather(in, B, MPI_BYTE, out, B, MPI_BYTE, root,
                          MPI_COMM_WORLD), "MPI_Gather");
    if (rank == root)
        for (int q = 0; q < size; q++)
            ok = ok && tap_check(out + (size_t)q * B, B, 100 + q);
    tap_ok(ok, "MPI_Gather to root %d puts each rank's block in rank order",
           root);
    free(out);
}

static void test_gatherv(void)
{
    int root = 1 % size, ok, total = 0;
    int *counts = xmalloc(sizeof(int) * size), *displs = xmalloc(sizeof(int) * size);
    int *in = xmalloc(sizeof(int) * (vcount(rank) + 1)), *out;

    /* Rank q's block lands after a gap of q + 1 untouched ints. */
    for (int q = 0; q < size; q++) {
        counts[q] = vcount(q);
        total += q + 1;
        displs[q] = total;
        total += counts[q];
    }
    total += 3;
    out = sentinel_ints(total);
    for (int k = 0; k < vcount(rank); k++)
        in[k] = pval(rank, root, k);
    ok = ok_rc(MPI_Gatherv(in, vcount(rank), MPI_INT, out, counts, displs,
                           MPI_INT, root, MPI_COMM_WORLD), "MPI_Gatherv");
    if (rank == root) {
        int at = 0;

        for (int q = 0; q < size; q++) {
            ok = ok && untouched(out, at, displs[q]);
            for (int k = 0; k < counts[q]; k++)
                ok = ok && out[displs[q] + k] == pval(q, root, k);
            at = displs[q] + counts[q];
        }
        ok = ok && untouched(out, at, total);
    }
    tap_ok(ok, "MPI_Gatherv with uneven counts places each block at its "
           "displacement and leaves the gaps untouched");
    free(counts);
    free(displs);
    free(in);
    free(out);
}

static void test_scatter(void)
{
    enum { B = 257, SLACK = 16 };
    int root = size - 1, ok;
    unsigned char *in = xmalloc((size_t)B * size), out[B + SLACK];

    if (rank == root)
        for (int q = 0; q < size; q++)
            tap_fill(in + (size_t)q * B, B, 200 + q);
    memset(out, SENTINEL, sizeof out);
    ok = ok_rc(MPI_Scatter(in, B, MPI_BYTE, out, B, MPI_BYTE, root,
                           MPI_COMM_WORLD), "MPI_Scatter");
    ok = ok && tap_check(out, B, 200 + rank);
    for (int i = B; i < B + SLACK; i++)
        ok = ok && out[i] == SENTINEL;
    tap_ok(ok, "MPI_Scatter from root %d delivers each rank its own block",
           root);
    free(in);
}

static void test_scatterv(void)
{
    int root = 0, ok, total = 0, mine = vcount(rank);
    int *counts = xmalloc(sizeof(int) * size), *displs = xmalloc(sizeof(int) * size);
    int *in, *out = sentinel_ints(mine + 4);

    /* Blocks laid out in reverse rank order with a two-int gap each. */
    for (int q = size - 1; q >= 0; q--) {
        counts[q] = vcount(q);
        total += 2;
        displs[q] = total;
        total += counts[q];
    }
    in = sentinel_ints(total);
    for (int q = 0; q < size; q++)
        for (int k = 0; k < counts[q]; k++)
            in[displs[q] + k] = pval(root, q, k);
    ok = ok_rc(MPI_Scatterv(in, counts, displs, MPI_INT, out, mine, MPI_INT,
                            root, MPI_COMM_WORLD), "MPI_Scatterv");
    for (int k = 0; k < mine; k++)
        ok = ok && out[k] == pval(root, rank, k);
    ok = ok && untouched(out, mine, mine + 4);
    tap_ok(ok, "MPI_Scatterv with uneven counts and reversed displacements "
           "delivers each rank exactly its block");
    free(counts);
    free(displs);
    free(in);
    free(out);
}

static void test_allgather(void)
{
    enum { N = 3 };
    int ok, in[N], *out = sentinel_ints((size_t)N * size);

    for (int k = 0; k < N; k++)
        in[k] = pval(rank, 0, k);
    ok = ok_rc(MPI_Allgather(in, N, MPI_INT, out, N, MPI_INT, MPI_COMM_WORLD),
               "MPI_Allgather");
    for (int q = 0; q < size; q++)
        for (int k = 0; k < N; k++)
            ok = ok && out[q * N + k] == pval(q, 0, k);
    tap_ok(ok, "MPI_Allgather gives every rank all blocks in rank order");
    free(out);
}

static void test_allgather_in_place(void)
{
    enum { N = 5 };
    int ok, *buf = sentinel_ints((size_t)N * size);

    for (int k = 0; k < N; k++)
        buf[rank * N + k] = pval(rank, 1, k);
    ok = ok_rc(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, N,
                             MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
    for (int q = 0; q < size; q++)
        for (int k = 0; k < N; k++)
            ok = ok && buf[q * N + k] == pval(q, 1, k);
    tap_ok(ok, "MPI_Allgather MPI_IN_PLACE fills in every other rank's "
           "block");
    free(buf);
}

static void test_allgatherv(void)
{
    int ok, total = 0, mine = rank + 1;
    int *counts = xmalloc(sizeof(int) * size), *displs = xmalloc(sizeof(int) * size);
    int *in = xmalloc(sizeof(int) * mine), *out;

    /* Reverse rank order, a gap of (q % 3) + 1 ints before each block. */
    for (int q = size - 1; q >= 0; q--) {
        counts[q] = q + 1;
        total += q % 3 + 1;
        displs[q] = total;
        total += counts[q];
    }
    total += 2;
    out = sentinel_ints(total);
    for (int k = 0; k < mine; k++)
        in[k] = pval(rank, 2, k);
    ok = ok_rc(MPI_Allgatherv(in, mine, MPI_INT, out, counts, displs,
                              MPI_INT, MPI_COMM_WORLD), "MPI_Allgatherv");
    {
        int at = 0;

        for (int q = size - 1; q >= 0; q--) {
            ok = ok && untouched(out, at, displs[q]);
            for (int k = 0; k < counts[q]; k++)
                ok = ok && out[displs[q] + k] == pval(q, 2, k);
            at = displs[q] + counts[q];
        }
        ok = ok && untouched(out, at, total);
    }
    tap_ok(ok, "MPI_Allgatherv with uneven counts places every block at its "
           "displacement and leaves the gaps untouched");
    free(counts);
    free(displs);
    free(in);
    free(out);
}

static void test_alltoall(void)
{
    enum { N = 4 };
    int ok, *in = xmalloc(sizeof(int) * N * size);
    int *out = sentinel_ints((size_t)N * size);

    for (int j = 0; j < size; j++)
        for (int k = 0; k < N; k++)
            in[j * N + k] = pval(rank, j, k);
    ok = ok_rc(MPI_Alltoall(in, N, MPI_INT, out, N, MPI_INT, MPI_COMM_WORLD),
               "MPI_Alltoall");
    for (int j = 0; j < size; j++)
        for (int k = 0; k < N; k++)
            ok = ok && out[j * N + k] == pval(j, rank, k);
    tap_ok(ok, "MPI_Alltoall delivers block j of rank i to block i of rank j");
    free(in);
    free(out);
}

/* Number of ints rank src sends rank dst in the v/w tests (includes 0). */
static int a2a_count(int src, int dst)
{
    return (src + 2 * dst) % 4;
}

static void test_alltoallv(void)
{
    int ok, stotal = 0, rtotal = 0;
    int *sc = xmalloc(sizeof(int) * size), *sd = xmalloc(sizeof(int) * size);
    int *rc = xmalloc(sizeof(int) * size), *rd = xmalloc(sizeof(int) * size);
    int *in, *out;

    /* Send blocks after one-int gaps; receive blocks in reverse peer order
     * after two-int gaps. */
    for (int j = 0; j < size; j++) {
        sc[j] = a2a_count(rank, j);
        stotal += 1;
        sd[j] = stotal;
        stotal += sc[j];
    }
    for (int j = size - 1; j >= 0; j--) {
        rc[j] = a2a_count(j, rank);
        rtotal += 2;
        rd[j] = rtotal;
        rtotal += rc[j];
    }
    rtotal += 1;
    in = sentinel_ints(stotal);
    out = sentinel_ints(rtotal);
    for (int j = 0; j < size; j++)
        for (int k = 0; k < sc[j]; k++)
            in[sd[j] + k] = pval(rank, j, k);
    ok = ok_rc(MPI_Alltoallv(in, sc, sd, MPI_INT, out, rc, rd, MPI_INT,
                             MPI_COMM_WORLD), "MPI_Alltoallv");
    {
        int at = 0;

        for (int j = size - 1; j >= 0; j--) {
            ok = ok && untouched(out, at, rd[j]);
            for (int k = 0; k < rc[j]; k++)
                ok = ok && out[rd[j] + k] == pval(j, rank, k);
            at = rd[j] + rc[j];
        }
        ok = ok && untouched(out, at, rtotal);
    }
    tap_ok(ok, "MPI_Alltoallv with uneven counts delivers every block at its "
           "displacement and leaves the gaps untouched");
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(in);
    free(out);
}

/*
 * Alltoallw: rank i sends rank j a2a_count(i, j) + 1 ints, as a strided
 * vector (stride 2) when j is odd and as plain MPI_INT otherwise; rank j
 * receives from an even source into a stride-3 vector and from an odd
 * source as plain MPI_INT.  Displacements are in bytes.
 */
static int w_count(int src, int dst)
{
    return a2a_count(src, dst) + 1;
}

static int w_stride(int is_send, int peer)
{
    if (is_send)
        return peer % 2 ? 2 : 1;
    return peer % 2 ? 1 : 3;
}

static void test_alltoallw(void)
{
    int ok = 1, stotal = 0, rtotal = 0;
    int *sc = xmalloc(sizeof(int) * size), *sd = xmalloc(sizeof(int) * size);
    int *rc = xmalloc(sizeof(int) * size), *rd = xmalloc(sizeof(int) * size);
    int *sidx = xmalloc(sizeof(int) * size), *ridx = xmalloc(sizeof(int) * size);
    MPI_Datatype *st = xmalloc(sizeof(MPI_Datatype) * size);
    MPI_Datatype *rt = xmalloc(sizeof(MPI_Datatype) * size);
    int *in, *out;

    for (int j = 0; j < size; j++) {
        int n = w_count(rank, j), s = w_stride(1, j);

        sidx[j] = stotal;
        sd[j] = stotal * (int)sizeof(int);
        stotal += (n - 1) * s + 1 + 1;       /* the extent plus a gap */
        if (s == 1) {
            sc[j] = n;
            st[j] = MPI_INT;
        } else {
            sc[j] = 1;
            st[j] = MPI_DATATYPE_NULL;
            ok = ok && ok_rc(MPI_Type_vector(n, 1, s, MPI_INT, &st[j]),
                             "MPI_Type_vector");
            ok = ok && ok_rc(MPI_Type_commit(&st[j]), "MPI_Type_commit");
        }
    }
    for (int j = 0; j < size; j++) {
        int n = w_count(j, rank), s = w_stride(0, j);

        rtotal += 1;                         /* a gap before each block */
        ridx[j] = rtotal;
        rd[j] = rtotal * (int)sizeof(int);
        rtotal += (n - 1) * s + 1;
        if (s == 1) {
            rc[j] = n;
            rt[j] = MPI_INT;
        } else {
            rc[j] = 1;
            rt[j] = MPI_DATATYPE_NULL;
            ok = ok && ok_rc(MPI_Type_vector(n, 1, s, MPI_INT, &rt[j]),
                             "MPI_Type_vector");
            ok = ok && ok_rc(MPI_Type_commit(&rt[j]), "MPI_Type_commit");
        }
    }
    rtotal += 1;
    in = sentinel_ints(stotal);
    out = sentinel_ints(rtotal);
    for (int j = 0; j < size; j++)
        for (int k = 0; k < w_count(rank, j); k++)
            in[sidx[j] + k * w_stride(1, j)] = pval(rank, j, k);

    /* Call only if every rank built its datatypes, so none waits alone. */
    if (all_ok(ok))
        ok = ok_rc(MPI_Alltoallw(in, sc, sd, st, out, rc, rd, rt,
                                 MPI_COMM_WORLD), "MPI_Alltoallw");
    else
        ok = 0;

    /* Expected image of the receive buffer: sentinel except the data. */
    {
        int *expect = sentinel_ints(rtotal);

        for (int j = 0; j < size; j++)
            for (int k = 0; k < w_count(j, rank); k++)
                expect[ridx[j] + k * w_stride(0, j)] = pval(j, rank, k);
        ok = ok && memcmp(expect, out, sizeof(int) * rtotal) == 0;
        free(expect);
    }
    tap_ok(ok, "MPI_Alltoallw with per-peer strided datatypes and byte "
           "displacements delivers exactly the data, holes untouched");

    for (int j = 0; j < size; j++) {
        if (st[j] != MPI_INT && st[j] != MPI_DATATYPE_NULL)
            MPI_Type_free(&st[j]);
        if (rt[j] != MPI_INT && rt[j] != MPI_DATATYPE_NULL)
            MPI_Type_free(&rt[j]);
    }
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(sidx);
    free(ridx);
    free(st);
    free(rt);
    free(in);
    free(out);
}

static void test_reduce_scatter(void)
{
    int ok, total = 0, off = 0;
    int *counts = xmalloc(sizeof(int) * size), *in, *out;

    for (int q = 0; q < size; q++) {
        counts[q] = q + 1;
        if (q < rank)
            off += counts[q];
        total += counts[q];
    }
    in = xmalloc(sizeof(int) * total);
    out = sentinel_ints(counts[rank] + 2);
    for (int i = 0; i < total; i++)
        in[i] = rank * 1000 + i;
    ok = ok_rc(MPI_Reduce_scatter(in, out, counts, MPI_INT, MPI_SUM,
                                  MPI_COMM_WORLD), "MPI_Reduce_scatter");
    for (int t = 0; t < counts[rank]; t++)
        ok = ok && out[t] == 1000 * size * (size - 1) / 2 + size * (off + t);
    ok = ok && untouched(out, counts[rank], counts[rank] + 2);
    tap_ok(ok, "MPI_Reduce_scatter with uneven counts gives each rank its "
           "segment of the sum");
    free(counts);
    free(in);
    free(out);
}

static int rsb_input(int r, int i)
{
    return (r * 31 + i * 17) % 23;
}

static void test_reduce_scatter_block(void)
{
    enum { B = 3 };
    int ok, *in = xmalloc(sizeof(int) * B * size), out[B + 2];

    for (int i = 0; i < B * size; i++)
        in[i] = rsb_input(rank, i);
    memset(out, SENTINEL, sizeof out);
    ok = ok_rc(MPI_Reduce_scatter_block(in, out, B, MPI_INT, MPI_MAX,
                                        MPI_COMM_WORLD),
               "MPI_Reduce_scatter_block");
    for (int t = 0; t < B; t++) {
        int m = rsb_input(0, rank * B + t);

        for (int r = 1; r < size; r++)
            if (rsb_input(r, rank * B + t) > m)
                m = rsb_input(r, rank * B + t);
        ok = ok && out[t] == m;
    }
    ok = ok && untouched(out, B, B + 2);
    tap_ok(ok, "MPI_Reduce_scatter_block MPI_MAX gives each rank its block "
           "of the maximum");
    free(in);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tap_plan(PLAN);

    test_barrier();
    test_bcast(1237, 11, "eager-sized");
    test_bcast(300000, 12, "rendezvous-sized");
    test_reduce_int_sum();
    test_reduce_double_sum();
    test_reduce_max();
    test_reduce_user_op();
    test_allreduce();
    test_allreduce_in_place();
    test_scan();
    test_exscan();
    test_gather();
    test_gatherv();
    test_scatter();
    test_scatterv();
    test_allgather();
    test_allgather_in_place();
    test_allgatherv();
    test_alltoall();
    test_alltoallv();
    test_alltoallw();
    test_reduce_scatter();
    test_reduce_scatter_block();
    MPI_Finalize();
    return tap_status();
}
