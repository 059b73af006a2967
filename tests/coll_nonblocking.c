/* ftw-test: np=4 mode=both timeout=60 */
/*
 * coll_nonblocking - nonblocking collectives are transparent under ftwrap.
 *
 * Asserts that every nonblocking collective on MPI_COMM_WORLD can be
 * started while all the others are still outstanding (ibarrier, ibcast,
 * ireduce, iallreduce, iscan, iexscan, igather, igatherv, iscatter,
 * iscatterv, iallgather, iallgatherv, ialltoall, ialltoallv, ialltoallw,
 * ireduce_scatter, ireduce_scatter_block), that one MPI_Waitall completes
 * them all and resets every request to MPI_REQUEST_NULL, and that each
 * then holds exactly the data the MPI standard defines, with the bytes it
 * must not write (gaps between displacements, slack, holes of strided
 * datatypes) untouched.  A further iallreduce is completed by polling
 * MPI_Test.  Counts are uneven and include zero; nothing assumes a
 * power-of-two size.
 */
#include "tap.h"

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

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (!p) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static int *ints(size_t n)
{
    return xmalloc(n * sizeof(int));
}

/* A buffer of n ints, every byte set to the sentinel. */
static int *sentinel_ints(size_t n)
{
    int *p = ints(n);

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

/* Number of ints rank src sends rank dst in the v/w tests (includes 0). */
static int a2a_count(int src, int dst)
{
    return (src + 2 * dst) % 4;
}

/*
 * Each case starts one nonblocking collective into buffers of its own and
 * later checks them.  start() returns the MPI return code; verify() frees
 * the case's buffers and returns 1 when the data are exact.
 */
struct nbc_case {
    const char *what;
    int (*start)(MPI_Request *req);
    int (*verify)(void);
};

/* --- ibarrier ----------------------------------------------------------- */

static int ibarrier_start(MPI_Request *req)
{
    return MPI_Ibarrier(MPI_COMM_WORLD, req);
}

/* Completion is all an ibarrier yields; its check is the return code. */
static int ibarrier_verify(void)
{
    return 1;
}

/* --- ibcast -------------------------------------------------------------- */

enum { BCAST_LEN = 200000 };
static unsigned char *bcast_buf;

static int ibcast_start(MPI_Request *req)
{
    int root = size - 1;

    bcast_buf = xmalloc(BCAST_LEN);
    if (rank == root)
        tap_fill(bcast_buf, BCAST_LEN, 21);
    else
        memset(bcast_buf, 0, BCAST_LEN);
    return MPI_Ibcast(bcast_buf, BCAST_LEN, MPI_BYTE, root, MPI_COMM_WORLD,
                      req);
}

static int ibcast_verify(void)
{
    int ok = tap_check(bcast_buf, BCAST_LEN, 21);

    free(bcast_buf);
    return ok;
}

/* --- ireduce (MPI_SUM on double, root 1) ------------------------------- */

enum { RED_N = 300 };
static double red_in[RED_N], red_out[RED_N];

static int ireduce_start(MPI_Request *req)
{
    /* Multiples of 1/4: every partial sum is exact in any order. */
    for (int i = 0; i < RED_N; i++) {
        red_in[i] = (rank + 1) * 0.25 + i;
        red_out[i] = -1.0;
    }
    return MPI_Ireduce(red_in, red_out, RED_N, MPI_DOUBLE, MPI_SUM, 1 % size,
                       MPI_COMM_WORLD, req);
}

static int ireduce_verify(void)
{
    int ok = 1;

    if (rank == 1 % size)
        for (int i = 0; i < RED_N; i++)
            ok = ok && red_out[i] == 0.25 * size * (size + 1) / 2
                                     + (double)size * i;
    return ok;
}

/* --- iallreduce (MPI_SUM on int) ---------------------------------------- */

enum { AR_N = 777 };
static int ar_in[AR_N], ar_out[AR_N];

static int iallreduce_start(MPI_Request *req)
{
    for (int i = 0; i < AR_N; i++) {
        ar_in[i] = rank * 1000 + i;
        ar_out[i] = -1;
    }
    return MPI_Iallreduce(ar_in, ar_out, AR_N, MPI_INT, MPI_SUM,
                          MPI_COMM_WORLD, req);
}

static int iallreduce_verify(void)
{
    int ok = 1;

    for (int i = 0; i < AR_N; i++)
        ok = ok && ar_out[i] == 1000 * size * (size - 1) / 2 + size * i;
    return ok;
}

/* --- iscan / iexscan ----------------------------------------------------- */

enum { SCAN_N = 50 };
static long long scan_in[SCAN_N], scan_out[SCAN_N];
static int exscan_in[SCAN_N], exscan_out[SCAN_N];

static int iscan_start(MPI_Request *req)
{
    for (int i = 0; i < SCAN_N; i++) {
        scan_in[i] = (long long)(rank + 1) * (i + 1);
        scan_out[i] = -1;
    }
    return MPI_Iscan(scan_in, scan_out, SCAN_N, MPI_LONG_LONG, MPI_SUM,
                     MPI_COMM_WORLD, req);
}

static int iscan_verify(void)
{
    int ok = 1;

    for (int i = 0; i < SCAN_N; i++)
        ok = ok && scan_out[i]
                   == (long long)(i + 1) * (rank + 1) * (rank + 2) / 2;
    return ok;
}

static int iexscan_start(MPI_Request *req)
{
    for (int i = 0; i < SCAN_N; i++) {
        exscan_in[i] = rank * 10 + i + 1;
        exscan_out[i] = -1;
    }
    return MPI_Iexscan(exscan_in, exscan_out, SCAN_N, MPI_INT, MPI_SUM,
                       MPI_COMM_WORLD, req);
}

static int iexscan_verify(void)
{
    int ok = 1;

    /* Rank 0's result is undefined. */
    if (rank > 0)
        for (int i = 0; i < SCAN_N; i++)
            ok = ok && exscan_out[i]
                       == 10 * rank * (rank - 1) / 2 + rank * (i + 1);
    return ok;
}

/* --- igather / igatherv -------------------------------------------------- */

enum { GATHER_B = 513 };
static unsigned char gather_in[GATHER_B], *gather_out;

static int igather_start(MPI_Request *req)
{
    tap_fill(gather_in, GATHER_B, 100 + rank);
    gather_out = xmalloc((size_t)GATHER_B * size);
    memset(gather_out, 0, (size_t)GATHER_B * size);
    return MPI_Igather(gather_in, GATHER_B, MPI_BYTE, gather_out, GATHER_B,
                       MPI_BYTE, 2 % size, MPI_COMM_WORLD, req);
}

static int igather_verify(void)
{
    int ok = 1;

    if (rank == 2 % size)
        for (int q = 0; q < size; q++)
            ok = ok && tap_check(gather_out + (size_t)q * GATHER_B, GATHER_B,
                                 100 + q);
    free(gather_out);
    return ok;
}

static int *gv_counts, *gv_displs, *gv_in, *gv_out, gv_total;

static int igatherv_start(MPI_Request *req)
{
    int root = 0;

    gv_counts = ints(size);
    gv_displs = ints(size);
    gv_in = ints(vcount(rank) + 1);
    /* Rank q's block lands after a gap of q + 1 untouched ints. */
    gv_total = 0;
    for (int q = 0; q < size; q++) {
        gv_counts[q] = vcount(q);
        gv_total += q + 1;
        gv_displs[q] = gv_total;
        gv_total += gv_counts[q];
    }
    gv_total += 3;
    gv_out = sentinel_ints(gv_total);
    for (int k = 0; k < vcount(rank); k++)
        gv_in[k] = pval(rank, root, k);
    return MPI_Igatherv(gv_in, vcount(rank), MPI_INT, gv_out, gv_counts,
                        gv_displs, MPI_INT, root, MPI_COMM_WORLD, req);
}

static int igatherv_verify(void)
{
    int ok = 1, at = 0;

    if (rank == 0) {
        for (int q = 0; q < size; q++) {
            ok = ok && untouched(gv_out, at, gv_displs[q]);
            for (int k = 0; k < gv_counts[q]; k++)
                ok = ok && gv_out[gv_displs[q] + k] == pval(q, 0, k);
            at = gv_displs[q] + gv_counts[q];
        }
        ok = ok && untouched(gv_out, at, gv_total);
    }
    free(gv_counts);
    free(gv_displs);
    free(gv_in);
    free(gv_out);
    return ok;
}

/* --- iscatter / iscatterv ------------------------------------------------ */

enum { SCATTER_B = 257, SCATTER_SLACK = 16 };
static unsigned char *scatter_in, scatter_out[SCATTER_B + SCATTER_SLACK];

static int iscatter_start(MPI_Request *req)
{
    int root = size - 1;

    scatter_in = xmalloc((size_t)SCATTER_B * size);
    if (rank == root)
        for (int q = 0; q < size; q++)
            tap_fill(scatter_in + (size_t)q * SCATTER_B, SCATTER_B, 200 + q);
    memset(scatter_out, SENTINEL, sizeof scatter_out);
    return MPI_Iscatter(scatter_in, SCATTER_B, MPI_BYTE, scatter_out,
                        SCATTER_B, MPI_BYTE, root, MPI_COMM_WORLD, req);
}

static int iscatter_verify(void)
{
    int ok = tap_check(scatter_out, SCATTER_B, 200 + rank);

    for (int i = SCATTER_B; i < SCATTER_B + SCATTER_SLACK; i++)
        ok = ok && scatter_out[i] == SENTINEL;
    free(scatter_in);
    return ok;
}

static int *sv_counts, *sv_displs, *sv_in, *sv_out;

static int iscatterv_start(MPI_Request *req)
{
    int root = 2 % size, total = 0;

    sv_counts = ints(size);
    sv_displs = ints(size);
    /* Blocks laid out in reverse rank order with a two-int gap each. */
    for (int q = size - 1; q >= 0; q--) {
        sv_counts[q] = vcount(q);
        total += 2;
        sv_displs[q] = total;
        total += sv_counts[q];
    }
    sv_in = sentinel_ints(total);
    for (int q = 0; q < size; q++)
        for (int k = 0; k < sv_counts[q]; k++)
            sv_in[sv_displs[q] + k] = pval(root, q, k);
    sv_out = sentinel_ints(vcount(rank) + 4);
    return MPI_Iscatterv(sv_in, sv_counts, sv_displs, MPI_INT, sv_out,
                         vcount(rank), MPI_INT, root, MPI_COMM_WORLD, req);
}

static int iscatterv_verify(void)
{
    int ok = 1, mine = vcount(rank);

    for (int k = 0; k < mine; k++)
        ok = ok && sv_out[k] == pval(2 % size, rank, k);
    ok = ok && untouched(sv_out, mine, mine + 4);
    free(sv_counts);
    free(sv_displs);
    free(sv_in);
    free(sv_out);
    return ok;
}

/* --- iallgather / iallgatherv ------------------------------------------- */

enum { AG_N = 3 };
static int ag_in[AG_N], *ag_out;

static int iallgather_start(MPI_Request *req)
{
    for (int k = 0; k < AG_N; k++)
        ag_in[k] = pval(rank, 0, k);
    ag_out = sentinel_ints((size_t)AG_N * size);
    return MPI_Iallgather(ag_in, AG_N, MPI_INT, ag_out, AG_N, MPI_INT,
                          MPI_COMM_WORLD, req);
}

static int iallgather_verify(void)
{
    int ok = 1;

    for (int q = 0; q < size; q++)
        for (int k = 0; k < AG_N; k++)
            ok = ok && ag_out[q * AG_N + k] == pval(q, 0, k);
    free(ag_out);
    return ok;
}

static int *agv_counts, *agv_displs, *agv_in, *agv_out, agv_total;

static int iallgatherv_start(MPI_Request *req)
{
    int mine = rank + 1;

    agv_counts = ints(size);
    agv_displs = ints(size);
    agv_in = ints(mine);
    /* Reverse rank order, a gap of (q % 3) + 1 ints before each block. */
    agv_total = 0;
    for (int q = size - 1; q >= 0; q--) {
        agv_counts[q] = q + 1;
        agv_total += q % 3 + 1;
        agv_displs[q] = agv_total;
        agv_total += agv_counts[q];
    }
    agv_total += 2;
    agv_out = sentinel_ints(agv_total);
    for (int k = 0; k < mine; k++)
        agv_in[k] = pval(rank, 2, k);
    return MPI_Iallgatherv(agv_in, mine, MPI_INT, agv_out, agv_counts,
                           agv_displs, MPI_INT, MPI_COMM_WORLD, req);
}

static int iallgatherv_verify(void)
{
    int ok = 1, at = 0;

    for (int q = size - 1; q >= 0; q--) {
        ok = ok && untouched(agv_out, at, agv_displs[q]);
        for (int k = 0; k < agv_counts[q]; k++)
            ok = ok && agv_out[agv_displs[q] + k] == pval(q, 2, k);
        at = agv_displs[q] + agv_counts[q];
    }
    ok = ok && untouched(agv_out, at, agv_total);
    free(agv_counts);
    free(agv_displs);
    free(agv_in);
    free(agv_out);
    return ok;
}

/* --- ialltoall / ialltoallv / ialltoallw -------------------------------- */

enum { A2A_N = 4 };
static int *a2a_in, *a2a_out;

static int ialltoall_start(MPI_Request *req)
{
    a2a_in = ints((size_t)A2A_N * size);
    a2a_out = sentinel_ints((size_t)A2A_N * size);
    for (int j = 0; j < size; j++)
        for (int k = 0; k < A2A_N; k++)
            a2a_in[j * A2A_N + k] = pval(rank, j, k);
    return MPI_Ialltoall(a2a_in, A2A_N, MPI_INT, a2a_out, A2A_N, MPI_INT,
                         MPI_COMM_WORLD, req);
}

static int ialltoall_verify(void)
{
    int ok = 1;

    for (int j = 0; j < size; j++)
        for (int k = 0; k < A2A_N; k++)
            ok = ok && a2a_out[j * A2A_N + k] == pval(j, rank, k);
    free(a2a_in);
    free(a2a_out);
    return ok;
}

static int *av_sc, *av_sd, *av_rc, *av_rd, *av_in, *av_out, av_rtotal;

static int ialltoallv_start(MPI_Request *req)
{
    int stotal = 0;

    av_sc = ints(size);
    av_sd = ints(size);
    av_rc = ints(size);
    av_rd = ints(size);
    /* Send blocks after one-int gaps; receive blocks in reverse peer order
     * after two-int gaps. */
    for (int j = 0; j < size; j++) {
        av_sc[j] = a2a_count(rank, j);
        stotal += 1;
        av_sd[j] = stotal;
        stotal += av_sc[j];
    }
    av_rtotal = 0;
    for (int j = size - 1; j >= 0; j--) {
        av_rc[j] = a2a_count(j, rank);
        av_rtotal += 2;
        av_rd[j] = av_rtotal;
        av_rtotal += av_rc[j];
    }
    av_rtotal += 1;
    av_in = sentinel_ints(stotal);
    av_out = sentinel_ints(av_rtotal);
    for (int j = 0; j < size; j++)
        for (int k = 0; k < av_sc[j]; k++)
            av_in[av_sd[j] + k] = pval(rank, j, k);
    return MPI_Ialltoallv(av_in, av_sc, av_sd, MPI_INT, av_out, av_rc, av_rd,
                          MPI_INT, MPI_COMM_WORLD, req);
}

static int ialltoallv_verify(void)
{
    int ok = 1, at = 0;

    for (int j = size - 1; j >= 0; j--) {
        ok = ok && untouched(av_out, at, av_rd[j]);
        for (int k = 0; k < av_rc[j]; k++)
            ok = ok && av_out[av_rd[j] + k] == pval(j, rank, k);
        at = av_rd[j] + av_rc[j];
    }
    ok = ok && untouched(av_out, at, av_rtotal);
    free(av_sc);
    free(av_sd);
    free(av_rc);
    free(av_rd);
    free(av_in);
    free(av_out);
    return ok;
}

/*
 * Ialltoallw: rank i sends rank j a2a_count(i, j) + 1 ints, as a strided
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

static int *aw_sc, *aw_sd, *aw_rc, *aw_rd, *aw_ridx, *aw_in, *aw_out;
static int aw_rtotal;
static MPI_Datatype *aw_st, *aw_rt;

/* The count and datatype for n ints at the given stride. */
static void w_type(int n, int stride, int *count, MPI_Datatype *type)
{
    if (stride == 1) {
        *count = n;
        *type = MPI_INT;
        return;
    }
    *count = 1;
    if (MPI_Type_vector(n, 1, stride, MPI_INT, type) != MPI_SUCCESS
        || MPI_Type_commit(type) != MPI_SUCCESS) {
        tap_diag("cannot build a vector datatype");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static int ialltoallw_start(MPI_Request *req)
{
    int stotal = 0;
    int *sidx = ints(size);

    aw_sc = ints(size);
    aw_sd = ints(size);
    aw_rc = ints(size);
    aw_rd = ints(size);
    aw_ridx = ints(size);
    aw_st = xmalloc(sizeof(MPI_Datatype) * size);
    aw_rt = xmalloc(sizeof(MPI_Datatype) * size);
    for (int j = 0; j < size; j++) {
        int n = w_count(rank, j), s = w_stride(1, j);

        sidx[j] = stotal;
        aw_sd[j] = stotal * (int)sizeof(int);
        stotal += (n - 1) * s + 1 + 1;       /* the extent plus a gap */
        w_type(n, s, &aw_sc[j], &aw_st[j]);
    }
    aw_rtotal = 0;
    for (int j = 0; j < size; j++) {
        int n = w_count(j, rank), s = w_stride(0, j);

        aw_rtotal += 1;                      /* a gap before each block */
        aw_ridx[j] = aw_rtotal;
        aw_rd[j] = aw_rtotal * (int)sizeof(int);
        aw_rtotal += (n - 1) * s + 1;
        w_type(n, s, &aw_rc[j], &aw_rt[j]);
    }
    aw_rtotal += 1;
    aw_in = sentinel_ints(stotal);
    aw_out = sentinel_ints(aw_rtotal);
    for (int j = 0; j < size; j++)
        for (int k = 0; k < w_count(rank, j); k++)
            aw_in[sidx[j] + k * w_stride(1, j)] = pval(rank, j, k);
    free(sidx);
    return MPI_Ialltoallw(aw_in, aw_sc, aw_sd, aw_st, aw_out, aw_rc, aw_rd,
                          aw_rt, MPI_COMM_WORLD, req);
}

static int ialltoallw_verify(void)
{
    int ok, *expect = sentinel_ints(aw_rtotal);

    /* Expected image of the receive buffer: sentinel except the data. */
    for (int j = 0; j < size; j++)
        for (int k = 0; k < w_count(j, rank); k++)
            expect[aw_ridx[j] + k * w_stride(0, j)] = pval(j, rank, k);
    ok = memcmp(expect, aw_out, sizeof(int) * aw_rtotal) == 0;
    free(expect);
    for (int j = 0; j < size; j++) {
        if (aw_st[j] != MPI_INT)
            MPI_Type_free(&aw_st[j]);
        if (aw_rt[j] != MPI_INT)
            MPI_Type_free(&aw_rt[j]);
    }
    free(aw_sc);
    free(aw_sd);
    free(aw_rc);
    free(aw_rd);
    free(aw_ridx);
    free(aw_st);
    free(aw_rt);
    free(aw_in);
    free(aw_out);
    return ok;
}

/* --- ireduce_scatter / ireduce_scatter_block ---------------------------- */

static int *rs_counts, *rs_in, *rs_out;

static int ireduce_scatter_start(MPI_Request *req)
{
    int total = 0;

    rs_counts = ints(size);
    for (int q = 0; q < size; q++) {
        rs_counts[q] = q + 1;
        total += rs_counts[q];
    }
    rs_in = ints(total);
    rs_out = sentinel_ints(rs_counts[rank] + 2);
    for (int i = 0; i < total; i++)
        rs_in[i] = rank * 1000 + i;
    return MPI_Ireduce_scatter(rs_in, rs_out, rs_counts, MPI_INT, MPI_SUM,
                               MPI_COMM_WORLD, req);
}

static int ireduce_scatter_verify(void)
{
    int ok = 1, off = 0, mine = rs_counts[rank];

    for (int q = 0; q < rank; q++)
        off += rs_counts[q];
    for (int t = 0; t < mine; t++)
        ok = ok && rs_out[t] == 1000 * size * (size - 1) / 2 + size * (off + t);
    ok = ok && untouched(rs_out, mine, mine + 2);
    free(rs_counts);
    free(rs_in);
    free(rs_out);
    return ok;
}

enum { RSB_B = 3 };
static int *rsb_in, rsb_out[RSB_B + 2];

static int rsb_input(int r, int i)
{
    return (r * 31 + i * 17) % 23;
}

static int ireduce_scatter_block_start(MPI_Request *req)
{
    rsb_in = ints((size_t)RSB_B * size);
    for (int i = 0; i < RSB_B * size; i++)
        rsb_in[i] = rsb_input(rank, i);
    memset(rsb_out, SENTINEL, sizeof rsb_out);
    return MPI_Ireduce_scatter_block(rsb_in, rsb_out, RSB_B, MPI_INT, MPI_MAX,
                                     MPI_COMM_WORLD, req);
}

static int ireduce_scatter_block_verify(void)
{
    int ok = 1;

    for (int t = 0; t < RSB_B; t++) {
        int m = rsb_input(0, rank * RSB_B + t);

        for (int r = 1; r < size; r++)
            if (rsb_input(r, rank * RSB_B + t) > m)
                m = rsb_input(r, rank * RSB_B + t);
        ok = ok && rsb_out[t] == m;
    }
    ok = ok && untouched(rsb_out, RSB_B, RSB_B + 2);
    free(rsb_in);
    return ok;
}

/* ------------------------------------------------------------------------ */

static const struct nbc_case cases[] = {
    { "MPI_Ibarrier", ibarrier_start, ibarrier_verify },
    { "MPI_Ibcast of 200000 bytes from the last rank", ibcast_start,
      ibcast_verify },
    { "MPI_Ireduce MPI_SUM on MPI_DOUBLE", ireduce_start, ireduce_verify },
    { "MPI_Iallreduce MPI_SUM on MPI_INT", iallreduce_start,
      iallreduce_verify },
    { "MPI_Iscan MPI_SUM", iscan_start, iscan_verify },
    { "MPI_Iexscan MPI_SUM", iexscan_start, iexscan_verify },
    { "MPI_Igather", igather_start, igather_verify },
    { "MPI_Igatherv with uneven counts and gaps", igatherv_start,
      igatherv_verify },
    { "MPI_Iscatter", iscatter_start, iscatter_verify },
    { "MPI_Iscatterv with uneven counts and reversed displacements",
      iscatterv_start, iscatterv_verify },
    { "MPI_Iallgather", iallgather_start, iallgather_verify },
    { "MPI_Iallgatherv with uneven counts and gaps", iallgatherv_start,
      iallgatherv_verify },
    { "MPI_Ialltoall", ialltoall_start, ialltoall_verify },
    { "MPI_Ialltoallv with uneven counts and gaps", ialltoallv_start,
      ialltoallv_verify },
    { "MPI_Ialltoallw with strided per-peer datatypes", ialltoallw_start,
      ialltoallw_verify },
    { "MPI_Ireduce_scatter with uneven counts", ireduce_scatter_start,
      ireduce_scatter_verify },
    { "MPI_Ireduce_scatter_block MPI_MAX", ireduce_scatter_block_start,
      ireduce_scatter_block_verify },
};

#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* Starts every case, completes them with one MPI_Waitall, checks each. */
static void test_all_outstanding(void)
{
    MPI_Request reqs[NCASES];
    /* A real array: MPICH's MPI_STATUSES_IGNORE trips gcc's
     * -Wstringop-overflow. */
    MPI_Status stats[NCASES];
    int started[NCASES], all_null = 1, ok;

    for (int c = 0; c < NCASES; c++) {
        reqs[c] = MPI_REQUEST_NULL;
        started[c] = ok_rc(cases[c].start(&reqs[c]), cases[c].what);
    }
    ok = ok_rc(MPI_Waitall(NCASES, reqs, stats), "MPI_Waitall");
    for (int c = 0; c < NCASES; c++)
        all_null = all_null && reqs[c] == MPI_REQUEST_NULL;
    tap_ok(ok && all_null, "MPI_Waitall completes %d outstanding nonblocking "
           "collectives and sets every request to MPI_REQUEST_NULL", NCASES);
    for (int c = 0; c < NCASES; c++) {
        int good = cases[c].verify();

        tap_ok(started[c] && ok && good, "%s, started with %d others "
               "outstanding, returns MPI_SUCCESS%s", cases[c].what,
               NCASES - 1, c == 0 ? "" : " and delivers exact data");
    }
}

/* An iallreduce completed by polling MPI_Test (bounded by 10 s). */
static void test_test_loop(void)
{
    enum { N = 1000 };
    int ok, flag = 0, polls = 0;
    long long in[N], out[N];
    MPI_Request req = MPI_REQUEST_NULL;
    double deadline;

    for (int i = 0; i < N; i++) {
        in[i] = (long long)(rank + 1) << 20 | i;
        out[i] = -1;
    }
    ok = ok_rc(MPI_Iallreduce(in, out, N, MPI_LONG_LONG, MPI_BOR,
                              MPI_COMM_WORLD, &req), "MPI_Iallreduce");
    deadline = MPI_Wtime() + 10.0;
    while (ok && !flag && MPI_Wtime() < deadline) {
        ok = ok_rc(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), "MPI_Test");
        polls++;
    }
    if (!flag)
        tap_diag("MPI_Test never reported completion after %d polls", polls);
    ok = ok && flag && req == MPI_REQUEST_NULL;
    for (int i = 0; ok && i < N; i++) {
        long long e = 0;

        for (int r = 0; r < size; r++)
            e |= (long long)(r + 1) << 20 | i;
        ok = out[i] == e;
    }
    tap_ok(ok, "MPI_Iallreduce MPI_BOR completed by an MPI_Test loop "
           "delivers exact data");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tap_plan(1 + NCASES + 1);

    test_all_outstanding();
    test_test_loop();

    MPI_Finalize();
    return tap_status();
}
