/* The rendezvous inside point-to-point calls: posting and finishing. */
#include "rndv/p2p_rndv.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "core/comm.h"
#include "rndv/stash.h"
#include "util/log.h"
#include "util/stats.h"
#include "xport/xport.h"

/*
 * The state of a rendezvous-capable receive, which decides who finishes
 * it (reads its header, pulls, sends the FIN) exactly once:
 *
 *   IDLE --post/start--> POSTED --claim--> CLAIMED --> FINISHED --> IDLE
 *                                  (owner's completion: CLAIMED --> IDLE)
 *
 * The claim is a compare-and-swap from POSTED.  The progress of any
 * thread claims a posted receive whose native request completed
 * (early_claim, under the request table's lock, which every native
 * completion of a recorded request also holds) and pulls outside that
 * lock; the owner's completion (ftw_rndv_finish) claims it itself, or,
 * finding it CLAIMED, waits for FINISHED and takes the outcome kept
 * there.  Whatever frees the state waits while it is CLAIMED
 * (ftw_rndv_owned_free).  With one thread the same transitions are plain
 * loads and stores.
 */
enum { RS_IDLE, RS_POSTED, RS_CLAIMED, RS_FINISHED };

/* What a rendezvous-capable receive owns (ftw_reqinfo_t.owned): its
 * state, the outcome of a completion finished early, shared by every
 * copy of the request's info, and the scratch header. */
typedef struct {
    _Atomic int32_t state;  /* RS_*; FINISHED: code and got hold */
    int32_t code;
    int32_t replay;         /* FTW_RNDV_REPLAY: source and tag to report */
    int32_t rsrc, rtag;
    int32_t tag;            /* a persistent receive's tag */
    MPI_Count got;          /* bytes the status reports */
    int32_t split;          /* RSCRATCH with the rest in the buffer */
    uint64_t span_id;       /* listed (see spans), or 0 */
    char scratch[FTW_RTS_SIZE];
} rstate_t;

_Static_assert(sizeof(rstate_t) <= FTW_REQ_BLOCK,
               "a receive's state fits a request block");

/* A receive's state, from the request blocks (no allocation on a window
 * of receives posted again and again); NULL if out of memory. */
static rstate_t *rs_new(void)
{
    rstate_t *rs = ftw_req_block_get();

    if (rs != NULL)
        memset(rs, 0, offsetof(rstate_t, scratch));
    return rs;
}

/* Release what a receive of this file owned (the MPI is done with it). */
static void rs_free(const ftw_reqinfo_t *info)
{
    if (info->pooled)
        ftw_req_block_put(info->owned);
    else
        free(info->owned);
}

/* A completed receive's byte count and cancel flag, read from the status
 * itself where the MPI's layout is known (every receive's completion reads
 * them while the rendezvous is on). */
static inline MPI_Count status_bytes(const MPI_Status *st)
{
#if defined(OPEN_MPI)
    return (MPI_Count)st->_ucount;
#elif defined(MPICH)
    return (MPI_Count)(unsigned)st->count_lo |
           ((MPI_Count)(st->count_hi_and_cancelled >> 1) <<
            (8 * sizeof(int)));
#else
    MPI_Count n = 0;

    PMPI_Get_elements_x(st, MPI_BYTE, &n);
    return n;
#endif
}

static inline int status_cancelled(const MPI_Status *st)
{
#if defined(OPEN_MPI)
    return st->_cancelled != 0;
#elif defined(MPICH)
    return st->count_hi_and_cancelled & 1;
#else
    int cancelled = 0;

    PMPI_Test_cancelled(st, &cancelled);
    return cancelled;
#endif
}

/* ftw_rndv_contig through a per-thread cache of the last type asked (a
 * receive's completion asks it of every message it copies or checks);
 * MPI_Type_free moves ftw_type_gen, as for sizes. */
static FTW_TLS MPI_Datatype contig_dt;
static FTW_TLS unsigned contig_gen;
static FTW_TLS int contig_one, contig_many;     /* count 1; any count */
static FTW_TLS MPI_Aint contig_lb;

static inline int contig(MPI_Count count, MPI_Datatype dt, MPI_Aint *lb_p)
{
    unsigned gen = atomic_load_explicit(&ftw_type_gen, memory_order_relaxed);

    if (ftw_unlikely(contig_dt != dt || contig_gen != gen)) {
        MPI_Aint lb = 0;

        contig_many = ftw_rndv_contig(2, dt, &lb);
        contig_one = contig_many || ftw_rndv_contig(1, dt, &lb);
        contig_lb = lb;
        contig_dt = dt;
        contig_gen = gen;
    }
    if (!(count > 1 ? contig_many : contig_one))
        return 0;
    *lb_p = contig_lb;
    return 1;
}

/*
 * Pending receives into the user's buffers, by byte range.  Programs post
 * windows of receives into one buffer (a bandwidth loop reuses it), and
 * the MPI may complete several before ftwrap reads the first one's
 * header: a later message would overwrite an RTS not read yet.  So:
 *   - a receive posted into the buffer (FTW_RNDV_RUSER, contiguous) is
 *     listed with its head, the FTW_RTS_SIZE bytes where its RTS lands;
 *   - a receive whose bytes would cover a listed head is split: its first
 *     FTW_RTS_SIZE bytes go to scratch, the rest to the buffer (listed
 *     too, without a head);
 *   - before ftwrap itself writes into a buffer (a pull, a copy from
 *     scratch), the RTS lying in a listed head it covers is rescued into
 *     the list, where that receive's finish reads it (heads_rescue).
 * A receive whose tail would cover a head (receives overlapping at other
 * offsets) or whose type is not contiguous keeps the buffer: overlapping
 * pending receives are erroneous in MPI, and the common case, one buffer
 * reused, is what is made safe.  Entries are named by a sequence number,
 * not by the rstate_t (freed in several places): one left by a receive
 * freed unfinished only makes later receives into that range split.
 */
#define SPANS_MAX 4096

static struct span {
    const char *lo, *hi;
    uint64_t id;
    int head;               /* an RTS may land at lo */
    int rescued;            /* hdr holds the RTS found there */
    ftw_rts_t hdr;
} *spans;
static int nspans, spans_cap;
static uint64_t spans_seq;
static pthread_mutex_t spans_lock = PTHREAD_MUTEX_INITIALIZER;

static inline int32_t rs_state(const rstate_t *rs)
{
    return atomic_load_explicit(&((rstate_t *)rs)->state,
                                memory_order_acquire);
}

static inline void rs_set(rstate_t *rs, int32_t state)
{
    atomic_store_explicit(&rs->state, state, memory_order_release);
}

/* Claim rs for finishing: POSTED -> CLAIMED; the state found. */
static inline int32_t rs_claim(rstate_t *rs)
{
    int32_t old = RS_POSTED;

    if (ftw_likely(!ftw_threaded)) {
        old = atomic_load_explicit(&rs->state, memory_order_relaxed);
        if (old == RS_POSTED)
            atomic_store_explicit(&rs->state, RS_CLAIMED,
                                  memory_order_relaxed);
        return old;
    }
    atomic_compare_exchange_strong_explicit(&rs->state, &old, RS_CLAIMED,
                                            memory_order_acq_rel,
                                            memory_order_acquire);
    return old;
}

/* Wait while another thread finishes rs (its pull is bounded: it ends
 * when the data is in or the sender failed); serve this process's own
 * shm receivers meanwhile. */
static void rs_settle(const rstate_t *rs)
{
    unsigned spins = 0;

    while (rs_state(rs) == RS_CLAIMED) {
        ftw_xport_progress();
        if ((++spins & 63) == 0)
            sched_yield();
    }
}

/* List [lo, hi) for rs (spans_lock held). */
static void span_add_locked(rstate_t *rs, const char *lo, const char *hi,
                            int head)
{
    if (nspans == spans_cap && spans_cap < SPANS_MAX) {
        int cap = spans_cap ? 2 * spans_cap : 16;
        struct span *n = realloc(spans, sizeof(*n) * (size_t)cap);

        if (n != NULL) {
            spans = n;
            spans_cap = cap;
        }
    }
    if (nspans < spans_cap) {
        spans[nspans] = (struct span){ .lo = lo, .hi = hi, .head = head,
                                       .id = ++spans_seq };
        rs->span_id = spans[nspans].id;
        __atomic_store_n(&nspans, nspans + 1, __ATOMIC_RELAXED);
    }
}

static struct span *span_find_locked(uint64_t id)
{
    for (int i = 0; i < nspans; i++)
        if (spans[i].id == id)
            return &spans[i];
    return NULL;
}

static void span_drop(rstate_t *rs)
{
    struct span *e;

    if (rs == NULL || rs->span_id == 0)
        return;
    ftw_mt_lock(&spans_lock);
    if ((e = span_find_locked(rs->span_id)) != NULL) {
        *e = spans[nspans - 1];
        __atomic_store_n(&nspans, nspans - 1, __ATOMIC_RELAXED);
    }
    rs->span_id = 0;
    ftw_mt_unlock(&spans_lock);
}

/* Does [lo, hi) overlap a listed range (heads_only: a listed head)?
 * spans_lock held. */
static int spans_overlap_locked(const char *lo, const char *hi,
                                int heads_only)
{
    int found = 0;

    if (lo >= hi)
        return 0;
    for (int i = 0; i < nspans && !found; i++) {
        const struct span *e = &spans[i];

        if (heads_only)
            found = e->head && e->lo < hi && lo < e->lo + FTW_RTS_SIZE;
        else
            found = e->lo < hi && lo < e->hi;
    }
    return found;
}

static int spans_overlap(const char *lo, const char *hi, int heads_only)
{
    int found;

    if (__atomic_load_n(&nspans, __ATOMIC_RELAXED) == 0 || lo >= hi)
        return 0;
    ftw_mt_lock(&spans_lock);
    found = spans_overlap_locked(lo, hi, heads_only);
    ftw_mt_unlock(&spans_lock);
    return found;
}

/* Place a receive into [lo, hi) among the listed ones, in one section
 * (threads posting into one buffer at once see each other's heads):
 * 1 listed with its head, 2 listed without (split: its head goes to
 * scratch), 0 not listed. */
static int span_place(rstate_t *rs, const char *lo, const char *hi)
{
    int how = 0;

    ftw_mt_lock(&spans_lock);
    /* Threads: not over any listed range either, which another thread
     * may be pulling into right now (a head there could be overwritten
     * by a write that began before it was listed). */
    if (!spans_overlap_locked(lo, hi, !ftw_threaded)) {
        span_add_locked(rs, lo, hi, 1);
        how = 1;
    } else if (hi - lo > FTW_RTS_SIZE &&
               !spans_overlap_locked(lo + FTW_RTS_SIZE, hi, 1)) {
        span_add_locked(rs, lo, hi, 0);
        how = 2;
    }
    ftw_mt_unlock(&spans_lock);
    return how;
}

/* The bytes count dt at buf may write: [*lo, *hi). */
static void write_span(const void *buf, MPI_Count count, MPI_Datatype dt,
                       const char **lo, const char **hi)
{
    MPI_Count tlb = 0, textent = 0, lb = 0, extent = 0;

    PMPI_Type_get_true_extent_x(dt, &tlb, &textent);
    PMPI_Type_get_extent_x(dt, &lb, &extent);
    *lo = (const char *)buf + tlb;
    *hi = count > 0 ? *lo + (count - 1) * extent + textent : *lo;
    if (*hi < *lo) {        /* negative strides: the whole range */
        const char *t = *lo;

        *lo = *hi;
        *hi = t;
    }
}

/* Keep the RTS lying in each listed head (but self's) that [lo, hi)
 * covers; the number of such heads that hold none yet (spans_lock
 * held). */
static int heads_rescue_locked(uint64_t self, const char *lo, const char *hi)
{
    int pending = 0;

    for (int i = 0; i < nspans; i++) {
        struct span *e = &spans[i];

        if (!e->head || e->rescued || e->id == self || e->lo >= hi ||
            lo >= e->lo + FTW_RTS_SIZE)
            continue;
        if (!ftw_rndv_is_rts(e->lo, FTW_RTS_SIZE)) {
            pending++;
            continue;
        }
        memcpy(&e->hdr, e->lo, sizeof(e->hdr));
        e->rescued = 1;
    }
    return pending;
}

/* ftwrap is about to write into the buffer of receive info (a pull, a
 * copy from scratch): keep the RTS of every other listed receive whose
 * head that covers.  Returns the number of covered heads with no RTS
 * yet: with one thread the MPI writes none while ftwrap writes, but
 * another thread's progress may let the MPI write one at any moment
 * (copy_around_heads). */
static int heads_rescue(const ftw_reqinfo_t *info)
{
    const rstate_t *rs = info->owned;
    uint64_t self = rs != NULL ? rs->span_id : 0;
    const char *lo, *hi;
    int pending;

    if (__atomic_load_n(&nspans, __ATOMIC_RELAXED) == 0)
        return 0;
    write_span(info->buf, info->count, info->dt, &lo, &hi);
    ftw_mt_lock(&spans_lock);
    pending = heads_rescue_locked(self, lo, hi);
    ftw_mt_unlock(&spans_lock);
    return pending;
}

/* Threads: copy n bytes from src to dst, a receive's contiguous bytes
 * (its span self), except the heads of other pending listed receives
 * that hold no RTS yet: the MPI may write one there while this copy runs,
 * and such receives write the whole range themselves when they finish.
 * Heads holding an RTS now are kept first.  Under spans_lock, so that a
 * receive reading its head (head_read) sees it before or after. */
static void copy_around_heads(uint64_t self, char *dst, const char *src,
                              size_t n)
{
    const char *skip[64];
    int nskip = 0;
    size_t off = 0;

    ftw_mt_lock(&spans_lock);
    heads_rescue_locked(self, dst, dst + n);
    for (int i = 0; i < nspans && nskip < 64; i++) {
        const struct span *e = &spans[i];
        int at = nskip;

        if (!e->head || e->rescued || e->id == self ||
            e->lo + FTW_RTS_SIZE <= dst || e->lo >= dst + n)
            continue;
        while (at > 0 && skip[at - 1] > e->lo) {     /* sorted by address */
            skip[at] = skip[at - 1];
            at--;
        }
        skip[at] = e->lo;
        nskip++;
    }
    for (int k = 0; k <= nskip; k++) {
        const char *stop = k < nskip ? skip[k] : dst + n;
        size_t end = stop > dst ? (size_t)(stop - dst) : 0;

        if (end > off)
            memcpy(dst + off, src + off, end - off);
        if (k < nskip && (size_t)(skip[k] + FTW_RTS_SIZE - dst) > off)
            off = (size_t)(skip[k] + FTW_RTS_SIZE - dst);
        if (off > n)
            off = n;
    }
    ftw_mt_unlock(&spans_lock);
}

/* The RTS a listed receive finds: the one rescued for it, or what its
 * head holds, read in one section with copy_around_heads.  0 if rs is
 * not listed (the caller reads the buffer).  Its message has come, so
 * the MPI writes nothing more there: the head is one no longer, and
 * other threads' pulls stop reading it (heads_rescue) before this
 * receive pulls its own message over it. */
static int head_read(const rstate_t *rs, ftw_rts_t *hdr)
{
    struct span *e;
    int found = 0;

    if (rs == NULL || rs->span_id == 0)
        return 0;
    ftw_mt_lock(&spans_lock);
    if ((e = span_find_locked(rs->span_id)) != NULL) {
        memcpy(hdr, e->rescued ? (const void *)&e->hdr : (const void *)e->lo,
               sizeof(*hdr));
        e->head = 0;
        found = 1;
    }
    ftw_mt_unlock(&spans_lock);
    return found;
}

int ftw_rndv_peer_world(MPI_Comm comm, int peer)
{
    ftw_comm_t *c = ftw_comm_get(comm);

    if (c == NULL || c->is_inter || peer < 0 || peer >= c->size ||
        c->peer_world[peer] >= ftw_detect_world_size())
        return -1;      /* a process of another job: no transport */
    return c->peer_world[peer];
}

static FTW_TLS const void *last_send_buf;
static FTW_TLS uint64_t last_send_size;

/* Nonblocking rendezvous sends posted and not freed yet.  Every send
 * record freed counts it down, counted up or not: at or below 0, none is
 * open. */
static _Atomic int sends_open;

/* The transport of a one-shot rendezvous send of size bytes at buf to
 * world rank world: again if the same bytes as this thread's previous
 * one, and, where shm pushes messages ahead (FTW_SHM_PUSH), no
 * nonblocking one is still open (one message in flight, as a
 * ping-pong's: a window from one buffer goes faster pushed).  Only a
 * message larger than the push slots hold asks (ftw_xport_for_send). */
static int send_xport(int world, const void *buf, uint64_t size,
                      int blocking)
{
    int again = buf == last_send_buf && size == last_send_size &&
                (ftw_cfg.shm_push == 0 ||
                 atomic_load_explicit(&sends_open, memory_order_relaxed) <= 0);

    last_send_buf = buf;
    last_send_size = size;
    return (int)ftw_xport_for_send(world, size, blocking, again,
                                   ftw_rndv_both_ways());
}

int ftw_rndv_both_ways(void)
{
    return __atomic_load_n(&nspans, __ATOMIC_RELAXED) >= 2;
}

#define SEND_SETTLE_SEC 0.5

int ftw_rndv_send_settle(const ftw_reqinfo_t *info, MPI_Request *req,
                         MPI_Status *st)
{
    int world = ftw_rndv_peer_world(info->comm, info->peer), flag = 0;
    double end = PMPI_Wtime() + SEND_SETTLE_SEC;

    for (unsigned i = 0; world >= 0 && !ftw_detect_is_failed(world); i++) {
        if (ftw_req_test(req, &flag, st) != MPI_SUCCESS)
            return 0;
        if (flag)
            return 1;
        ftw_xport_progress();   /* an shm pull needs this process */
        if ((i & 15) == 0) {
            if (PMPI_Wtime() > end)
                return 0;
            ftw_rndv_progress_recvs();
            ftw_rndv_progress();
            ftw_detect_peek();
        }
    }
    return 0;
}

/* A large send the MPI carries: what the wrapper would have done. */
static int send_native(ftw_op_t *op, const void *buf, MPI_Count count,
                       MPI_Datatype dt, int tag, MPI_Request *request)
{
    int sync = op->info.kind == FTW_OP_SSEND;
    MPI_Count size = 0;

    ftw_type_size(dt, &size);
    ftw_stat_add(FTW_STAT_RNDV_NATIVE, 1);
    ftw_stat_add(FTW_STAT_RNDV_NATIVE_BYTES, (uint64_t)(count * size));
    if (request != NULL)
        return ftw_op_posted(op, ftw_isend_any(sync, buf, count, dt,
                                               op->npeer, tag, op->native,
                                               request), request);
    return ftw_op_wait(op, ftw_isend_any(sync, buf, count, dt, op->npeer,
                                         tag, op->native, &op->req),
                       MPI_STATUS_IGNORE);
}

/* The request of a rendezvous send is its FIN receive: watched like a
 * receive from the destination, so its failure ends it. */
static void send_info(ftw_op_t *op, const ftw_rndv_send_t *s)
{
    op->info.kind = FTW_OP_RECV;
    op->info.rndv = FTW_RNDV_SEND;
    op->info.owned = s->owned;
    op->info.buf = s->owned;
    op->info.count = 1;
    op->info.dt = MPI_UINT64_T;
    op->info.p2p_user = NULL;
}

int ftw_rndv_send_op(const void *buf, MPI_Count count, MPI_Datatype dt,
                     int dest, int tag, MPI_Comm comm, int kind,
                     const char *name, MPI_Request *request)
{
    ftw_rndv_send_t s;
    ftw_op_t op;
    MPI_Count size;
    int world, xport, rc;

    ftw_op_begin(&op, name, comm, dest, (ftw_op_kind_t)kind);
    if (ftw_op_refused(&op, MPI_STATUS_IGNORE)) {
        if (request != NULL)
            *request = MPI_REQUEST_NULL;
        return op.rc;
    }
    world = ftw_rndv_peer_world(comm, dest);
    if (ftw_type_size(dt, &size) != MPI_SUCCESS)
        world = -1;
    xport = world >= 0 ? send_xport(world, buf, (uint64_t)(count * size),
                                    request == NULL)
                       : FTW_XPORT_ID_NATIVE;
    if (xport == FTW_XPORT_ID_NATIVE || op.npeer < 0)
        return send_native(&op, buf, count, dt, tag, request);
    switch (ftw_rndv_send_start(buf, count, dt, count * size, world, xport,
                                tag, op.native, op.npeer, &s)) {
    case FTW_OK:
        break;
    case FTW_ST_UNSUPPORTED:    /* the transport cannot take it now */
        return send_native(&op, buf, count, dt, tag, request);
    default:
        return ftw_raise(comm, MPI_ERR_OTHER, name, -1);
    }
    send_info(&op, &s);
    if (request != NULL) {
        *request = s.fin_req;
        atomic_fetch_add_explicit(&sends_open, 1, memory_order_relaxed);
        ftw_req_add(s.fin_req, &op.info);
        return MPI_SUCCESS;
    }
    op.req = s.fin_req;
    rc = ftw_op_wait(&op, MPI_SUCCESS, MPI_STATUS_IGNORE);
    ftw_rndv_send_end(s.owned);     /* the buffer is the caller's again */
    if (rc != FTW_ERR_BUFFER_UNUSABLE)
        free(s.owned);  /* else the MPI may still write the FIN word */
    return rc;
}

/* A split receive's type, of absolute addresses: the first FTW_RTS_SIZE
 * bytes to scratch, the n after them in place at rest (any number: whole
 * GiB blocks, then the tail, so no block length exceeds an int). */
static int split_type(char *scratch, char *rest, MPI_Count n,
                      MPI_Datatype *t)
{
    const MPI_Count gib = (MPI_Count)1 << 30;
    MPI_Datatype blocks = MPI_DATATYPE_NULL;
    MPI_Datatype types[3] = { MPI_BYTE, MPI_BYTE, MPI_BYTE };
    int len[3] = { FTW_RTS_SIZE, (int)(n / gib), (int)(n % gib) };
    MPI_Aint disp[3];
    int rc = MPI_SUCCESS;

    PMPI_Get_address(scratch, &disp[0]);
    PMPI_Get_address(rest, &disp[1]);
    PMPI_Get_address(rest + n / gib * gib, &disp[2]);
    if (len[1] > 0 &&
        (rc = PMPI_Type_contiguous((int)gib, MPI_BYTE, &blocks)) ==
        MPI_SUCCESS)
        types[1] = blocks;
    if (rc == MPI_SUCCESS)
        rc = PMPI_Type_create_struct(3, len, disp, types, t);
    if (blocks != MPI_DATATYPE_NULL)
        PMPI_Type_free(&blocks);
    if (rc == MPI_SUCCESS && (rc = PMPI_Type_commit(t)) != MPI_SUCCESS)
        PMPI_Type_free(t);
    if (rc == MPI_SUCCESS)
        ftw_stat_add(FTW_STAT_RNDV_SPLIT_TYPES, 1);
    return rc;
}

/*
 * Split types kept for the next post (one thread): a window of receives
 * into one buffer splits every receive but the first, round after round,
 * with the same scratch headers (the thread's request blocks come back)
 * before the same bytes, so the same types recur; making one costs about
 * 0.7 us on MPICH and 0.25 us on Open MPI.  Four ways per set, the set
 * found from the three values that define a type; a way's old type is
 * freed when another takes it (a receive posted with it keeps what it
 * needs).
 */
#define SPLIT_SETS 64        /* a power of two */
#define SPLIT_WAYS 4

static struct split_set {
    struct split_kept {
        char *scratch, *rest;
        MPI_Count n;
        MPI_Datatype t;
        int made;
    } way[SPLIT_WAYS];
    unsigned next;          /* the way a miss takes when all are made */
} split_kept[SPLIT_SETS];

static struct split_set *split_set_of(const char *scratch, const char *rest,
                                      MPI_Count n)
{
    uint64_t h = (uint64_t)(uintptr_t)scratch * 0x9e3779b97f4a7c15ull ^
                 (uint64_t)(uintptr_t)rest ^ (uint64_t)n;

    return &split_kept[(h ^ h >> 29) & (SPLIT_SETS - 1)];
}

/* The split type for (scratch, rest, n), kept: the caller must not free
 * it. */
static int split_type_kept(char *scratch, char *rest, MPI_Count n,
                           MPI_Datatype *t)
{
    struct split_set *set = split_set_of(scratch, rest, n);
    struct split_kept *k = NULL;
    int rc;

    for (int i = 0; i < SPLIT_WAYS; i++) {
        struct split_kept *w = &set->way[i];

        if (w->made && w->scratch == scratch && w->rest == rest &&
            w->n == n) {
            *t = w->t;
            return MPI_SUCCESS;
        }
        if (!w->made && k == NULL)
            k = w;
    }
    rc = split_type(scratch, rest, n, t);
    if (rc != MPI_SUCCESS)
        return rc;
    if (k == NULL) {
        k = &set->way[set->next++ % SPLIT_WAYS];
        PMPI_Type_free(&k->t);
    }
    *k = (struct split_kept){ .scratch = scratch, .rest = rest, .n = n,
                              .t = *t, .made = 1 };
    return MPI_SUCCESS;
}

void ftw_rndv_split_fini(void)
{
    for (int i = 0; i < SPLIT_SETS; i++)
        for (int j = 0; j < SPLIT_WAYS; j++) {
            struct split_kept *k = &split_kept[i].way[j];

            if (k->made) {
                PMPI_Type_free(&k->t);
                k->made = 0;
            }
        }
}

/* Post a receive: into the buffer, or the scratch header. */
static int recv_post(ftw_op_t *op, void *buf, MPI_Count count,
                     MPI_Datatype dt, int tag, int persistent,
                     MPI_Request *req)
{
    rstate_t *rs = op->info.owned;

    if ((op->info.rndv & FTW_RNDV_RSCRATCH) && rs->split) {
        MPI_Count size = 0;
        MPI_Aint lb = 0;
        MPI_Datatype t;
        char *rest;
        int kept = !ftw_threaded, rc;

        ftw_type_size(dt, &size);
        contig(count, dt, &lb);
        rest = (char *)buf + lb + FTW_RTS_SIZE;
        rc = (kept ? split_type_kept : split_type)(rs->scratch, rest,
                                                   count * size -
                                                   FTW_RTS_SIZE, &t);
        if (rc != MPI_SUCCESS)
            return rc;
        rc = PMPI_Irecv(MPI_BOTTOM, 1, t, op->npeer, tag, op->native, req);
        if (!kept)
            PMPI_Type_free(&t);     /* the receive keeps what it needs */
        return rc;
    }
    if (op->info.rndv & FTW_RNDV_RSCRATCH) {
        buf = rs->scratch;
        count = FTW_RTS_SIZE;
        dt = MPI_BYTE;
    }
    if (persistent)
        return ftw_recv_init_any(buf, count, dt, op->npeer, tag, op->native,
                                 req);
    return ftw_irecv_any(buf, count, dt, op->npeer, tag, op->native, req);
}

/* Where an RTS would land: the buffer if the header fits (split if a
 * pending receive's RTS may lie there), else scratch. */
static int recv_prepare(ftw_op_t *op, void *buf, MPI_Count count,
                        MPI_Datatype dt, int persistent)
{
    rstate_t *rs;
    MPI_Count size;
    MPI_Aint lb;

    if (op->info.peer == MPI_PROC_NULL ||
        ftw_type_size(dt, &size) != MPI_SUCCESS)
        return MPI_SUCCESS;     /* nothing can come; the MPI checks dt */
    rs = rs_new();
    if (rs == NULL) {
        ftw_error("%s: out of memory", op->name);
        return MPI_ERR_NO_MEM;
    }
    atomic_store_explicit(&rs->state, persistent ? RS_IDLE : RS_POSTED,
                          memory_order_relaxed);
    rs->replay = op->replay;
    rs->rsrc = op->rsrc;
    rs->rtag = op->rtag;
    op->info.owned = rs;
    op->info.pooled = 1;
    /* Only a receive that holds a rendezvous message may get an RTS in a
     * correct program; progress finishes those as soon as the RTS is
     * there (its sender may wait for the FIN while this process waits
     * for something else).  A smaller one meets an RTS only when the
     * message is too large for it: it is finished, truncated, at its
     * completion. */
    op->info.early = count * size >= (MPI_Count)ftw_rndv_min;
    op->info.rndv = count * size >= FTW_RTS_SIZE ? FTW_RNDV_RUSER
                                                 : FTW_RNDV_RSCRATCH;
    if (op->info.rndv == FTW_RNDV_RUSER && !persistent &&
        contig(count, dt, &lb)) {
        const char *lo = (const char *)buf + lb, *hi = lo + count * size;

        if (span_place(rs, lo, hi) == 2) {
            rs->split = 1;
            op->info.rndv = FTW_RNDV_RSCRATCH;
            ftw_stat_add(FTW_STAT_RNDV_SPLIT, 1);
        }
    }
    if (op->replay)
        op->info.rndv |= FTW_RNDV_REPLAY;
    return MPI_SUCCESS;
}

/* A stashed message the receive takes: receive its replay instead. */
static int recv_stashed(ftw_op_t *op, int *tag_p)
{
    ftw_stash_t *e = ftw_stash_take(op, *tag_p);
    int usrc, rc;

    if (e == NULL)
        return MPI_SUCCESS;
    usrc = e->usrc;
    rc = ftw_stash_replay(e, &op->native, &op->npeer, tag_p, &op->rsrc,
                          &op->rtag);
    if (rc != MPI_SUCCESS)
        return rc;
    op->replay = 1;
    op->info.peer = usrc;
    return MPI_SUCCESS;
}

/* A blocking receive on the fast path (quiet, stash empty) into a
 * contiguous buffer that holds an RTS: the plain fast-path receive, then,
 * only if what came is an RTS, the pull. */
static int recv_fast(void *buf, MPI_Count count, MPI_Datatype dt,
                     int source, int tag, MPI_Comm comm, const char *name,
                     MPI_Status *status, MPI_Aint lb)
{
    MPI_Status local, *st = status == MPI_STATUS_IGNORE ? &local : status;
    ftw_reqinfo_t info;
    MPI_Request req;
    MPI_Count n = 0;
    int rc;

    if (!ftw_stash_post_begin_empty())
        return FTW_PENDING_CODE;    /* a probe stashed messages meanwhile */
    rc = ftw_irecv_any(buf, count, dt, source, tag, comm, &req);
    ftw_stash_post_end();
    if (rc != MPI_SUCCESS)
        return rc;
    rc = ftw_recv_fast(&req, st, comm, source, tag, name, buf, count, dt);
    if (rc != MPI_SUCCESS || source == MPI_PROC_NULL ||
        (n = status_bytes(st)) != FTW_RTS_SIZE ||
        !ftw_rndv_is_rts((const char *)buf + lb, n))
        return rc;
    info = (ftw_reqinfo_t){ .comm = comm, .peer = st->MPI_SOURCE,
                            .peer2 = FTW_NO_PEER, .kind = FTW_OP_RECV,
                            .rndv = FTW_RNDV_RUSER, .buf = buf,
                            .count = count, .dt = dt };
    rc = ftw_rndv_finish(&info, st);
    if (rc != MPI_SUCCESS)
        rc = ftw_raise(comm, rc, name, rc == FTW_ERR_PROC_FAIL_STOP ?
                                       st->MPI_SOURCE : -1);
    return rc;
}

static int recv_finish(const ftw_reqinfo_t *info, MPI_Status *st);
static int recvs_to_finish(void);

/* The common completion of a window of small messages, on one thread: a
 * receive posted into its scratch header got an ordinary message (an RTS
 * is exactly FTW_RTS_SIZE bytes) that fits the contiguous buffer, and no
 * listed receive's head lies anywhere (no span): copy it over, and the
 * state is free again.  0 when the general path must look. */
static inline int scratch_take(void *buf, MPI_Count count, MPI_Datatype dt,
                               rstate_t *rs, const MPI_Status *st)
{
    MPI_Count n, size;
    MPI_Aint lb;

    if (ftw_unlikely(ftw_threaded) ||
        rs->split || rs->replay || rs->span_id != 0 ||
        __atomic_load_n(&nspans, __ATOMIC_RELAXED) != 0 ||
        atomic_load_explicit(&rs->state, memory_order_relaxed) != RS_POSTED ||
        status_cancelled(st) || (n = status_bytes(st)) >= FTW_RTS_SIZE ||
        ftw_type_size(dt, &size) != MPI_SUCCESS ||
        n > count * size || !contig(count, dt, &lb))
        return 0;
    memcpy((char *)buf + lb, rs->scratch, (size_t)n);
    atomic_store_explicit(&rs->state, RS_IDLE, memory_order_relaxed);
    return 1;
}

static inline int scratch_fast(const ftw_reqinfo_t *info, rstate_t *rs,
                               const MPI_Status *st)
{
    return info->rndv == FTW_RNDV_RSCRATCH &&
           scratch_take(info->buf, info->count, info->dt, rs, st);
}

/* A nonblocking receive on the fast path too small for any rendezvous
 * message: posted as the plain fast path posts it, recorded with no
 * state (the buffer holds an RTS) or with a scratch header from the
 * request blocks (it does not).  No span is listed: such a receive meets
 * an RTS only when the message is too large for it, and reports the
 * truncation when it completes. */
static int recv_small(void *buf, MPI_Count count, MPI_Datatype dt,
                      MPI_Count bytes, int source, int tag, MPI_Comm comm,
                      MPI_Request *request)
{
    rstate_t *rs;
    int rc;

    if (bytes >= FTW_RTS_SIZE) {
        rc = ftw_irecv_any(buf, count, dt, source, tag, comm, request);
        if (rc == MPI_SUCCESS)
            ftw_req_add_rndv_quiet(*request, comm, source, buf, count, dt,
                                   FTW_RNDV_RUSER, NULL);
        return rc;
    }
    if ((rs = rs_new()) == NULL) {
        ftw_error("MPI_Irecv: out of memory");
        return MPI_ERR_NO_MEM;
    }
    atomic_store_explicit(&rs->state, RS_POSTED, memory_order_relaxed);
    rc = PMPI_Irecv(rs->scratch, FTW_RTS_SIZE, MPI_BYTE, source, tag, comm,
                    request);
    if (rc != MPI_SUCCESS) {
        ftw_req_block_put(rs);
        return rc;
    }
    ftw_req_add_rndv_quiet(*request, comm, source, buf, count, dt,
                           FTW_RNDV_RSCRATCH, rs);
    return MPI_SUCCESS;
}

/* The blocking form for a buffer smaller than an RTS: the fast-path
 * receive into a scratch header, then the copy (or, the message being too
 * large, the truncated pull). */
static int recv_fast_scratch(void *buf, MPI_Count count, MPI_Datatype dt,
                             int source, int tag, MPI_Comm comm,
                             const char *name, MPI_Status *status)
{
    MPI_Status local, *st = status == MPI_STATUS_IGNORE ? &local : status;
    ftw_reqinfo_t info;
    MPI_Request req;
    rstate_t *rs = rs_new();
    int rc;

    if (rs == NULL) {
        ftw_error("%s: out of memory", name);
        return MPI_ERR_NO_MEM;
    }
    if (!ftw_stash_post_begin_empty()) {
        ftw_req_block_put(rs);
        return FTW_PENDING_CODE;    /* a probe stashed messages meanwhile */
    }
    rc = PMPI_Irecv(rs->scratch, FTW_RTS_SIZE, MPI_BYTE, source, tag, comm,
                    &req);
    ftw_stash_post_end();
    if (rc == MPI_SUCCESS)
        rc = ftw_recv_fast(&req, st, comm, source, tag, name, rs->scratch,
                           FTW_RTS_SIZE, MPI_BYTE);
    if (rc == FTW_ERR_BUFFER_UNUSABLE)
        return rc;      /* the MPI may still write the header: it stays */
    /* The record is built only when the general path must look (an
     * RTS, a message too large, threads): zeroing it costs as much as
     * the copy. */
    if (rc == MPI_SUCCESS) {
        atomic_store_explicit(&rs->state, RS_POSTED, memory_order_relaxed);
        if (!scratch_take(buf, count, dt, rs, st)) {
            info = (ftw_reqinfo_t){ .comm = comm, .peer = st->MPI_SOURCE,
                                    .peer2 = FTW_NO_PEER,
                                    .kind = FTW_OP_RECV,
                                    .rndv = FTW_RNDV_RSCRATCH, .owned = rs,
                                    .buf = buf, .count = count, .dt = dt };
            rc = recv_finish(&info, st);
        }
        if (rc != MPI_SUCCESS)
            rc = ftw_raise(comm, rc, name, rc == FTW_ERR_PROC_FAIL_STOP ?
                                           st->MPI_SOURCE : -1);
    }
    ftw_req_block_put(rs);
    return rc;
}

/* The receive through ftwrap's full path: watched, stash first, state
 * for the rendezvous (out of line: the fast paths above keep a small
 * frame). */
static __attribute__((noinline)) int
recv_full(void *buf, MPI_Count count, MPI_Datatype dt, int source, int tag,
          MPI_Comm comm, const char *name, int persistent,
          MPI_Request *request, MPI_Status *status)
{
    ftw_op_t op;
    int rc;

    ftw_op_begin(&op, name, comm, source, FTW_OP_RECV);
    ftw_op_set_buf(&op, buf, count, dt);
    op.info.persistent = (uint8_t)persistent;
    op.posts = request != NULL;
    if (ftw_op_refused(&op, status)) {
        if (request != NULL)
            *request = MPI_REQUEST_NULL;
        return op.rc;
    }
    rc = MPI_SUCCESS;
    /* The stash looked at and the receive posted in one section against
     * a probe taking messages into the stash (threads). */
    ftw_stash_post_begin();
    if (ftw_stash_n > 0 && !persistent)
        rc = recv_stashed(&op, &tag);
    if (rc == MPI_SUCCESS)
        rc = recv_prepare(&op, buf, count, dt, persistent);
    if (rc == MPI_SUCCESS && op.info.owned != NULL)
        ((rstate_t *)op.info.owned)->tag = tag;
    if (rc == MPI_SUCCESS)
        rc = recv_post(&op, buf, count, dt, tag, persistent,
                       request != NULL ? request : &op.req);
    ftw_stash_post_end();
    if (request != NULL) {
        if (rc == MPI_SUCCESS) {
            ftw_req_add(*request, &op.info);
        } else {
            span_drop(op.info.owned);
            rs_free(&op.info);
        }
        return rc;
    }
    rc = ftw_op_wait(&op, rc, status);
    span_drop(op.info.owned);
    if (rc != FTW_ERR_BUFFER_UNUSABLE)
        rs_free(&op.info);
    return rc;
}

int ftw_rndv_recv_op(void *buf, MPI_Count count, MPI_Datatype dt,
                     int source, int tag, MPI_Comm comm, const char *name,
                     int persistent, MPI_Request *request,
                     MPI_Status *status)
{
    MPI_Count size;
    MPI_Aint lb;
    int rc;

    if (ftw_quiet() && ftw_stash_n == 0 && source != MPI_PROC_NULL &&
        ftw_type_size(dt, &size) == MPI_SUCCESS) {
        MPI_Count bytes = count * size;

        /* Under threads a probe may take messages into the stash between
         * the look above and the post: the post and a second look are
         * one section against it (ftw_stash_post_begin). */
        if (request != NULL && !persistent &&
            bytes < (MPI_Count)ftw_rndv_min) {
            if (ftw_likely(!ftw_threaded))
                return recv_small(buf, count, dt, bytes, source, tag, comm,
                                  request);
            if (!ftw_stash_post_begin_empty())
                goto full;
            rc = recv_small(buf, count, dt, bytes, source, tag, comm,
                            request);
            ftw_stash_post_end();
            return rc;
        }
        /* A blocking one waits in the MPI, where no receive of this
         * process's is finished early: only while none needs it. */
        if (request == NULL && recvs_to_finish())
            goto full;
        if (request == NULL && bytes < FTW_RTS_SIZE) {
            rc = recv_fast_scratch(buf, count, dt, source, tag, comm, name,
                                   status);
            if (rc != FTW_PENDING_CODE)
                return rc;
            goto full;
        }
        if (request == NULL && contig(count, dt, &lb) &&
            !spans_overlap((char *)buf + lb, (char *)buf + lb + bytes, 0) &&
            (rc = recv_fast(buf, count, dt, source, tag, comm, name, status,
                            lb)) != FTW_PENDING_CODE)
            return rc;
    }
full:
    return recv_full(buf, count, dt, source, tag, comm, name, persistent,
                     request, status);
}

/* The receive posted (ftwrap's, stash first), then the send: wait for
 * both; the receive's outcome first, as MPI_Sendrecv reports it. */
static int sendrecv_run(const void *sbuf, MPI_Count scount, MPI_Datatype sdt,
                        int dest, int stag, void *rbuf, MPI_Count rcount,
                        MPI_Datatype rdt, int source, int rtag, MPI_Comm comm,
                        MPI_Status *status, const char *name)
{
    MPI_Request r, s;
    int rc, rc_s;

    rc = ftw_rndv_recv_op(rbuf, rcount, rdt, source, rtag, comm, name, 0,
                          &r, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        return rc;
#ifdef FTW_HAVE_MPI_ISEND_C
    if (scount > INT_MAX)
        rc_s = MPI_Isend_c(sbuf, scount, sdt, dest, stag, comm, &s);
    else
#endif
        rc_s = MPI_Isend(sbuf, (int)scount, sdt, dest, stag, comm, &s);
    rc = MPI_Wait(&r, status);
    if (rc_s == MPI_SUCCESS)
        rc_s = MPI_Wait(&s, MPI_STATUS_IGNORE);
    return rc != MPI_SUCCESS ? rc : rc_s;
}

int ftw_rndv_sendrecv(const void *sbuf, MPI_Count scount, MPI_Datatype sdt,
                      int dest, int stag, void *rbuf, MPI_Count rcount,
                      MPI_Datatype rdt, int source, int rtag, MPI_Comm comm,
                      MPI_Status *status)
{
    return sendrecv_run(sbuf, scount, sdt, dest, stag, rbuf, rcount, rdt,
                        source, rtag, comm, status, "MPI_Sendrecv");
}

/* MPI_Pack_size of any count. */
static int pack_size(MPI_Count count, MPI_Datatype dt, MPI_Comm comm,
                     MPI_Count *size_p)
{
#ifdef FTW_HAVE_MPI_PACK_SIZE_C
    return PMPI_Pack_size_c(count, dt, comm, size_p);
#else
    int size = 0, rc = count > INT_MAX ? MPI_ERR_COUNT
                                       : PMPI_Pack_size((int)count, dt, comm,
                                                        &size);

    *size_p = size;
    return rc;
#endif
}

int ftw_rndv_sendrecv_replace(void *buf, MPI_Count count, MPI_Datatype dt,
                              int dest, int stag, int source, int rtag,
                              MPI_Comm comm, MPI_Status *status)
{
    MPI_Count size = 0, pos = 0;
    void *copy;
    int rc;

    /* The send's data, packed before the receive may overwrite it. */
    rc = pack_size(count, dt, comm, &size);
    if (rc != MPI_SUCCESS)
        return ftw_raise(comm, rc, "MPI_Sendrecv_replace", -1);
    copy = malloc(size > 0 ? (size_t)size : 1);
    if (copy == NULL)
        return ftw_raise(comm, MPI_ERR_NO_MEM, "MPI_Sendrecv_replace", -1);
    rc = ftw_pack(buf, count, dt, copy, size, &pos, comm);
    if (rc == MPI_SUCCESS)
        rc = sendrecv_run(copy, pos, MPI_PACKED, dest, stag, buf, count, dt,
                          source, rtag, comm, status, "MPI_Sendrecv_replace");
    else
        rc = ftw_raise(comm, rc, "MPI_Sendrecv_replace", -1);
    free(copy);
    return rc;
}

void ftw_op_rndv_recv(ftw_op_t *op)
{
    MPI_Count size;
    rstate_t *rs;

    if (ftw_rndv_min != 0 &&
        ftw_type_size(op->info.dt, &size) == MPI_SUCCESS &&
        op->info.count * size >= FTW_RTS_SIZE)
        op->info.rndv = FTW_RNDV_RUSER;
    if (!op->replay)
        return;
    rs = calloc(1, sizeof(*rs));
    if (rs == NULL) {
        ftw_warn_sparse("%s: out of memory: the status will name ftwrap's "
                        "own source and tag", op->name);
        return;
    }
    atomic_store_explicit(&rs->state, RS_POSTED, memory_order_relaxed);
    rs->replay = 1;
    rs->rsrc = op->rsrc;
    rs->rtag = op->rtag;
    op->info.owned = rs;
    op->info.rndv |= FTW_RNDV_REPLAY;
}

/* ---- completion ----------------------------------------------------------- */

/* A rendezvous send's FIN arrived (or its receive was cancelled). */
static int send_finish(const ftw_reqinfo_t *info, MPI_Status *st)
{
    int cancelled = 0;

    if (info->persistent && !ftw_rndv_psend_round(info, st))
        return MPI_SUCCESS;
    PMPI_Test_cancelled(st, &cancelled);
    if (cancelled)
        return MPI_SUCCESS;
    st->MPI_SOURCE = info->peer;
    PMPI_Status_set_elements_x(st, MPI_BYTE, 0);
    switch (ftw_rndv_fin_code(info->owned)) {
    case FTW_FIN_DONE:
        return MPI_SUCCESS;
    case FTW_FIN_TRUNCATED:
        ftw_debug("rank %d took only part of a message (truncated)",
                  info->peer);
        return MPI_SUCCESS;     /* as with the MPI: the sender succeeds */
    default:
        ftw_warn_sparse("rank %d could not pull a message", info->peer);
        st->MPI_ERROR = MPI_ERR_OTHER;
        return MPI_ERR_OTHER;
    }
}

/* The message an RTS announces: pull it, describe it in st. */
static int rts_finish(const ftw_reqinfo_t *info, MPI_Status *st,
                      const ftw_rts_t *rts)
{
    const rstate_t *rs = info->owned;
    MPI_Count got = 0, size = 0;
    MPI_Aint lb;
    char *tmp;
    int rc;

    /* A fragment's receive lets the MPI complete other receives while
     * this one is pulled: one of them may then write its RTS in a
     * header in this range, as another thread's progress may. */
    if (heads_rescue(info) > 0 && (ftw_threaded || rts->first > 0) &&
        ftw_type_size(info->dt, &size) == MPI_SUCCESS &&
        contig(info->count, info->dt, &lb) &&
        (tmp = malloc(info->count * size > 0 ? (size_t)(info->count * size)
                                             : 1)) != NULL) {
        /* Pulled aside, then copied around the heads still waiting. */
        rc = ftw_status_to_mpi(ftw_rndv_recv(rts, tmp, info->count * size,
                                             MPI_BYTE, &got));
        if (rc == MPI_SUCCESS || rc == MPI_ERR_TRUNCATE)
            copy_around_heads(rs != NULL ? rs->span_id : 0,
                              (char *)info->buf + lb, tmp, (size_t)got);
        free(tmp);
    } else {
        rc = ftw_status_to_mpi(ftw_rndv_recv(rts, info->buf, info->count,
                                             info->dt, &got));
    }

    PMPI_Status_set_elements_x(st, MPI_BYTE, got);
    if (rc != MPI_SUCCESS)
        st->MPI_ERROR = rc;
    return rc;
}

/* An ordinary message that went to the scratch header: hand it over. */
static int scratch_copy(const ftw_reqinfo_t *info, MPI_Status *st,
                        MPI_Count n)
{
    const rstate_t *rs = info->owned;
    MPI_Count size = 0, cap;
    MPI_Aint lb;
    int rc = MPI_SUCCESS, pending;

    ftw_type_size(info->dt, &size);
    cap = info->count * size;
    if (n > cap) {
        n = cap;
        rc = MPI_ERR_TRUNCATE;
        PMPI_Status_set_elements_x(st, MPI_BYTE, n);
        st->MPI_ERROR = rc;
    }
    if (n == 0)
        return rc;
    pending = heads_rescue(info);
    /* Scratch holds the first FTW_RTS_SIZE bytes at most: all of them for
     * a receive posted there, the head of a split one (contiguous, its
     * rest already in place). */
    if (!contig(info->count, info->dt, &lb))
        ftw_unpack_bytes(rs->scratch, n, info->buf, info->dt);
    else if (pending > 0 && ftw_threaded)
        copy_around_heads(rs->span_id, (char *)info->buf + lb, rs->scratch,
                          (size_t)(n < FTW_RTS_SIZE ? n : FTW_RTS_SIZE));
    else
        memcpy((char *)info->buf + lb, rs->scratch,
               (size_t)(n < FTW_RTS_SIZE ? n : FTW_RTS_SIZE));
    return rc;
}

/* The first FTW_RTS_SIZE bytes a receive wrote to its buffer. */
static void user_header(const ftw_reqinfo_t *info, ftw_rts_t *hdr)
{
    MPI_Count size = 1, n, pos = 0;
    MPI_Aint lb;
    char *tmp;

    memset(hdr, 0, sizeof(*hdr));
    if (contig(info->count, info->dt, &lb)) {
        memcpy(hdr, (const char *)info->buf + lb, sizeof(*hdr));
        return;
    }
    ftw_type_size(info->dt, &size);
    n = (FTW_RTS_SIZE + size - 1) / size;
    tmp = malloc((size_t)(n * size));
    if (tmp == NULL)
        return;
    if (ftw_pack(info->buf, n, info->dt, tmp, n * size, &pos,
                 MPI_COMM_WORLD) == MPI_SUCCESS)
        memcpy(hdr, tmp, sizeof(*hdr));
    free(tmp);
}

/* A receive's native request completed with *st: its message. */
static int recv_finish(const ftw_reqinfo_t *info, MPI_Status *st)
{
    const rstate_t *rs = info->owned;
    MPI_Count n;
    ftw_rts_t hdr;

    if (status_cancelled(st))
        return MPI_SUCCESS;     /* nothing came */
    n = status_bytes(st);
    if (info->rndv & FTW_RNDV_RSCRATCH) {
        if (!ftw_rndv_is_rts(rs->scratch, n))
            return scratch_copy(info, st, n);
        memcpy(&hdr, rs->scratch, sizeof(hdr));
        return rts_finish(info, st, &hdr);
    }
    if (n != FTW_RTS_SIZE)
        return MPI_SUCCESS;
    if (!head_read(rs, &hdr))
        user_header(info, &hdr);
    if (!ftw_rndv_is_rts(&hdr, n))
        return MPI_SUCCESS;
    return rts_finish(info, st, &hdr);
}

/* The outcome a receive finished early keeps, into st. */
static int early_outcome(const rstate_t *rs, MPI_Status *st)
{
    PMPI_Status_set_elements_x(st, MPI_BYTE, rs->got);
    if (rs->code != MPI_SUCCESS)
        st->MPI_ERROR = rs->code;
    return rs->code;
}

int ftw_rndv_finish_quick(const ftw_reqinfo_t *info, const MPI_Status *st)
{
    rstate_t *rs = info->owned;

    switch (info->rndv) {
    case 0:
        return 1;
    case FTW_RNDV_RSCRATCH:
        return rs != NULL && scratch_fast(info, rs, st);
    case FTW_RNDV_RUSER:
        return rs == NULL &&
               (status_cancelled(st) || status_bytes(st) != FTW_RTS_SIZE);
    default:
        return 0;
    }
}

int ftw_rndv_finish(const ftw_reqinfo_t *info, MPI_Status *st)
{
    rstate_t *rs = info->owned;
    int rc;

    if (ftw_rndv_finish_quick(info, st))
        return MPI_SUCCESS;
    if (info->rndv & FTW_RNDV_SEND)
        return send_finish(info, st);
    if (rs != NULL && rs->replay) {
        st->MPI_SOURCE = rs->rsrc;
        st->MPI_TAG = rs->rtag;
    }
    if (!(info->rndv & (FTW_RNDV_RUSER | FTW_RNDV_RSCRATCH))) {
        rc = MPI_SUCCESS;   /* a replay into a buffer under a header */
    } else if (rs == NULL) {
        rc = recv_finish(info, st);
    } else {
        int32_t was = rs_claim(rs);

        if (was == RS_CLAIMED) {
            rs_settle(rs);  /* another thread's progress is pulling it */
            was = rs_state(rs);
        }
        /* Finished early: the status the MPI gives is the RTS's. */
        rc = was == RS_FINISHED ? early_outcome(rs, st)
                                : recv_finish(info, st);
    }
    if (rs != NULL) {
        span_drop(rs);
        rs_set(rs, RS_IDLE);
    }
    return rc;
}

/* Receives claimed by one progress pass, finished after the table's
 * lock is left (a pull must not hold every other thread's completion
 * calls); with one thread each is finished at once. */
#define EARLY_MAX 8

typedef struct {
    int n;
    struct early_job {
        ftw_reqinfo_t info;
        MPI_Status st;
    } job[EARLY_MAX];
} early_t;

/* Finish a claimed receive whose native request completed with st, and
 * keep the outcome for its completion call. */
static void early_run(const ftw_reqinfo_t *info, MPI_Status *st)
{
    rstate_t *rs = info->owned;

    rs->code = recv_finish(info, st);
    PMPI_Get_elements_x(st, MPI_BYTE, &rs->got);
    span_drop(rs);
    rs_set(rs, RS_FINISHED);
}

/* One pending receive of the table whose message may have come (the
 * table locked): claim it, so that its sender's wait can end, and finish
 * it now (one thread) or once the lock is left (q). */
static void early_claim(ftw_req_t *e, void *arg)
{
    early_t *q = arg;
    rstate_t *rs = e->info.owned;
    MPI_Status st;
    int flag = 0;

    if (!e->info.early ||
        !(e->info.rndv & (FTW_RNDV_RUSER | FTW_RNDV_RSCRATCH)) ||
        rs == NULL || q->n == EARLY_MAX || rs_state(rs) != RS_POSTED ||
        PMPI_Request_get_status(e->key, &flag, &st) != MPI_SUCCESS || !flag)
        return;
    /* The empty status of an inactive persistent receive: its owner's
     * completion took it between its post and this look. */
    if (ftw_unlikely(ftw_threaded) && e->info.persistent &&
        st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG)
        return;
    if (rs_claim(rs) != RS_POSTED)
        return;
    if (ftw_likely(!ftw_threaded)) {
        early_run(&e->info, &st);
        return;
    }
    q->job[q->n].info = e->info;
    q->job[q->n++].st = st;
}

static void early_drain(early_t *q)
{
    for (int i = 0; i < q->n; i++)
        early_run(&q->job[i].info, &q->job[i].st);
    q->n = 0;
}

void ftw_rndv_owned_free(unsigned rndv, void *owned, int pooled)
{
    if (owned == NULL)
        return;
    /* One thread: nobody else holds a claim; no span, nothing listed. */
    if (ftw_likely(!ftw_threaded) && pooled &&
        ((rstate_t *)owned)->span_id == 0) {
        ftw_req_block_put(owned);
        return;
    }
    if (rndv & (FTW_RNDV_RUSER | FTW_RNDV_RSCRATCH)) {
        rs_settle(owned);
        span_drop(owned);   /* a receive cut or cancelled, never finished */
    }
    if (pooled) {
        ftw_req_block_put(owned);
        return;
    }
    if (rndv & FTW_RNDV_SEND)
        atomic_fetch_sub_explicit(&sends_open, 1, memory_order_relaxed);
    ftw_rndv_send_end(owned);
    free(owned);
}

/* Receives freed while active (ftw_rndv_orphan). */
typedef struct orphan {
    struct orphan *next;
    MPI_Request req;
    ftw_reqinfo_t info;
} orphan_t;

static orphan_t *_Atomic orphans;
static pthread_mutex_t orphans_lock = PTHREAD_MUTEX_INITIALIZER;

int ftw_rndv_orphan(MPI_Request req, ftw_reqinfo_t *info)
{
    rstate_t *rs = info->owned;
    orphan_t *o;

    if (!(info->rndv & (FTW_RNDV_RUSER | FTW_RNDV_RSCRATCH)) || rs == NULL)
        return 0;
    /* Out of the table now: nobody claims it any more, but a claim made
     * before may still be pulling. */
    rs_settle(rs);
    if (rs_state(rs) != RS_POSTED || (o = malloc(sizeof(*o))) == NULL) {
        span_drop(rs);      /* its memory goes to the loose requests */
        return 0;
    }
    o->req = req;
    o->info = *info;
    info->owned = NULL;
    ftw_mt_lock(&orphans_lock);
    o->next = atomic_load_explicit(&orphans, memory_order_relaxed);
    atomic_store_explicit(&orphans, o, memory_order_relaxed);
    ftw_mt_unlock(&orphans_lock);
    return 1;
}

/* Finish the orphans whose message came; drop those whose sender
 * failed (nothing to tell it) once the MPI lets go of them.  One thread
 * at a time takes the list, works on it unlocked, and puts back what
 * is left. */
static void orphans_progress(void)
{
    orphan_t *list, *keep = NULL, **kt = &keep;

    if (ftw_mt_trylock(&orphans_lock) != 0)
        return;
    list = atomic_exchange_explicit(&orphans, NULL, memory_order_relaxed);
    ftw_mt_unlock(&orphans_lock);
    while (list != NULL) {
        orphan_t *o = list;
        MPI_Status st;
        int flag = 0;

        list = o->next;
        if (PMPI_Test(&o->req, &flag, &st) != MPI_SUCCESS || flag) {
            if (flag)
                recv_finish(&o->info, &st);
            span_drop(o->info.owned);
            free(o->info.owned);
            free(o);
            continue;
        }
        if (ftw_req_doomed(&o->info)) {
            PMPI_Cancel(&o->req);
            span_drop(o->info.owned);
            ftw_rndv_loose_add(o->req, o->info.owned);
            free(o);
            continue;
        }
        *kt = o;
        kt = &o->next;
    }
    if (keep == NULL)
        return;
    ftw_mt_lock(&orphans_lock);
    *kt = atomic_load_explicit(&orphans, memory_order_relaxed);
    atomic_store_explicit(&orphans, keep, memory_order_relaxed);
    ftw_mt_unlock(&orphans_lock);
}

/* Are there receives progress must finish (early ones, orphans)? */
static int recvs_to_finish(void)
{
    return atomic_load_explicit(&ftw_req_early_count,
                                memory_order_relaxed) > 0 || orphans != NULL;
}

void ftw_rndv_progress_recvs(void)
{
    if (atomic_load_explicit(&ftw_req_early_count, memory_order_relaxed) > 0) {
        early_t q;

        q.n = 0;
        ftw_req_foreach(early_claim, &q);
        early_drain(&q);
    }
    if (atomic_load_explicit(&orphans, memory_order_relaxed) != NULL)
        orphans_progress();
}

/* A persistent receive started while a probe's stash holds its message:
 * receive the stashed message now, keeping the outcome as a receive
 * finished early does.  The native request is not started: inactive, it
 * completes at once, and ftw_rndv_finish reports the outcome. */
static int start_from_stash(ftw_req_t *e)
{
    rstate_t *rs = e->info.owned;
    ftw_reqinfo_t info = e->info;
    MPI_Request r;
    MPI_Status st;
    ftw_op_t op;
    int tag = rs->tag, rc;

    ftw_op_begin(&op, "MPI_Start", e->info.comm, e->info.peer, FTW_OP_RECV);
    if (op.info.peer == MPI_PROC_NULL)
        return 0;
    rc = recv_stashed(&op, &tag);
    if (rc == MPI_SUCCESS && !op.replay)
        return 0;           /* nothing stashed for it */
    op.info.rndv = info.rndv;
    op.info.owned = rs;
    if (rc == MPI_SUCCESS)
        rc = recv_post(&op, info.buf, (int)info.count, info.dt, tag, 0, &r);
    /* The replay was sent to this process: it is already here. */
    if (rc == MPI_SUCCESS)
        rc = PMPI_Wait(&r, &st);
    rs->replay = 1;
    rs->rsrc = op.rsrc;
    rs->rtag = op.rtag;
    rs->got = 0;
    if (rc == MPI_SUCCESS) {
        info.rndv &= (uint8_t)~FTW_RNDV_REPLAY;
        rs->code = recv_finish(&info, &st);
        PMPI_Get_elements_x(&st, MPI_BYTE, &rs->got);
    } else {
        ftw_error("MPI_Start: the message a probe had taken could not be "
                  "received again (error %d)", rc);
        rs->code = rc;
    }
    rs_set(rs, RS_FINISHED);
    return 1;
}

/* The request being started is the caller's: its record stays. */
int ftw_rndv_started(MPI_Request req)
{
    ftw_req_t *e = ftw_req_find(req);
    rstate_t *rs;

    if (e == NULL || !(e->info.rndv & (FTW_RNDV_RUSER | FTW_RNDV_RSCRATCH)) ||
        (rs = e->info.owned) == NULL)
        return 0;
    rs->replay = 0;
    if (ftw_stash_n > 0 && e->info.persistent && start_from_stash(e))
        return 1;
    rs_set(rs, RS_POSTED);
    return 0;
}

int ftw_rndv_finish_raise(const ftw_reqinfo_t *info, MPI_Status *st,
                          const char *name)
{
    int rc = ftw_rndv_finish(info, st);

    if (rc != MPI_SUCCESS && !ftw_is_own_error(rc))
        rc = ftw_raise(info->comm, rc, name, -1);
    return rc;
}

void ftw_rndv_peek(MPI_Request req, MPI_Status *st)
{
    ftw_reqinfo_t info;
    const rstate_t *rs;
    early_t q;

    /* Its message may have come since the last progress pass: finished
     * now, so the status gives the pulled message. */
    q.n = 0;
    ftw_req_apply(req, early_claim, &q);
    early_drain(&q);
    if (st == MPI_STATUS_IGNORE || !ftw_req_lookup(req, &info) ||
        !(info.rndv & (FTW_RNDV_RUSER | FTW_RNDV_RSCRATCH)) ||
        (rs = info.owned) == NULL)
        return;
    if (rs->replay) {
        st->MPI_SOURCE = rs->rsrc;
        st->MPI_TAG = rs->rtag;
    }
    rs_settle(rs);      /* another thread's progress may be pulling it */
    if (rs_state(rs) == RS_FINISHED)
        early_outcome(rs, st);
}
