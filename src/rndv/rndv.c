/* The rendezvous protocol: RTS, pull, FIN (see rndv.h). */
#define _GNU_SOURCE
#include "rndv/rndv.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "buf/cut.h"
#include "core/lock.h"
#include "detect/detect.h"
#include "util/config.h"
#include "util/log.h"
#include "util/stats.h"
#include "xport/xport.h"

#define FTW_RNDV_MIN_FLOOR 1024     /* far above FTW_RTS_SIZE */
#define FIN_TAG_BASE 64
#define FIN_TAG_SPAN (1 << 20)
/* FTW_RNDV_FIRST's ceiling: what both MPIs deliver at once, the
 * sender's progress not needed (Open MPI's vader eager limit; MPICH's UCX
 * shared-memory segment holds 8 KiB), as the RTS is delivered. */
#define FIRST_MAX ((size_t)4 << 10)

size_t ftw_rndv_min;
_Atomic int ftw_rndv_on;

static uint64_t cookie[2];
/* FIN messages by world rank and FIN tag, and first fragments under
 * their send's FIN tag + frag_shift: above every FIN tag, since a
 * process's FIN receives wait for its peers' FINs under tags their own
 * sends' fragments would also carry.  One communicator, not two: each
 * one more makes MPICH's small-message exchange slower. */
static MPI_Comm rndv_comm = MPI_COMM_NULL;
static int frag_shift;
static size_t first_len;       /* FTW_RNDV_FIRST, at most FIRST_MAX */
static int self_world = -1;
static int fin_tag_span = FIN_TAG_SPAN;
static _Atomic unsigned fin_seq;    /* threads' sends take distinct tags */
/* Stashed messages replayed to this process, each under a tag of its own
 * (the tags above the fragments'): a replay's receive may be posted long
 * after its send (its thread preempted in between) while other threads
 * replay, and must still match only its own message. */
static int replay_base = 1, replay_span = FIN_TAG_BASE - 1;

/* Persistent sends keep one FIN tag from their init to their free, drawn
 * above the span of the one-shot sends' tags (which wrap) and given back
 * only after a round that ended with its FIN: a late FIN of a round cut
 * short could match the next owner's FIN receive. */
static int pfin_base, pfin_span;
static int pfin_next;
static int *pfin_free;
static int pfin_nfree, pfin_cap;
static pthread_mutex_t pfin_lock = PTHREAD_MUTEX_INITIALIZER;

/* Small sends nobody waits for (RTS headers, FINs, fragments) and their
 * buffers; and receives of dropped fragments, cancelled if their sender
 * (world) fails. */
typedef struct {
    MPI_Request req;
    void *buf;
    int world;          /* a receive's sender, -1 for a send */
} loose_t;

static loose_t *loose;
static int loose_n, loose_cap;
/* Under MPI_THREAD_MULTIPLE: any thread adds, one at a time tests. */
static pthread_mutex_t loose_lock = PTHREAD_MUTEX_INITIALIZER;

/* Keep a request until the MPI is done with its buffer; world: the
 * sender of a receive, else -1. */
static void loose_add(MPI_Request req, void *buf, int world)
{
    ftw_mt_lock(&loose_lock);
    if (loose_n == loose_cap) {
        int cap = loose_cap ? 2 * loose_cap : 64;
        loose_t *l = realloc(loose, sizeof(*l) * (size_t)cap);

        if (l == NULL) {
            /* Never free what the MPI may still read. */
            ftw_mt_unlock(&loose_lock);
            ftw_warn_sparse("out of memory: a small message is not tracked");
            PMPI_Request_free(&req);
            return;
        }
        loose = l;
        loose_cap = cap;
    }
    loose[loose_n].req = req;
    loose[loose_n].world = world;
    loose[loose_n++].buf = buf;
    ftw_mt_unlock(&loose_lock);
}

void ftw_rndv_loose_add(MPI_Request req, void *buf)
{
    loose_add(req, buf, -1);
}

void ftw_rndv_progress(void)
{
    ftw_xport_progress();
    ftw_rndv_psend_progress();
    if (ftw_mt_trylock(&loose_lock) != 0)
        return;     /* another thread is at it */
    for (int i = 0; i < loose_n;) {
        int flag = 0;

        PMPI_Test(&loose[i].req, &flag, MPI_STATUS_IGNORE);
        if (!flag && loose[i].world >= 0 &&
            ftw_detect_is_failed(loose[i].world)) {
            /* A fragment that will never come: cancelled (a local step
             * for a receive), taken off at a later pass. */
            PMPI_Cancel(&loose[i].req);
            loose[i].world = -1;
        }
        if (flag) {
            ftw_rndv_send_end(loose[i].buf);
            free(loose[i].buf);
            loose[i] = loose[--loose_n];
        } else {
            i++;
        }
    }
    ftw_mt_unlock(&loose_lock);
}

/* Rank 0 draws the cookie, everyone gets it, and rank 0's threshold
 * (*min_p): a receive smaller than the threshold can then meet an RTS
 * only when the message is too large for it, whatever each process's
 * FTW_RNDV_THRESHOLD said (p2p_rndv.c posts such receives without
 * rendezvous state). */
static ftw_status_t cookie_init(size_t *min_p)
{
    uint64_t msg[3];

    if (self_world == 0 &&
        getrandom(cookie, sizeof(cookie), 0) != (ssize_t)sizeof(cookie)) {
        ftw_error("getrandom: %m");
        return FTW_ST_IO_ERROR;
    }
    memcpy(msg, cookie, sizeof(cookie));
    msg[2] = *min_p;
    if (PMPI_Bcast(msg, (int)sizeof(msg), MPI_BYTE, 0,
                   MPI_COMM_WORLD) != MPI_SUCCESS) {
        ftw_error("MPI_Bcast of the rendezvous cookie failed");
        return FTW_ST_MPI_ERROR;
    }
    memcpy(cookie, msg, sizeof(cookie));
    if (msg[2] != *min_p)
        ftw_debug("rendezvous threshold %llu (rank 0's) instead of %zu",
                  (unsigned long long)msg[2], *min_p);
    *min_p = (size_t)msg[2];
    return FTW_OK;
}

/* FTW_RNDV_FIRST, bounded: a larger fragment would wait for its sender's
 * MPI calls, and so would its receiver. */
static void first_init(void)
{
    first_len = ftw_cfg.rndv_first;
    if (first_len > FIRST_MAX) {
        ftw_warn("FTW_RNDV_FIRST=%zu is above %zu: %zu", first_len,
                 FIRST_MAX, FIRST_MAX);
        first_len = FIRST_MAX;
    }
}

/* The tags' spans, as large as the MPI's tags allow.  From FIN_TAG_BASE:
 * the one-shot sends' FIN tags and the persistent ones', then their
 * fragments' (FIN tag + frag_shift), then the replays' (at least an
 * eighth of the tags). */
static void fin_tags_init(void)
{
    int *ub = NULL, flag = 0, top = INT_MAX, room;

    PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    if (flag && ub != NULL)
        top = *ub;
    room = top - FIN_TAG_BASE + 1;
    room -= room / 8;
    fin_tag_span = room / 4 < FIN_TAG_SPAN ? room / 4 : FIN_TAG_SPAN;
    pfin_base = FIN_TAG_BASE + fin_tag_span;
    pfin_span = room / 2 - fin_tag_span < FIN_TAG_SPAN ?
                room / 2 - fin_tag_span : FIN_TAG_SPAN;
    frag_shift = fin_tag_span + pfin_span;
    replay_base = FIN_TAG_BASE + 2 * frag_shift;
    replay_span = top - replay_base + 1;
}

ftw_status_t ftw_rndv_init(void)
{
    ftw_status_t st;
    size_t min;

    ftw_rndv_min = 0;
    if (ftw_cfg.rndv_threshold == 0)
        return FTW_OK;
    min = ftw_cfg.rndv_threshold < FTW_RNDV_MIN_FLOOR ?
          FTW_RNDV_MIN_FLOOR : ftw_cfg.rndv_threshold;
    PMPI_Comm_rank(MPI_COMM_WORLD, &self_world);
    st = cookie_init(&min);
    if (st != FTW_OK)
        return st;
    st = ftw_xport_init();
    if (st != FTW_OK)
        return st;
    if (PMPI_Comm_dup(MPI_COMM_WORLD, &rndv_comm) != MPI_SUCCESS) {
        ftw_error("MPI_Comm_dup for the rendezvous failed");
        ftw_xport_fini();
        return FTW_ST_MPI_ERROR;
    }
    PMPI_Comm_set_errhandler(rndv_comm, MPI_ERRORS_RETURN);
    first_init();
    fin_tags_init();
    ftw_rndv_min = min;
    atomic_store_explicit(&ftw_rndv_on, 1, memory_order_relaxed);
    return FTW_OK;
}

/* The communicator stays: freeing it after failures could hang, and
 * MPI_Finalize releases it. */
void ftw_rndv_fini(void)
{
    for (int i = 0; i < 100 && (loose_n > 0 || ftw_rndv_psend_progress());
         i++)
        ftw_rndv_progress();
    ftw_rndv_min = 0;
    atomic_store_explicit(&ftw_rndv_on, 0, memory_order_relaxed);
}

/* Does dt lay its data out in address order?  Named types, and
 * duplicates, contiguous runs, vectors of positive stride and resized
 * types of such; any other constructor may list blocks out of address
 * order (a struct of two arrays, the second lower in memory, spans its
 * bytes without gaps yet its first bytes are not at its lower bound). */
static int type_in_order(MPI_Datatype dt, int depth)
{
    int ni, na, nd, comb, ints[3] = { 0 }, ok = 0;
    MPI_Aint addrs[2] = { 0 };
    MPI_Datatype inner;

    if (PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) != MPI_SUCCESS)
        return 0;
    if (comb == MPI_COMBINER_NAMED)
        return 1;
    if (depth > 8 || nd != 1 || ni > 3 || na > 2 ||
        (comb != MPI_COMBINER_DUP && comb != MPI_COMBINER_CONTIGUOUS &&
         comb != MPI_COMBINER_VECTOR && comb != MPI_COMBINER_HVECTOR &&
         comb != MPI_COMBINER_RESIZED))
        return 0;
    if (PMPI_Type_get_contents(dt, ni, na, nd, ints, addrs, &inner) !=
        MPI_SUCCESS)
        return 0;
    if ((comb == MPI_COMBINER_VECTOR && ints[2] > 0) ||
        (comb == MPI_COMBINER_HVECTOR && addrs[0] > 0) ||
        comb == MPI_COMBINER_DUP || comb == MPI_COMBINER_CONTIGUOUS ||
        comb == MPI_COMBINER_RESIZED)
        ok = type_in_order(inner, depth + 1);
    if (PMPI_Type_get_envelope(inner, &ni, &na, &nd, &comb) == MPI_SUCCESS &&
        comb != MPI_COMBINER_NAMED)
        PMPI_Type_free(&inner);
    return ok;
}

int ftw_rndv_contig(MPI_Count count, MPI_Datatype dt, MPI_Aint *lb_p)
{
    MPI_Count size, lb, extent, tlb, textent;

    if (PMPI_Type_size_x(dt, &size) != MPI_SUCCESS ||
        PMPI_Type_get_extent_x(dt, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent_x(dt, &tlb, &textent) != MPI_SUCCESS)
        return 0;
    if (textent != size || (count > 1 && extent != size) ||
        !type_in_order(dt, 0))
        return 0;
    *lb_p = (MPI_Aint)tlb;
    return 1;
}

ftw_status_t ftw_rndv_replay(void *buf, MPI_Count n, MPI_Comm *comm_p,
                             int *rank_p, int *tag_p)
{
    static _Atomic uint64_t seq;
    int tag = replay_base +
              (int)(atomic_fetch_add_explicit(&seq, 1, memory_order_relaxed) %
                    (uint64_t)replay_span);
    MPI_Request req;

    if (ftw_isend_any(0, buf, n, MPI_BYTE, self_world, tag, rndv_comm,
                      &req) != MPI_SUCCESS) {
        ftw_error("MPI_Isend of a probed message to self failed");
        free(buf);
        return FTW_ST_MPI_ERROR;
    }
    ftw_rndv_loose_add(req, buf);
    ftw_stat_add(FTW_STAT_RNDV_REPLAYED, 1);
    *comm_p = rndv_comm;
    *rank_p = self_world;
    *tag_p = tag;
    return FTW_OK;
}

/* The owned block of a send: the FIN word, then (non-contiguous data)
 * the packed copy, whose address *addr_p gets. */
static ftw_status_t send_owned(const void *buf, MPI_Count count,
                               MPI_Datatype dt, MPI_Count size,
                               void **owned_p, uint64_t *addr_p)
{
    MPI_Aint lb;
    MPI_Count pos = 0;
    char *owned;

    if (ftw_rndv_contig(count, dt, &lb)) {
        owned = calloc(1, sizeof(uint64_t));
        *addr_p = (uint64_t)(uintptr_t)((const char *)buf + lb);
    } else {
        if (!ftw_rndv_packable(dt))
            return FTW_ST_UNSUPPORTED;
        owned = malloc(sizeof(uint64_t) + (size_t)size);
        *addr_p = (uint64_t)(uintptr_t)(owned + sizeof(uint64_t));
        if (owned != NULL &&
            ftw_pack(buf, count, dt, owned + sizeof(uint64_t), size, &pos,
                     MPI_COMM_WORLD) != MPI_SUCCESS) {
            ftw_error("cannot pack %lld bytes for a rendezvous send",
                      (long long)size);
            free(owned);
            return FTW_ST_INVALID_PARAM;
        }
    }
    if (owned == NULL) {
        ftw_error("out of memory for a rendezvous send of %lld bytes",
                  (long long)size);
        return FTW_ST_NO_MEMORY;
    }
    *owned_p = owned;
    return FTW_OK;
}

/* A copy of the first bytes of a message (rts->size bytes at addr) to
 * send right after its RTS, their number in rts->first;
 * NULL (first 0) when none go.  A copy: the fragment's send may outlive
 * the send it belongs to (its FIN can come before the MPI lets go of it),
 * and a persistent send's next round changes the data. */
static void *frag_copy(ftw_rts_t *rts, uint64_t addr)
{
    size_t n = first_len;
    void *copy;

    rts->first = 0;
    if (n == 0)
        return NULL;
    if (n > rts->size)
        n = (size_t)rts->size;
    copy = malloc(n);
    if (copy == NULL)
        return NULL;    /* the receiver pulls it all */
    memcpy(copy, (const void *)(uintptr_t)addr, n);
    rts->first = (int32_t)n;
    return copy;
}

/* Send the fragment rts announced (its first rts->first bytes, at data)
 * to world rank world; owned (or NULL) is freed once the MPI is done. */
static ftw_status_t frag_isend(const ftw_rts_t *rts, const void *data,
                               void *owned, int world)
{
    MPI_Request req;

    if (PMPI_Isend(data, rts->first, MPI_BYTE, world,
                   rts->fin_tag + frag_shift, rndv_comm, &req) != MPI_SUCCESS)
        return FTW_ST_MPI_ERROR;
    loose_add(req, owned, -1);
    return FTW_OK;
}

/* A round no transport can expose now (a verbs QP being reconnected,
 * say), pushed whole as its fragment straight from the data (rts->first
 * covers it all): the receiver has every byte before it sends the FIN,
 * so the MPI reads none of them after the round ends. */
static ftw_status_t push_send(const ftw_rts_t *rts, uint64_t addr, int world)
{
    return frag_isend(rts, (const void *)(uintptr_t)addr, NULL, world);
}

/* Send the first fragment its RTS announced, from its copy. */
static void frag_send(const ftw_rts_t *rts, void *copy, int world)
{
    if (copy == NULL)
        return;
    ftw_inject(FTW_INJECT_FRAG);
    if (frag_isend(rts, copy, copy, world) != FTW_OK) {
        ftw_error("the first fragment to world rank %d failed: its "
                  "receiver waits for it", world);
        free(copy);
    }
}

ftw_status_t ftw_rndv_send_start(const void *buf, MPI_Count count,
                                 MPI_Datatype dt, MPI_Count size, int world,
                                 int xport, int tag, MPI_Comm native,
                                 int npeer, ftw_rndv_send_t *s_p)
{
    ftw_rts_t *rts;
    MPI_Request rts_req;
    ftw_rndv_send_t s;
    uint64_t addr;
    ftw_status_t st;
    void *frag;

    ftw_rndv_progress();
    st = send_owned(buf, count, dt, size, &s.owned, &addr);
    if (st != FTW_OK)
        return st;
    rts = malloc(sizeof(*rts));
    if (rts == NULL)
        goto err_free_owned;
    *rts = (ftw_rts_t){ .cookie = { cookie[0], cookie[1] },
                        .size = (uint64_t)size, .addr = addr,
                        .pid = ftw_xport_self_pid(), .world = self_world,
                        .fin_tag = FIN_TAG_BASE +
                                   (int)(atomic_fetch_add_explicit(
                                             &fin_seq, 1,
                                             memory_order_relaxed) %
                                         (unsigned)fin_tag_span),
                        .xport = xport };
    st = ftw_xport_ops(xport)->expose(world, addr, (size_t)size, s.owned,
                                      &rts->key);
    if (st == FTW_ST_UNSUPPORTED && xport == FTW_XPORT_ID_VERBS) {
        /* Its QP is being reconnected: this one goes through the MPI. */
        free(rts);
        free(s.owned);
        return FTW_ST_UNSUPPORTED;
    }
    if (st != FTW_OK) {
        if (xport != FTW_XPORT_ID_SHM)
            goto err_free_rts;
        /* No segment (out of memory, memfds): cma needs no exposure. */
        rts->xport = xport = FTW_XPORT_ID_CMA;
        rts->key = 0;
    }
    frag = frag_copy(rts, addr);
    if (PMPI_Irecv(s.owned, 1, MPI_UINT64_T, world, rts->fin_tag, rndv_comm,
                   &s.fin_req) != MPI_SUCCESS)
        goto err_release;
    if (PMPI_Isend(rts, FTW_RTS_SIZE, MPI_BYTE, npeer, tag, native,
                   &rts_req) != MPI_SUCCESS)
        goto err_cancel_fin;
    ftw_rndv_loose_add(rts_req, rts);
    frag_send(rts, frag, world);
    *s_p = s;
    return FTW_OK;

err_cancel_fin:
    PMPI_Cancel(&s.fin_req);
    PMPI_Wait(&s.fin_req, MPI_STATUS_IGNORE);
err_release:
    free(frag);
    ftw_xport_ops(xport)->release(s.owned);
err_free_rts:
    free(rts);
err_free_owned:
    free(s.owned);
    ftw_error("cannot start a rendezvous send to world rank %d", world);
    return FTW_ST_MPI_ERROR;
}

/* A FIN tag for a persistent send, or -1 when all are taken. */
static int pfin_take(void)
{
    int tag = -1;

    ftw_mt_lock(&pfin_lock);
    if (pfin_nfree > 0)
        tag = pfin_free[--pfin_nfree];
    else if (pfin_next < pfin_span)
        tag = pfin_base + pfin_next++;
    ftw_mt_unlock(&pfin_lock);
    return tag;
}

static void pfin_give(int tag)
{
    ftw_mt_lock(&pfin_lock);
    if (pfin_nfree == pfin_cap) {
        int cap = pfin_cap ? 2 * pfin_cap : 64;
        int *f = realloc(pfin_free, sizeof(*f) * (size_t)cap);

        if (f == NULL) {
            ftw_mt_unlock(&pfin_lock);
            return;     /* the tag stays unused */
        }
        pfin_free = f;
        pfin_cap = cap;
    }
    pfin_free[pfin_nfree++] = tag;
    ftw_mt_unlock(&pfin_lock);
}

ftw_status_t ftw_rndv_psend_new(const void *buf, MPI_Count count,
                                MPI_Datatype dt, MPI_Count size, int world,
                                ftw_rndv_psend_t **ps_p, MPI_Request *fin_req)
{
    ftw_rndv_psend_t *ps;
    MPI_Aint lb = 0;
    int contig = ftw_rndv_contig(count, dt, &lb), tag;

    if (!contig && !ftw_rndv_packable(dt))
        return FTW_ST_UNSUPPORTED;
    tag = pfin_take();
    if (tag < 0)
        return FTW_ST_UNSUPPORTED;      /* the MPI's own send, then */
    ps = calloc(1, sizeof(*ps) + (contig ? 0 : (size_t)size));
    if (ps == NULL) {
        pfin_give(tag);
        ftw_error("out of memory for a persistent rendezvous send of %lld "
                  "bytes", (long long)size);
        return FTW_ST_NO_MEMORY;
    }
    *ps = (ftw_rndv_psend_t){ .buf = buf, .count = count, .size = size,
                              .dt = dt, .lb = lb, .world = world,
                              .fin_tag = tag };
    /* The program may free its type while the request lives. */
    if (!contig) {
        ps->packed = (char *)(ps + 1);
        if (PMPI_Type_dup(dt, &ps->dt) != MPI_SUCCESS)
            goto err;
    }
    if (PMPI_Recv_init(&ps->fin, 1, MPI_UINT64_T, world, tag, rndv_comm,
                       fin_req) != MPI_SUCCESS) {
        if (!contig)
            PMPI_Type_free(&ps->dt);
        goto err;
    }
    *ps_p = ps;
    return FTW_OK;

err:
    pfin_give(tag);
    free(ps);
    ftw_error("cannot make a persistent rendezvous send to world rank %d",
              world);
    return FTW_ST_MPI_ERROR;
}

ftw_status_t ftw_rndv_psend_post(ftw_rndv_psend_t *ps, int xport,
                                 MPI_Comm native, int npeer,
                                 MPI_Request *fin_req)
{
    ftw_rts_t *rts;
    MPI_Request rts_req;
    uint64_t addr;
    MPI_Count pos = 0;
    ftw_status_t st;
    void *frag;
    int push = 0;

    ftw_rndv_progress();
    ftw_rndv_send_end(ps);      /* the last round's exposure, if any */
    if (ps->packed != NULL) {
        if (ftw_pack(ps->buf, ps->count, ps->dt, ps->packed, ps->size, &pos,
                     MPI_COMM_WORLD) != MPI_SUCCESS) {
            ftw_error("cannot pack %lld bytes for a rendezvous send",
                      (long long)ps->size);
            return FTW_ST_INVALID_PARAM;
        }
        addr = (uint64_t)(uintptr_t)ps->packed;
    } else {
        addr = (uint64_t)(uintptr_t)((const char *)ps->buf + ps->lb);
    }
    rts = malloc(sizeof(*rts));
    if (rts == NULL) {
        ftw_error("out of memory for a rendezvous send's RTS");
        return FTW_ST_NO_MEMORY;
    }
    *rts = (ftw_rts_t){ .cookie = { cookie[0], cookie[1] },
                        .size = (uint64_t)ps->size, .addr = addr,
                        .pid = ftw_xport_self_pid(), .world = self_world,
                        .fin_tag = ps->fin_tag, .xport = xport };
    st = FTW_ST_UNSUPPORTED;
    if (xport != FTW_XPORT_ID_NATIVE && !ftw_inject_fails(FTW_INJECT_EXPOSE))
        st = ftw_xport_ops(xport)->expose(ps->world, addr, (size_t)ps->size,
                                          ps, &rts->key);
    if (st != FTW_OK && st != FTW_ST_UNSUPPORTED &&
        xport == FTW_XPORT_ID_SHM) {
        /* No segment (out of memory, memfds): cma needs no exposure. */
        rts->xport = xport = FTW_XPORT_ID_CMA;
        rts->key = 0;
    } else if (st == FTW_ST_UNSUPPORTED && rts->size <= INT_MAX) {
        /* Its request is the FIN receive, so this round cannot become
         * the MPI's own send: it goes whole after its RTS. */
        push = 1;
        rts->xport = xport = FTW_XPORT_ID_NATIVE;
    } else if (st != FTW_OK) {
        goto err_free_rts;
    }
    ps->fin = FTW_FIN_DONE;
    frag = push ? NULL : frag_copy(rts, addr);
    if (push)
        rts->first = (int32_t)rts->size;
    if (PMPI_Start(fin_req) != MPI_SUCCESS)
        goto err_release;
    if (push && push_send(rts, addr, ps->world) != FTW_OK)
        goto err_cancel_fin;
    if (PMPI_Isend(rts, FTW_RTS_SIZE, MPI_BYTE, npeer, ps->tag, native,
                   &rts_req) != MPI_SUCCESS)
        goto err_cancel_fin;
    ftw_rndv_loose_add(rts_req, rts);
    frag_send(rts, frag, ps->world);
    ps->started = 1;
    return FTW_OK;

err_cancel_fin:
    /* Inactive again: nothing was announced. */
    PMPI_Cancel(fin_req);
    PMPI_Wait(fin_req, MPI_STATUS_IGNORE);
err_release:
    free(frag);
    ftw_xport_ops(xport)->release(ps);
err_free_rts:
    free(rts);
    ftw_error("cannot start a rendezvous send to world rank %d", ps->world);
    return FTW_ST_MPI_ERROR;
}

void ftw_rndv_psend_free(ftw_rndv_psend_t *ps)
{
    if (ps == NULL)
        return;
    ftw_rndv_send_end(ps);
    if (!ps->started)
        pfin_give(ps->fin_tag);
    if (ps->packed != NULL)
        PMPI_Type_free(&ps->dt);
    free(ps);
}

void ftw_rndv_send_end(const void *owned)
{
    if (owned != NULL)
        ftw_xport_release(owned);
}

ftw_fin_code_t ftw_rndv_fin_code(const void *owned)
{
    uint64_t code;

    memcpy(&code, owned, sizeof(code));
    return (ftw_fin_code_t)code;
}

int ftw_rndv_is_rts(const void *hdr, MPI_Count nbytes)
{
    return nbytes == FTW_RTS_SIZE && memcmp(hdr, cookie, sizeof(cookie)) == 0;
}

/* Pull the len bytes at addr of rts's sender into dst with transport
 * x, a chunk at a time, checking the sender between chunks (the detector
 * may know of its death before a read fails). */
static ftw_status_t pull_chunked(const ftw_rts_t *rts,
                                 const ftw_xport_ops_t *x,
                                 const ftw_xport_src_t *src, uint64_t addr,
                                 char *dst, size_t len)
{
    size_t chunk = ftw_cfg.rndv_chunk ? ftw_cfg.rndv_chunk : len;

    for (size_t off = 0; off < len;) {
        size_t n = len - off < chunk ? len - off : chunk;
        ftw_status_t st;

        ftw_inject(FTW_INJECT_PULL);
        ftw_inject_pulled(rts->world, rts->pid);
        if (ftw_detect_is_failed(rts->world))
            return FTW_ST_PEER_FAILED;
        st = x->pull(src, addr + off, dst + off, n);
        if (st != FTW_OK)
            return st;
        off += n;
    }
    return FTW_OK;
}

/* Pull bytes [off, off + len) of the message rts announces into dst;
 * *xport_p: the transport that moved them (nothing to move: rts's).  A
 * transport that pulls whole messages (shm's pipeline checks the sender
 * and injects faults at the same chunk boundaries as the others) does it
 * in one call; when it cannot start (shm: no segment, another thread
 * pulling), its fallback does (cma).  The others read chunk by chunk
 * (cma: process_vm_readv, verbs: RDMA READ). */
static ftw_status_t rndv_pull(const ftw_rts_t *rts, size_t off, char *dst,
                              size_t len, int *xport_p)
{
    ftw_xport_src_t src = { .world = rts->world, .pid = rts->pid,
                            .key = rts->key };
    const ftw_xport_ops_t *x = ftw_xport_ops(rts->xport);
    uint64_t addr = rts->addr + off;
    ftw_status_t st;

    *xport_p = rts->xport;
    if (len == 0)
        return FTW_OK;      /* all in the fragment, watched while awaited */
    if (x->pulls_whole) {
        st = x->pull(&src, addr, dst, len);
        if (st != FTW_ST_UNSUPPORTED)
            return st;
        *xport_p = x->fallback;
        x = ftw_xport_ops(x->fallback);
    }
    return pull_chunked(rts, x, &src, addr, dst, len);
}

/* The receive of an RTS's first fragment: into the destination's first
 * bytes when it holds them all, else into a buffer of its own. */
typedef struct {
    MPI_Request req;
    char *own;
    int n;              /* its bytes; 0: no fragment */
} frag_t;

/* Post the receive of rts's fragment (dst: take bytes, or NULL).  Posted
 * before the pull, so the MPI can place it meanwhile.  A whole message
 * pushed (push_send) lands in a buffer of its own when one can be had:
 * its sender dying mid-way leaves a receive the MPI may never let go
 * of, and the caller's buffer must not stay in it. */
static ftw_status_t frag_post(const ftw_rts_t *rts, char *dst,
                              MPI_Count take, frag_t *f)
{
    *f = (frag_t){ .req = MPI_REQUEST_NULL,
                   .n = rts->first > 0 ? rts->first : 0 };
    if (f->n == 0)
        return FTW_OK;
    if (dst == NULL || take < f->n || rts->xport == FTW_XPORT_ID_NATIVE)
        f->own = malloc((size_t)f->n);
    if (f->own != NULL || take < f->n)
        dst = f->own;
    if (dst == NULL ||
        PMPI_Irecv(dst, f->n, MPI_BYTE, rts->world,
                   rts->fin_tag + frag_shift, rndv_comm, &f->req) !=
            MPI_SUCCESS) {
        ftw_error("cannot receive the first %d bytes of a message from "
                  "world rank %d", f->n, rts->world);
        free(f->own);
        f->n = 0;
        return FTW_ST_MPI_ERROR;
    }
    return FTW_OK;
}

/* A fragment's sender failed (dead: known already): the receive is
 * cancelled, and kept with its buffer until the MPI lets it go. */
static ftw_status_t frag_cancel(frag_t *f)
{
    PMPI_Cancel(&f->req);
    loose_add(f->req, f->own, -1);
    f->own = NULL;
    return FTW_ST_PEER_FAILED;
}

/* Wait for the fragment, watching its sender (sent right after the RTS
 * and small, it has normally come already) and serving this process's
 * own receivers meanwhile; dead: the pull found the sender gone.  Then
 * the first take bytes of dst get what went to its own buffer. */
static ftw_status_t frag_wait(const ftw_rts_t *rts, frag_t *f, int dead,
                              char *dst, MPI_Count take)
{
    unsigned spins = 0;
    int flag;

    if (f->n == 0)
        return FTW_OK;
    for (;;) {
        if (dead)
            return frag_cancel(f);
        if (PMPI_Test(&f->req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            if (f->req != MPI_REQUEST_NULL)
                PMPI_Request_free(&f->req);
            free(f->own);
            return FTW_ST_MPI_ERROR;
        }
        if (flag)
            break;
        if ((++spins & 255) == 0) {
            ftw_detect_peek();
            dead = ftw_detect_is_failed(rts->world);
        }
        ftw_xport_progress();
        if (spins > 4096 && ftw_idle_sleep)
            ftw_detect_pause();
        else if (spins > 4096)
            sched_yield();
    }
    /* A pushed message the MPI copied across memory: a copy its sender's
     * death cut short completes all the same, over missing bytes. */
    if (atomic_load_explicit(&ftw_cut_count, memory_order_relaxed) &&
        ftw_cut_hit(f->own != NULL ? f->own : dst, f->n, MPI_BYTE)) {
        free(f->own);
        return FTW_ST_PEER_FAILED;
    }
    if (f->own != NULL && dst != NULL)
        memcpy(dst, f->own, (size_t)(take < f->n ? take : f->n));
    free(f->own);
    ftw_stat_add(FTW_STAT_RNDV_FIRST_FRAG, 1);
    return FTW_OK;
}

/* Tell the sender how its message ended. */
static void fin_send(const ftw_rts_t *rts, ftw_fin_code_t code)
{
    uint64_t *word = malloc(sizeof(*word));
    MPI_Request req;

    if (word == NULL) {
        ftw_error("out of memory for a FIN: world rank %d will wait",
                  rts->world);
        return;
    }
    *word = (uint64_t)code;
    if (PMPI_Isend(word, 1, MPI_UINT64_T, rts->world, rts->fin_tag,
                   rndv_comm, &req) != MPI_SUCCESS) {
        ftw_error("FIN to world rank %d failed", rts->world);
        free(word);
        return;
    }
    ftw_rndv_loose_add(req, word);
}

void ftw_rndv_refuse(const ftw_rts_t *rts)
{
    fin_send(rts, FTW_FIN_FAILED);
    ftw_rndv_drop(rts, FTW_RTS_SIZE);
}

void ftw_rndv_drop(const void *hdr, MPI_Count n)
{
    MPI_Request req;
    ftw_rts_t rts;
    char *buf;

    if (!atomic_load_explicit(&ftw_rndv_on, memory_order_relaxed) ||
        !ftw_rndv_is_rts(hdr, n))
        return;
    memcpy(&rts, hdr, sizeof(rts));
    if (rts.first <= 0 || ftw_detect_is_failed(rts.world))
        return;
    buf = malloc((size_t)rts.first);
    if (buf == NULL ||
        PMPI_Irecv(buf, rts.first, MPI_BYTE, rts.world,
                   rts.fin_tag + frag_shift, rndv_comm, &req) != MPI_SUCCESS) {
        ftw_warn_sparse("the first fragment of a dropped message from "
                        "world rank %d stays unreceived", rts.world);
        free(buf);
        return;
    }
    loose_add(req, buf, rts.world);
}

/* Where the pulled bytes go: the buffer itself if contiguous, else a
 * bounce buffer to unpack from (*bounce_p). */
static char *recv_target(void *buf, MPI_Count count, MPI_Datatype dt,
                         MPI_Count take, char **bounce_p)
{
    MPI_Aint lb;

    *bounce_p = NULL;
    if (ftw_rndv_contig(count, dt, &lb))
        return (char *)buf + lb;
    *bounce_p = malloc(take > 0 ? (size_t)take : 1);
    if (*bounce_p == NULL)
        ftw_error("out of memory for %lld bytes of a rendezvous receive",
                  (long long)take);
    return *bounce_p;
}

/* MPICH refuses a NULL buffer in MPI_Pack and MPI_Unpack even for a type
 * of absolute addresses (MPI_BOTTOM): such a call goes through a struct
 * type shifted one byte down, at address 1. */
static int bottom_type(const void **buf, MPI_Count *count, MPI_Datatype *dt,
                       MPI_Datatype *tmp)
{
    int rc;

    *tmp = MPI_DATATYPE_NULL;
    if (*buf != MPI_BOTTOM || *count == 0)
        return MPI_SUCCESS;
#ifdef FTW_HAVE_MPI_TYPE_CREATE_STRUCT_C
    MPI_Count len = *count, disp = -1;

    rc = PMPI_Type_create_struct_c(1, &len, &disp, dt, tmp);
#else
    MPI_Aint disp = -1;
    int len = (int)*count;      /* pack_run's calls fit an int */

    rc = PMPI_Type_create_struct(1, &len, &disp, dt, tmp);
#endif
    if (rc == MPI_SUCCESS && (rc = PMPI_Type_commit(tmp)) != MPI_SUCCESS)
        PMPI_Type_free(tmp);
    if (rc != MPI_SUCCESS)
        return rc;
    *buf = (const char *)1;
    *count = 1;
    *dt = *tmp;
    return MPI_SUCCESS;
}

/* One MPI_Pack (unpack 0) or MPI_Unpack of count dt at buf against the
 * size packed bytes at packed, from *pos on: the large-count call where
 * the MPI has it, else the int one, every number fitting an int. */
static int pack_once(int unpack, const void *buf, MPI_Count count,
                     MPI_Datatype dt, void *packed, MPI_Count size,
                     MPI_Count *pos, MPI_Comm comm)
{
    MPI_Datatype tmp;
    int rc = bottom_type(&buf, &count, &dt, &tmp);

    if (rc != MPI_SUCCESS)
        return rc;
#ifdef FTW_HAVE_MPI_PACK_C
    rc = unpack ? PMPI_Unpack_c(packed, size, pos, (void *)buf, count, dt,
                                comm)
                : PMPI_Pack_c(buf, count, dt, packed, size, pos, comm);
#else
    if (count > INT_MAX || size > INT_MAX) {
        rc = MPI_ERR_COUNT;
    } else {
        int p = (int)*pos;

        rc = unpack ? PMPI_Unpack(packed, (int)size, &p, (void *)buf,
                                  (int)count, dt, comm)
                    : PMPI_Pack(buf, (int)count, dt, packed, (int)size, &p,
                                comm);
        *pos = p;
    }
#endif
    if (tmp != MPI_DATATYPE_NULL)
        PMPI_Type_free(&tmp);
    return rc;
}

#ifdef FTW_HAVE_MPI_PACK_C
int ftw_rndv_packable(MPI_Datatype dt)
{
    (void)dt;
    return 1;
}

static int pack_run(int unpack, const void *buf, MPI_Count count,
                    MPI_Datatype dt, void *packed, MPI_Count size,
                    MPI_Count *pos, MPI_Comm comm)
{
    return pack_once(unpack, buf, count, dt, packed, size, pos, comm);
}
#else
/* How many dt elements INT_MAX bytes hold (0: not one). */
static MPI_Count pack_group(MPI_Datatype dt)
{
    MPI_Count size = 0;

    if (PMPI_Type_size_x(dt, &size) != MPI_SUCCESS)
        return 0;
    return size > 0 ? INT_MAX / size : INT_MAX;
}

int ftw_rndv_packable(MPI_Datatype dt)
{
    return pack_group(dt) > 0;
}

/* pack_once over any count, without the large-count calls: in groups of
 * whole elements of at most INT_MAX bytes, each against its own stretch
 * of the packed bytes (the packed form of a job of one architecture is
 * the elements' bytes in order, a group's after the one before). */
static int pack_run(int unpack, const void *buf, MPI_Count count,
                    MPI_Datatype dt, void *packed, MPI_Count size,
                    MPI_Count *pos, MPI_Comm comm)
{
    MPI_Count group = pack_group(dt), lb, extent;
    int rc;

    if (count <= group && size <= INT_MAX)
        return pack_once(unpack, buf, count, dt, packed, size, pos, comm);
    if (group == 0)
        return MPI_ERR_COUNT;
    if ((rc = PMPI_Type_get_extent_x(dt, &lb, &extent)) != MPI_SUCCESS)
        return rc;
    for (MPI_Count done = 0; done < count; done += group) {
        MPI_Count n = count - done < group ? count - done : group, p = 0;
        MPI_Count room = size - *pos < INT_MAX ? size - *pos : INT_MAX;

        rc = pack_once(unpack, (const char *)buf + done * extent, n, dt,
                       (char *)packed + *pos, room, &p, comm);
        if (rc != MPI_SUCCESS)
            return rc;
        *pos += p;
    }
    return MPI_SUCCESS;
}
#endif

int ftw_pack(const void *buf, MPI_Count count, MPI_Datatype dt, void *out,
             MPI_Count outsize, MPI_Count *pos, MPI_Comm comm)
{
    return pack_run(0, buf, count, dt, out, outsize, pos, comm);
}

int ftw_unpack_bytes(const char *src, MPI_Count n, void *buf,
                     MPI_Datatype dt)
{
    MPI_Count size, whole, rem, pos = 0, epos = 0, lb, extent;
    char *elem, *tmp;
    int rc;

    if (n <= 0)
        return MPI_SUCCESS;
    if ((rc = PMPI_Type_size_x(dt, &size)) != MPI_SUCCESS)
        return rc;
    if (size == 0)
        return MPI_ERR_COUNT;
    whole = n / size;
    rem = n % size;
    if (whole > 0 &&
        (rc = pack_run(1, buf, whole, dt, (void *)src, n, &pos,
                       MPI_COMM_WORLD)) != MPI_SUCCESS)
        return rc;
    if (rem == 0)
        return MPI_SUCCESS;
    /* MPI_Unpack moves whole elements: the last, partial one is the
     * element as the buffer holds it with its first rem bytes replaced. */
    if ((rc = PMPI_Type_get_extent_x(dt, &lb, &extent)) != MPI_SUCCESS)
        return rc;
    elem = (char *)buf + whole * extent;
    tmp = malloc((size_t)size);
    if (tmp == NULL)
        return MPI_ERR_NO_MEM;
    rc = pack_once(0, elem, 1, dt, tmp, size, &epos, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS) {
        memcpy(tmp, src + pos, (size_t)rem);
        epos = 0;
        rc = pack_once(1, elem, 1, dt, tmp, size, &epos, MPI_COMM_WORLD);
    }
    free(tmp);
    return rc;
}

/* Unpack the take bytes of bounce into dt at buf. */
static ftw_status_t recv_unpack(const char *bounce, MPI_Count take,
                                void *buf, MPI_Datatype dt)
{
    if (ftw_unpack_bytes(bounce, take, buf, dt) != MPI_SUCCESS) {
        ftw_error("cannot unpack %lld bytes of a rendezvous receive",
                  (long long)take);
        return FTW_ST_INVALID_PARAM;
    }
    return FTW_OK;
}

/* The end of a receive: FIN unless the sender died, counters. */
static ftw_status_t recv_end(const ftw_rts_t *rts, ftw_status_t st,
                             MPI_Count take, int xport)
{
    if (st == FTW_ST_PEER_FAILED) {
        ftw_stat_add(FTW_STAT_RNDV_ABORTED, 1);
        ftw_info("world rank %d failed during a pull", rts->world);
        return st;
    }
    if (st != FTW_OK) {
        fin_send(rts, FTW_FIN_FAILED);
        return st;
    }
    if (xport == FTW_XPORT_ID_NATIVE) {
        ftw_stat_add(FTW_STAT_RNDV_PUSHED, 1);
    } else if (xport == FTW_XPORT_ID_SHM) {
        ftw_stat_add(FTW_STAT_RNDV_SHM, 1);
        ftw_stat_add(FTW_STAT_RNDV_SHM_BYTES, (uint64_t)take);
    } else if (xport == FTW_XPORT_ID_VERBS) {
        ftw_stat_add(FTW_STAT_RNDV_VERBS, 1);
        ftw_stat_add(FTW_STAT_RNDV_VERBS_BYTES, (uint64_t)take);
    } else {
        ftw_stat_add(FTW_STAT_RNDV_CMA, 1);
        ftw_stat_add(FTW_STAT_RNDV_CMA_BYTES, (uint64_t)take);
    }
    if ((uint64_t)take < rts->size) {
        ftw_stat_add(FTW_STAT_RNDV_TRUNCATED, 1);
        fin_send(rts, FTW_FIN_TRUNCATED);
        return FTW_ST_TRUNCATED;
    }
    fin_send(rts, FTW_FIN_DONE);
    return FTW_OK;
}

ftw_status_t ftw_rndv_recv(const ftw_rts_t *rts, void *buf, MPI_Count count,
                           MPI_Datatype dt, MPI_Count *got_p)
{
    MPI_Count size = 0, take, first;
    char *dst, *bounce = NULL;
    int xport = rts->xport;
    ftw_status_t st, fst;
    frag_t f;

    if (count > 0 && PMPI_Type_size_x(dt, &size) != MPI_SUCCESS)
        size = 0;
    take = (MPI_Count)rts->size < count * size ? (MPI_Count)rts->size
                                               : count * size;
    dst = take > 0 ? recv_target(buf, count, dt, take, &bounce) : NULL;
    /* Its fragment is taken whatever happens, its sender alive: left in
     * the MPI, it would match the fragment receive of a later message
     * under the same FIN tag. */
    st = frag_post(rts, dst, take, &f);
    first = f.n < take ? f.n : take;
    if (take > 0 && dst == NULL)
        st = FTW_ST_NO_MEMORY;
    else if (st == FTW_OK)
        st = rndv_pull(rts, (size_t)first, take > first ? dst + first : dst,
                       (size_t)(take - first), &xport);
    fst = frag_wait(rts, &f, st == FTW_ST_PEER_FAILED, dst, take);
    if (st == FTW_OK)
        st = fst;
    if (st == FTW_OK && bounce != NULL)
        st = recv_unpack(bounce, take, buf, dt);
    if (take > 0)
        free(bounce);
    *got_p = take;
    return recv_end(rts, st, take, xport);
}
