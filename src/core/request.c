/* The request table and the graveyard. */
#define _GNU_SOURCE
#include "core/request.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "detect/detect.h"
#include "core/lock.h"
#include "util/config.h"
#include "util/log.h"
#include "util/stats.h"

_Atomic int ftw_req_count;
_Atomic int ftw_req_early_count;
_Atomic int ftw_req_testall_unsafe;
int ftw_threaded;       /* MPI_THREAD_MULTIPLE: the table needs its lock */

static const ftw_req_ops_t *req_ops;

void ftw_req_ops_set(const ftw_req_ops_t *ops)
{
    req_ops = ops;
}


/*
 * The table maps a native handle to its entry: open addressing with
 * linear probing over a power-of-two array of (handle, entry) slots, at
 * most half full, grown by doubling and never shrunk; a deletion shifts
 * the rest of its run back, so there are no tombstones.  Request handles
 * are pointers (Open MPI) or small integers (MPICH): a multiplicative
 * hash spreads both.  A window of requests posted and completed again and
 * again touches one or two cache lines per handle and allocates nothing.
 */
typedef struct {
    MPI_Request key;
    ftw_req_t *e;           /* NULL: empty */
} req_slot_t;

static req_slot_t *req_slots;
static size_t req_mask;         /* slots - 1, when req_slots exists */
static unsigned req_shift;      /* 64 - log2(slots) */
static ftw_req_t *req_free_list;   /* recycled entries, linked by next */
/* Recursive: a completion call holds it (ftw_req_hold) while the MPI may
 * call back into ftwrap (an application's error handler). */
static pthread_mutex_t req_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

/*
 * Under MPI_THREAD_MULTIPLE a completion call and the removal of the
 * records of the requests it freed form one section under the table's
 * lock.  Otherwise, once the MPI freed a handle, another thread could be
 * given the same handle for a new request and record it before the
 * first thread removed the old record (which would then remove the new
 * one), and a drain could cancel a freed request.  The records of the
 * requests a thread's completion call freed leave the table in that
 * section for the thread's own list (req_retired), where its lookups and
 * its removal find them; no other thread can see them, the handle being
 * dead.
 */
static FTW_TLS ftw_req_t *req_retired;

/*
 * Without MPI_THREAD_MULTIPLE the fast paths record into a log instead:
 * an array of records appended in post order, taken back out by the
 * completion calls (which mostly finish requests in post order: the
 * search starts where the last one was found), so a window of small
 * messages costs a store of each record and a compare to take it, no
 * hashing.  Every other use of the table first moves the log's live
 * records into it (req_log_flush, run by req_table_lock), and so does a
 * full log; the log's records are thus always newer than the table's.
 * Only one thread calls the MPI at a time at these levels, so the log
 * is the process's, not a thread's.  Dead records have a null key.
 */
#define REQ_LOG_MAX 256
static ftw_req_t req_log[REQ_LOG_MAX];
static int req_log_n;       /* records appended, dead ones included */
static int req_log_live;    /* live ones */
static int req_log_hint;    /* where the next search starts */

static void req_log_flush(void);
static void req_insert_locked(ftw_req_t *e);

/* The home slot of req: the top bits of a multiplicative hash. */
static inline size_t req_hash(MPI_Request req)
{
    uint64_t k = 0;

    memcpy(&k, &req, sizeof(req) < 8 ? sizeof(req) : 8);
    return (size_t)((k * 0x9E3779B97F4A7C15ull) >> req_shift);
}

/* The slot holding req, or -1. */
static inline long req_slot_find(MPI_Request req)
{
    if (req_slots == NULL)
        return -1;
    for (size_t i = req_hash(req) & req_mask;; i = (i + 1) & req_mask) {
        if (req_slots[i].e == NULL)
            return -1;
        if (req_slots[i].key == req)
            return (long)i;
    }
}

/* Room for one more entry; 0 if out of memory. */
static int req_slots_room(void)
{
    size_t n = req_slots != NULL ? req_mask + 1 : 0, cap;
    req_slot_t *old = req_slots, *t;

    if ((size_t)(ftw_req_count + 1) * 2 <= n)
        return 1;
    cap = n ? 2 * n : 128;
    t = calloc(cap, sizeof(*t));
    if (t == NULL)
        return 0;
    req_slots = t;
    req_mask = cap - 1;
    req_shift = 64;
    for (size_t c = cap; c > 1; c >>= 1)
        req_shift--;
    for (size_t i = 0; i < n; i++) {
        size_t j;

        if (old[i].e == NULL)
            continue;
        for (j = req_hash(old[i].key) & req_mask; t[j].e != NULL;
             j = (j + 1) & req_mask)
            ;
        t[j] = old[i];
    }
    free(old);
    return 1;
}

/* Empty slot i and move back the entries after it that belong before. */
static void req_slot_clear(size_t i)
{
    size_t j = i;

    req_slots[i].e = NULL;
    for (;;) {
        size_t k;

        j = (j + 1) & req_mask;
        if (req_slots[j].e == NULL)
            return;
        k = req_hash(req_slots[j].key) & req_mask;
        /* Entry j may move to i unless its home k lies in (i, j]. */
        if (i <= j ? (k > i && k <= j) : (k > i || k <= j))
            continue;
        req_slots[i] = req_slots[j];
        req_slots[j].e = NULL;
        i = j;
    }
}

/* The table took (+1) or lost (-1) entry e. */
static inline void req_early_note(const ftw_req_t *e, int delta)
{
    if (ftw_unlikely(e->info.early))
        atomic_fetch_add_explicit(&ftw_req_early_count, delta,
                                  memory_order_relaxed);
}

/* Only a process whose threads may call MPI at once pays for the lock. */
static inline void req_table_lock(void)
{
    ftw_mt_lock(&req_lock);
    if (ftw_unlikely(req_log_n != 0))
        req_log_flush();
}

static inline void req_table_unlock(void)
{
    ftw_mt_unlock(&req_lock);
}

/* The record of handle req on this thread's retired list, or NULL;
 * *prev_p gets the link pointing to it. */
static ftw_req_t *req_retired_find(MPI_Request req, ftw_req_t ***prev_p)
{
    for (ftw_req_t **pp = &req_retired; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->key == req) {
            *prev_p = pp;
            return *pp;
        }
    }
    return NULL;
}

/* Move req's record, if any, from the table to this thread's retired
 * list (the table locked). */
static void req_retire_locked(MPI_Request req)
{
    long at = req_slot_find(req);
    ftw_req_t *e;

    if (at < 0)
        return;
    e = req_slots[at].e;
    req_slot_clear((size_t)at);
    ftw_gate_add(ftw_req_count, -1);
    req_early_note(e, -1);
    e->next = req_retired;
    req_retired = e;
}

static void req_retire_set_locked(int n, const MPI_Request before[],
                                  const MPI_Request after[])
{
    for (int i = 0; i < n; i++)
        if (before[i] != MPI_REQUEST_NULL && after[i] == MPI_REQUEST_NULL)
            req_retire_locked(before[i]);
}

int ftw_req_test_mt(MPI_Request *req, int *flag, MPI_Status *st)
{
    MPI_Request before = *req;
    int rc;

    req_table_lock();
    rc = PMPI_Test(req, flag, st);
    req_retire_set_locked(1, &before, req);
    req_table_unlock();
    return rc;
}

int ftw_req_testall_mt(int n, const MPI_Request before[], MPI_Request reqs[],
                       int *flag, MPI_Status sts[])
{
    int rc;

    req_table_lock();
    rc = PMPI_Testall(n, reqs, flag, sts);
    req_retire_set_locked(n, before, reqs);
    req_table_unlock();
    return rc;
}

int ftw_req_testany_mt(int n, const MPI_Request before[], MPI_Request reqs[],
                       int *index, int *flag, MPI_Status *st)
{
    int rc;

    req_table_lock();
    rc = PMPI_Testany(n, reqs, index, flag, st);
    req_retire_set_locked(n, before, reqs);
    req_table_unlock();
    return rc;
}

int ftw_req_testsome_mt(int n, const MPI_Request before[],
                        MPI_Request reqs[], int *outcount, int indices[],
                        MPI_Status sts[])
{
    int rc;

    req_table_lock();
    rc = PMPI_Testsome(n, reqs, outcount, indices, sts);
    req_retire_set_locked(n, before, reqs);
    req_table_unlock();
    return rc;
}

int ftw_req_cancel_once_locked(ftw_req_t *e)
{
    if (e->info.cancelled)
        return 0;
    e->info.cancelled = 1;
    return PMPI_Cancel(&e->key) == MPI_SUCCESS;
}

int ftw_req_cancel_mt(MPI_Request *req)
{
    long at;
    int rc = MPI_SUCCESS;

    req_table_lock();
    at = req_slot_find(*req);
    if (at < 0)
        rc = PMPI_Cancel(req);
    else
        ftw_req_cancel_once_locked(req_slots[at].e);
    req_table_unlock();
    return rc;
}

int ftw_req_free_mt(MPI_Request *req)
{
    MPI_Request before = *req;
    int rc;

    req_table_lock();
    rc = PMPI_Request_free(req);
    req_retire_set_locked(1, &before, req);
    req_table_unlock();
    return rc;
}

/* An entry from the free list or malloc (the table locked); NULL, said,
 * if out of memory. */
static ftw_req_t *req_entry_alloc_locked(void)
{
    ftw_req_t *e = req_free_list;

    if (e != NULL)
        req_free_list = e->next;
    else
        e = malloc(sizeof(*e));
    if (e == NULL)
        ftw_warn_sparse("out of memory: a request will not be watched for "
                        "peer failures");
    return e;
}

/* A free entry for req, the table locked; NULL (unlocked) if out of
 * memory. */
static ftw_req_t *req_entry_get(MPI_Request req)
{
    ftw_req_t *e;

    req_table_lock();
    e = req_entry_alloc_locked();
    if (e == NULL) {
        req_table_unlock();
        return NULL;
    }
    e->key = req;
    return e;
}

static void req_entry_insert(ftw_req_t *e);

/* A send that completed at once has the MPI's shared done handle
 * (ftw_req_is_done): a window of sends would record it again and again
 * under one key, so on the fast path (ftw_req_add_quiet) it is not
 * recorded; elsewhere (a send posted to fail at its completion, say) it
 * is, in the table. */
#if defined(OPEN_MPI)
void *ftw_req_done_handle;
#endif

void ftw_req_init(void)
{
#if defined(OPEN_MPI)
    ftw_req_done_handle = dlsym(RTLD_DEFAULT, "ompi_request_empty");
#endif
}

void ftw_req_add(MPI_Request req, const ftw_reqinfo_t *info)
{
    ftw_req_t *e;

    if (req == MPI_REQUEST_NULL || (e = req_entry_get(req)) == NULL)
        return;
    e->info = *info;
    req_entry_insert(e);
}

/* ---- the log ---------------------------------------------------------- */

/* The log's live records into the table (the table locked).  A record
 * the table cannot take is dropped, as a failed insertion drops it. */
static void req_log_flush(void)
{
    int n = req_log_n;

    req_log_n = 0;      /* first: the insertions below lock nothing */
    for (int i = 0; i < n; i++) {
        ftw_req_t *e;

        if (req_log[i].key == MPI_REQUEST_NULL)
            continue;
        ftw_gate_add(ftw_req_count, -1);    /* the table counts it again */
        if ((e = req_entry_alloc_locked()) == NULL)
            continue;
        e->key = req_log[i].key;
        e->info = req_log[i].info;
        req_insert_locked(e);
    }
    req_log_live = 0;
    req_log_hint = 0;
}

/* A record for req in the log, to fill (NULL: the caller uses the
 * table). */
static inline ftw_req_t *req_log_append(MPI_Request req)
{
    ftw_req_t *e;

    if (ftw_unlikely(ftw_threaded))
        return NULL;
    if (ftw_unlikely(req_log_n == REQ_LOG_MAX))
        req_log_flush();
    e = &req_log[req_log_n++];
    e->key = req;
    req_log_live++;
    ftw_gate_add(ftw_req_count, 1);
    return e;
}

/* The index of req's record in the log, or -1.  The MPI's shared handle
 * of a send that completed at once is never in it. */
static inline int req_log_find(MPI_Request req)
{
    int i = req_log_hint;

    if (ftw_likely(req_log_live == 0) || ftw_req_is_done(req))
        return -1;
    for (int k = 0; k < req_log_n; k++) {
        if (req_log[i].key == req)
            return i;
        if (++i == req_log_n)
            i = 0;
    }
    return -1;
}

/* Nothing in the table itself (the log may hold records). */
static inline int req_table_empty(void)
{
    return ftw_req_count == req_log_live;
}

int ftw_req_table_empty(void)
{
    return req_table_empty();
}

/* Take record i out of the log. */
static inline void req_log_kill(int i)
{
    req_log[i].key = MPI_REQUEST_NULL;
    ftw_gate_add(ftw_req_count, -1);
    if (--req_log_live == 0) {
        req_log_n = 0;
        req_log_hint = 0;
    } else {
        req_log_hint = i + 1 < req_log_n ? i + 1 : 0;
    }
}

/* The fields of a record req_add_quiet does not set, in their empty
 * state, in place. */
static inline void req_info_clear(ftw_reqinfo_t *in)
{
    in->peer2 = FTW_NO_PEER;
    in->failed_at_start = 0;
    in->cancelled = 0;
    in->early = 0;
    in->coll_gen = 0;
    in->cut_seq = 0;
    in->drain_seq = 0;
    in->epoch0 = 0;
    in->p2p_user = NULL;
    in->view = NULL;
    in->p2p_n = 0;
    in->bounce = NULL;
}

/* A record of a request posted on the fast path (nothing moved, no
 * failure known: the fields not given are zero): into the log, or, under
 * MPI_THREAD_MULTIPLE, the table. */
static void req_add_quiet(MPI_Request req, MPI_Comm comm, int peer,
                          int kind, int persistent, unsigned rndv,
                          void *owned, void *buf, MPI_Count count,
                          MPI_Datatype dt)
{
    ftw_req_t *e;

    if ((e = req_log_append(req)) == NULL && (e = req_entry_get(req)) == NULL)
        return;
    req_info_clear(&e->info);
    e->info.comm = comm;
    e->info.peer = peer;
    e->info.kind = (uint8_t)kind;
    e->info.persistent = (uint8_t)persistent;
    e->info.rndv = (uint8_t)rndv;
    e->info.owned = owned;
    e->info.pooled = owned != NULL;
    e->info.buf = buf;
    e->info.count = count;
    e->info.dt = dt;
    if (ftw_unlikely(ftw_threaded))
        req_entry_insert(e);
}

void ftw_req_add_quiet(MPI_Request req, MPI_Comm comm, int peer, int kind,
                       int persistent, void *buf, MPI_Count count,
                       MPI_Datatype dt)
{
    if (req != MPI_REQUEST_NULL && !ftw_req_is_done(req))
        req_add_quiet(req, comm, peer, kind, persistent, 0, NULL, buf, count,
                      dt);
}

void ftw_req_add_rndv_quiet(MPI_Request req, MPI_Comm comm, int peer,
                            void *buf, MPI_Count count, MPI_Datatype dt,
                            int rndv, void *owned)
{
    /* Unrecorded, owned stays: the MPI may write it. */
    if (req != MPI_REQUEST_NULL)
        req_add_quiet(req, comm, peer, FTW_OP_RECV, 0, (unsigned)rndv, owned,
                      buf, count, dt);
}

/* Insert e (the table locked) and unlock.  One probe: the run from the
 * key's home holds the key, if it is there, before its first empty slot
 * (there are no tombstones), which is where a new key goes. */
static void req_entry_insert(ftw_req_t *e)
{
    req_insert_locked(e);
    req_table_unlock();
}

static void req_insert_locked(ftw_req_t *e)
{
    size_t i;

    if (!req_slots_room()) {
        e->next = req_free_list;
        req_free_list = e;
        ftw_warn_sparse("out of memory: a request will not be watched for "
                        "peer failures");
        return;
    }
    for (i = req_hash(e->key) & req_mask; req_slots[i].e != NULL;
         i = (i + 1) & req_mask) {
        ftw_req_t *old = req_slots[i].e;

        if (req_slots[i].key != e->key)
            continue;
        /* The MPI reused a handle whose completion ftwrap did not see:
         * the old entry takes the new record, e goes back to the list. */
        ftw_req_owned_free(old->info.rndv, old->info.owned, old->info.pooled);
        req_early_note(old, -1);
        old->info = e->info;
        req_early_note(old, 1);
        e->next = req_free_list;
        req_free_list = e;
        return;
    }
    req_slots[i].key = e->key;
    req_slots[i].e = e;
    ftw_gate_add(ftw_req_count, 1);
    req_early_note(e, 1);
}

ftw_req_t *ftw_req_find(MPI_Request req)
{
    ftw_req_t *e = NULL, **pp;
    long at;

    if (ftw_unlikely(req_retired != NULL) &&
        (e = req_retired_find(req, &pp)) != NULL)
        return e;
    if (ftw_req_count == 0 || req == MPI_REQUEST_NULL)
        return NULL;
    req_table_lock();
    at = req_slot_find(req);
    if (at >= 0)
        e = req_slots[at].e;
    req_table_unlock();
    return e;
}

int ftw_req_lookup(MPI_Request req, ftw_reqinfo_t *out)
{
    ftw_req_t *e, **pp;
    long at;

    if (ftw_unlikely(req_retired != NULL) &&
        (e = req_retired_find(req, &pp)) != NULL) {
        *out = e->info;
        return 1;
    }
    if (ftw_req_count == 0 || req == MPI_REQUEST_NULL)
        return 0;
    if ((at = req_log_find(req)) >= 0) {
        *out = req_log[at].info;
        return 1;
    }
    if (req_table_empty())
        return 0;
    req_table_lock();
    at = req_slot_find(req);
    if (at >= 0)
        *out = req_slots[at].e->info;
    req_table_unlock();
    return at >= 0;
}

/* Take the record in slot at out of the table (the table locked); its
 * entry goes back to the free list, what it owns stays with the caller. */
static ftw_req_t *req_unlink_locked(long at)
{
    ftw_req_t *e = req_slots[at].e;

    req_slot_clear((size_t)at);
    ftw_gate_add(ftw_req_count, -1);
    req_early_note(e, -1);
    e->next = req_free_list;
    req_free_list = e;
    return e;
}

/* Take e off this thread's retired list (at *pp) back to the free list. */
static ftw_req_t *req_unretire(ftw_req_t **pp)
{
    ftw_req_t *e = *pp;

    *pp = e->next;
    req_table_lock();
    e->next = req_free_list;
    req_free_list = e;
    req_table_unlock();
    return e;
}

int ftw_req_remove(MPI_Request req, ftw_reqinfo_t *out)
{
    ftw_req_t *e, **pp;
    long at;

    if (ftw_unlikely(req_retired != NULL) &&
        (e = req_retired_find(req, &pp)) != NULL) {
        *out = e->info;     /* read before another thread reuses e */
        req_unretire(pp);
        return 1;
    }
    if (ftw_req_count == 0 || req == MPI_REQUEST_NULL)
        return 0;
    if ((at = req_log_find(req)) >= 0) {
        *out = req_log[at].info;
        req_log_kill((int)at);
        return 1;
    }
    if (req_table_empty())
        return 0;
    req_table_lock();
    at = req_slot_find(req);
    if (at >= 0)
        *out = req_unlink_locked(at)->info;
    req_table_unlock();
    return at >= 0;
}

/*
 * The per-thread free list of request blocks.  A block a thread releases
 * goes to its own list (a request may end on another thread than the one
 * that posted it); a list keeps at most BLOCKS_KEPT, the rest is freed.
 */
#define BLOCKS_KEPT 256

typedef struct req_block {
    struct req_block *next;
} req_block_t;

static FTW_TLS req_block_t *blocks;
static FTW_TLS int blocks_n;

void *ftw_req_block_get(void)
{
    req_block_t *b = blocks;

    if (ftw_likely(b != NULL)) {
        blocks = b->next;
        blocks_n--;
        return b;
    }
    return malloc(FTW_REQ_BLOCK);
}

void ftw_req_block_put(void *p)
{
    req_block_t *b = p;

    if (b == NULL)
        return;
    if (blocks_n >= BLOCKS_KEPT) {
        free(b);
        return;
    }
    b->next = blocks;
    blocks = b;
    blocks_n++;
}

void ftw_req_owned_free(unsigned rndv, void *owned, int pooled)
{
    if (owned == NULL)
        return;
    if (req_ops != NULL) {
        req_ops->owned_free(rndv, owned, pooled);
    } else if (pooled) {
        ftw_req_block_put(owned);
    } else {
        free(owned);
    }
}

/* One thread, a completion finishing req at once: its record, in place
 * in the log (NULL: not there, or some request is retired), *at_p its
 * index for ftw_req_log_drop. */
ftw_reqinfo_t *ftw_req_log_at(MPI_Request req, int *at_p)
{
    int at;

    if (ftw_unlikely(req_retired != NULL) || ftw_unlikely(ftw_threaded) ||
        (at = req_log_find(req)) < 0)
        return NULL;
    *at_p = at;
    return &req_log[at].info;
}

void ftw_req_log_drop(int at)
{
    req_log_kill(at);
}

/* Forget req's record if the log holds it; 1 if it did. */
static int req_log_del(MPI_Request req)
{
    int at = req_log_find(req);
    ftw_reqinfo_t *in;

    if (at < 0)
        return 0;
    in = &req_log[at].info;
    ftw_req_owned_free(in->rndv, in->owned, in->pooled);
    req_log_kill(at);
    return 1;
}

static void req_del_locked(MPI_Request req)
{
    long at = req_slot_find(req);
    ftw_req_t *e;

    if (at >= 0) {
        e = req_unlink_locked(at);
        ftw_req_owned_free(e->info.rndv, e->info.owned, e->info.pooled);
    }
}

/* A retired record of req: forgotten; 1 if there was one. */
static int req_del_retired(MPI_Request req)
{
    ftw_req_t *e, **pp;
    void *owned;
    unsigned rndv;
    int pooled;

    if (ftw_likely(req_retired == NULL) ||
        (e = req_retired_find(req, &pp)) == NULL)
        return 0;
    owned = e->info.owned;
    rndv = e->info.rndv;
    pooled = e->info.pooled;
    req_unretire(pp);
    ftw_req_owned_free(rndv, owned, pooled);
    return 1;
}

void ftw_req_del(MPI_Request req)
{
    if (req_del_retired(req) || ftw_req_count == 0 ||
        req == MPI_REQUEST_NULL || req_log_del(req) || req_table_empty())
        return;
    req_table_lock();
    req_del_locked(req);
    req_table_unlock();
}

void ftw_req_reap(int n, const MPI_Request before[], const MPI_Request after[])
{
    if (ftw_unlikely(req_retired != NULL))
        for (int i = 0; i < n; i++)
            if (before[i] != MPI_REQUEST_NULL && after[i] == MPI_REQUEST_NULL)
                req_del_retired(before[i]);
    /* Threads: the completion call retired the record of every handle it
     * freed; a record the table holds under such a handle now is another
     * thread's new request, given the same handle since. */
    if (ftw_req_count == 0 || ftw_unlikely(ftw_threaded))
        return;
    if (req_log_live > 0) {
        int rest = 0;

        for (int i = 0; i < n; i++)
            if (before[i] != MPI_REQUEST_NULL &&
                after[i] == MPI_REQUEST_NULL && !req_log_del(before[i]))
                rest = 1;
        if (!rest || req_table_empty())
            return;
    }
    req_table_lock();
    for (int i = 0; i < n; i++)
        if (before[i] != MPI_REQUEST_NULL && after[i] == MPI_REQUEST_NULL)
            req_del_locked(before[i]);
    req_table_unlock();
}

int ftw_req_apply(MPI_Request req, void (*fn)(ftw_req_t *e, void *arg),
                  void *arg)
{
    ftw_req_t *e, **pp;
    long at;

    if (ftw_unlikely(req_retired != NULL) &&
        (e = req_retired_find(req, &pp)) != NULL) {
        fn(e, arg);
        return 1;
    }
    if (ftw_req_count == 0 || req == MPI_REQUEST_NULL)
        return 0;
    req_table_lock();
    at = req_slot_find(req);
    if (at >= 0)
        fn(req_slots[at].e, arg);
    req_table_unlock();
    return at >= 0;
}

void ftw_req_foreach(void (*fn)(ftw_req_t *e, void *arg), void *arg)
{
    req_table_lock();
    for (size_t i = 0; req_slots != NULL && i <= req_mask; i++)
        if (req_slots[i].e != NULL)
            fn(req_slots[i].e, arg);
    req_table_unlock();
}

int ftw_req_uses_type(MPI_Datatype dt)
{
    int found = 0;

    req_table_lock();
    for (size_t i = 0; req_slots != NULL && i <= req_mask; i++) {
        if (req_slots[i].e != NULL && req_slots[i].e->info.dt == dt) {
            found = 1;
            break;
        }
    }
    req_table_unlock();
    return found;
}

/* ---- graveyard ---------------------------------------------------------- */

typedef struct {
    MPI_Request req;
    void *owned;
    unsigned qid;       /* quarantined range, released when it ends */
    int pidfd;          /* the one process that could write it, or -1 */
    unsigned settle;    /* progress passes made since that process exited */
    void *shield;       /* a collective's private output copy */
    unsigned skip;      /* passes to go before it is tested again */
    unsigned wait;      /* passes between its tests, doubling */
    unsigned rndv;      /* the rndv bits of its record (owned's kind) */
} grave_t;

/* The most passes between two tests of one abandoned request.  Most end
 * within a few passes (a cancelled receive, a send whose peer took it) or
 * never (a collective a revocation cut on some members only, which the
 * MPI keeps for good): testing the long-lived ones ever less often keeps a
 * pass cheap when thousands pile up, while any test of one drives the
 * MPI's progress for all of them. */
#define GRAVE_MAX_WAIT 1023u

#define GRAVE_EXITED (-2)     /* grave_t.pidfd: the writer has exited */

static grave_t *grave;
static _Atomic int grave_n;     /* a gate: read unlocked */
static int grave_cap;

/* Append an entry (the table locked); NULL if out of memory. */
static grave_t *grave_add_locked(MPI_Request req, void *owned)
{
    grave_t *g;

    if (grave_n == grave_cap) {
        int cap = grave_cap ? 2 * grave_cap : 16;

        g = realloc(grave, sizeof(*g) * (size_t)cap);
        if (g == NULL) {
            /* Its memory stays allocated: the MPI may still use it. */
            ftw_warn_sparse("out of memory: an abandoned request is "
                            "dropped without being completed");
            return NULL;
        }
        grave = g;
        grave_cap = cap;
    }
    g = &grave[grave_n];
    ftw_gate_add(grave_n, 1);
    g->req = req;
    g->qid = 0;
    g->pidfd = -1;
    g->settle = 0;
    g->skip = 0;
    g->shield = NULL;
    g->wait = 0;
    g->rndv = 0;
    g->owned = owned;
    ftw_stat_add(FTW_STAT_GRAVEYARD, 1);
    return g;
}

/* Append req, with what its record owned (the table locked). */
static grave_t *grave_add_req_locked(MPI_Request req)
{
    void *owned = NULL;
    long at = req_slot_find(req);
    unsigned rndv = 0;
    grave_t *g;

    if (at >= 0) {
        owned = req_slots[at].e->info.owned;
        rndv = req_slots[at].e->info.rndv;
        req_slots[at].e->info.owned = NULL;
        /* The graveyard's test may free the handle from now on. */
        if (ftw_threaded)
            req_retire_locked(req);
    }
    g = grave_add_locked(req, owned);
    if (g != NULL)
        g->rndv = rndv;
    return g;
}

void ftw_grave_add(MPI_Request req)
{
    req_table_lock();
    grave_add_req_locked(req);
    req_table_unlock();
}

void ftw_grave_add_quarantined(MPI_Request req, unsigned qid)
{
    grave_t *g;

    req_table_lock();
    g = grave_add_req_locked(req);
    if (g != NULL)
        g->qid = qid;
    req_table_unlock();
}

void ftw_grave_add_recv(MPI_Request req, unsigned qid, int writer_world)
{
    int pid = ftw_detect_local_pid(writer_world), fd = -1;
    grave_t *g;

    if (qid != 0 && pid > 0 && ftw_cfg.quarantine_settle > 0) {
        fd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (fd < 0 && errno == ESRCH)
            fd = GRAVE_EXITED;      /* gone, and reaped, already */
    }
    req_table_lock();
    g = grave_add_req_locked(req);
    if (g != NULL) {
        g->qid = qid;
        g->pidfd = fd;
    } else if (fd >= 0) {
        close(fd);
    }
    req_table_unlock();
}

void ftw_grave_add_full(MPI_Request req, void *owned, unsigned qid)
{
    grave_t *g;

    req_table_lock();
    g = grave_add_locked(req, owned);
    if (g != NULL)
        g->qid = qid;
    req_table_unlock();
}

void ftw_grave_add_shielded(MPI_Request req, void *owned, void *shield)
{
    grave_t *g;

    req_table_lock();
    g = grave_add_locked(req, owned);
    if (g != NULL)
        g->shield = shield;
    else
        ftw_warn_sparse("out of memory: a collective's output copy is "
                        "left to the MPI");
    req_table_unlock();
}

void ftw_grave_add_owned(MPI_Request req, void *owned)
{
    req_table_lock();
    grave_add_locked(req, owned);
    req_table_unlock();
}

/* Has the process behind g's pidfd exited?  Once it has, the only writes
 * left into the range are copies this process's own MPI progress makes of
 * fragments the writer had already queued in shared memory (Open MPI's
 * vader and MPICH's shared-memory transports copy on the receiving side;
 * a single-copy read is one call of the receiver's that has returned):
 * FTW_QUARANTINE_SETTLE further progress passes consume them. */
static int grave_writer_gone(grave_t *g)
{
    struct pollfd p = { .fd = g->pidfd, .events = POLLIN };

    if (g->pidfd == GRAVE_EXITED)
        return 1;
    if (poll(&p, 1, 0) != 1)
        return 0;
    close(g->pidfd);
    g->pidfd = GRAVE_EXITED;
    return 1;
}

static void grave_release(unsigned qid)
{
    if (qid != 0 && req_ops != NULL)
        req_ops->range_release(qid);
}

/* One progress pass over g; 1 if its range was released by it. */
static int grave_settle(grave_t *g)
{
    if (g->qid == 0 || g->pidfd == -1 || !grave_writer_gone(g) ||
        ++g->settle < (unsigned)ftw_cfg.quarantine_settle)
        return 0;
    grave_release(g->qid);
    g->qid = 0;
    return 1;
}

/* g's native request ended: nothing uses its memory or range now. */
static void grave_close(grave_t *g)
{
    if (g->pidfd >= 0)
        close(g->pidfd);
    ftw_req_owned_free(g->rndv, g->owned, 0);
    free(g->shield);
    grave_release(g->qid);
}

void ftw_grave_progress(void)
{
    int released = 0;

    if (grave_n == 0)
        return;
    req_table_lock();
    for (int i = 0; i < grave_n;) {
        grave_t *g = &grave[i];
        int flag = 0;

        if (g->skip > 0) {
            g->skip--;
            released |= grave_settle(g);
            i++;
            continue;
        }
        PMPI_Test(&g->req, &flag, MPI_STATUS_IGNORE);
        if (flag) {
            released |= g->qid != 0;
            grave_close(g);
            ftw_gate_add(grave_n, -1);
            *g = grave[grave_n];
        } else {
            g->wait = g->wait * 2 + 1 < GRAVE_MAX_WAIT ?
                      g->wait * 2 + 1 : GRAVE_MAX_WAIT;
            g->skip = g->wait;
            released |= grave_settle(g);
            i++;
        }
    }
    req_table_unlock();
    if (released && req_ops != NULL)
        req_ops->ranges_released();
}

int ftw_grave_count(void)
{
    return grave_n;
}

/* req_add_quiet and req_info_clear between them name every field of
 * ftw_reqinfo_t: a field added to the record must be added there. */
_Static_assert(sizeof(void *) != 8 || sizeof(ftw_reqinfo_t) == 104,
               "update req_info_clear");
