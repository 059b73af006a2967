/*
 * The request table: what ftwrap must know about an outstanding native
 * point-to-point request to finish it when a peer fails (its communicator,
 * its peer(s), send or receive).  Keyed by the native handle, which is also
 * the handle the application holds.  An entry lives from the post until
 * the request completes (persistent ones: until MPI_Request_free), so a
 * recycled handle value never meets a stale entry.
 */
#ifndef FTW_FT_REQUEST_H
#define FTW_FT_REQUEST_H

#include <mpi.h>
#include <stdint.h>
#include <uthash.h>

#include "core/lock.h"
#include "util/compiler.h"

typedef enum {
    FTW_OP_SEND,        /* standard, ready or buffered send */
    FTW_OP_SSEND,       /* synchronous send */
    FTW_OP_RECV,
    FTW_OP_PROBE,
    FTW_OP_COLL,        /* a nonblocking collective */
} ftw_op_kind_t;

#define FTW_NO_PEER (-3)  /* distinct from MPI_ANY_SOURCE, MPI_PROC_NULL */

/* ftw_reqinfo_t.rndv: what a request's completion must finish. */
#define FTW_RNDV_SEND     1  /* the FIN receive of a rendezvous send;
                              * owned is the send's block */
#define FTW_RNDV_RUSER    2  /* a receive whose buffer may get an RTS */
#define FTW_RNDV_RSCRATCH 4  /* a receive posted into owned, FTW_RTS_SIZE
                              * bytes, because the buffer is smaller */
#define FTW_RNDV_REPLAY   8  /* a receive of a stashed message replayed
                              * to self (rndv/stash.h); owned says what
                              * the status must say */

/* What a request depends on. */
typedef struct {
    MPI_Comm comm;
    int peer;           /* rank in comm, MPI_ANY_SOURCE or MPI_PROC_NULL */
    int peer2;          /* the send side of a send-receive, or FTW_NO_PEER */
    uint8_t kind;       /* ftw_op_kind_t */
    uint8_t persistent;
    uint8_t rndv;       /* FTW_RNDV_* (above), 0: plain */
    uint8_t failed_at_start; /* a nonblocking send to a process known
                              * failed: posted to MPI_PROC_NULL, it
                              * completes with FTW_ERR_PROC_FAIL_STOP */
    uint8_t cancelled;  /* PMPI_Cancel was called on it (Open MPI's
                         * receive cancel must not run twice) */
    uint8_t pooled;     /* owned is a block of ftw_req_block_get */
    uint8_t early;      /* a receive progress finishes as soon as its
                         * message comes (ftw_rndv_progress_recvs) */
    uint32_t coll_gen;  /* FTW_OP_COLL: the communicator's coll_gen */
    uint32_t cut_seq;   /* FTW_OP_COLL: ftw_cut_seq when posted */
    uint32_t drain_seq; /* ftw_drain_seq when posted */
    uint32_t epoch0;    /* failure epoch when posted (interrupt mode) */
    void *owned;        /* memory the native request uses, freed with the
                         * request (or by the graveyard) */
    const int *p2p_user; /* the rank map of the native communicator it was
                          * posted on (ftw_p2p_view_t.user), or NULL */
    const void *view;   /* the ftw_p2p_view_t it was posted on, or NULL */
    int p2p_n;
    void *buf;          /* a receive's buffer, count and type, for the */
    MPI_Count count;    /* quarantine; buf NULL: unknown */
    MPI_Datatype dt;
    struct ftw_bounce *bounce;  /* FTW_QUARANTINE=bounce: the receive goes
                                 * through it (it is also owned) */
} ftw_reqinfo_t;

typedef struct ftw_req {
    MPI_Request key;
    ftw_reqinfo_t info;
    struct ftw_req *next;   /* on the free list */
} ftw_req_t;

extern _Atomic int ftw_req_count;   /* entries; 0 skips lookups (a gate) */

/* Set for good once the process made a request MPICH 4.0's MPI_Testall
 * was seen to mishandle when called again and again (a persistent
 * collective started out of the array's order: an error, or no
 * completion ever; a generalized request, ROMIO's among them: an
 * assertion on its reference count).  Until then a failure-free
 * MPI_Waitall first tries to finish its whole set with one MPI_Testall
 * (a single call over such requests was not seen to fail; the gate keeps
 * the first try to sets that cannot hold them). */
extern _Atomic int ftw_req_testall_unsafe;

static inline void ftw_req_mark_testall_unsafe(void)
{
    atomic_store_explicit(&ftw_req_testall_unsafe, 1, memory_order_relaxed);
}

/* Entries with info.early set; 0: progress has no receive to finish. */
extern _Atomic int ftw_req_early_count;

/* Both MPIs hand every nonblocking send that completed at once (a small
 * eager message) one shared handle of a request that is already
 * complete: Open MPI its static empty request (ftw_req_done_handle, found
 * by ftw_req_init), MPICH a builtin request (handle kind 01 in the top
 * two bits).  Such a request cannot fail. */
#if defined(OPEN_MPI)
extern void *ftw_req_done_handle;
#endif

static inline int ftw_req_is_done(MPI_Request req)
{
#if defined(OPEN_MPI)
    return ftw_req_done_handle != NULL && (void *)req == ftw_req_done_handle;
#elif defined(MPICH)
    return ((unsigned)req >> 30) == 1;
#else
    (void)req;
    return 0;
#endif
}

/* Find what ftw_req_is_done needs (at MPI_Init). */
void ftw_req_init(void);

/* No record in the table proper (the log of the fast path never holds a
 * shared done handle): such a handle has nothing to finish. */
int ftw_req_table_empty(void);

/* Record req (after a successful native post). */
void ftw_req_add(MPI_Request req, const ftw_reqinfo_t *info);

/* The same for a request posted on the fast path (ftw_quiet): nothing
 * moved, no failure known, so the rest of the record is zero. */
void ftw_req_add_quiet(MPI_Request req, MPI_Comm comm, int peer, int kind,
                       int persistent, void *buf, MPI_Count count,
                       MPI_Datatype dt);

/* The same for a receive while the rendezvous is on: rndv its FTW_RNDV_*
 * flags, owned (NULL, or a block of ftw_req_block_get) what it uses. */
void ftw_req_add_rndv_quiet(MPI_Request req, MPI_Comm comm, int peer,
                            void *buf, MPI_Count count, MPI_Datatype dt,
                            int rndv, void *owned);

/* A completion finishing req at once, on one thread: req's record in
 * place, if the log holds it (else NULL), and *at_p what
 * ftw_req_log_drop takes to forget it (what it owns stays with the
 * caller).  Saves the copy ftw_req_remove makes. */
ftw_reqinfo_t *ftw_req_log_at(MPI_Request req, int *at_p);
void ftw_req_log_drop(int at);

/* Blocks of FTW_REQ_BLOCK bytes for the state of requests posted again
 * and again (a window of receives): kept on a per-thread free list, so a
 * post costs no allocation.  A block is also plain malloc memory, which
 * free() may release. */
#define FTW_REQ_BLOCK 192
void *ftw_req_block_get(void);
void ftw_req_block_put(void *b);

/* Free what a record owned (ftw_reqinfo_t.owned, .pooled). */
void ftw_req_owned_free(unsigned rndv, void *owned, int pooled);

/* The entry of a handle, or NULL.  Under MPI_THREAD_MULTIPLE another
 * thread may complete the request and the entry be reused: read it only
 * where no other thread can (ftw_req_lookup copies it under the lock). */
ftw_req_t *ftw_req_find(MPI_Request req);

/* A copy of a handle's record (taken under the table's lock): 1 if it
 * has one. */
int ftw_req_lookup(MPI_Request req, ftw_reqinfo_t *out);

/* Take a handle's record out of the table: the caller gets it, memory it
 * owns (out->owned) included; 1 if it had one. */
int ftw_req_remove(MPI_Request req, ftw_reqinfo_t *out);

/* Forget a handle (it completed or was freed). */
void ftw_req_del(MPI_Request req);

/* After a completion call: forget every non-persistent handle of
 * before[0..n) whose slot in after[] the MPI set to MPI_REQUEST_NULL. */
void ftw_req_reap(int n, const MPI_Request before[], const MPI_Request after[]);

/* Does an entry name dt (a receive's type, read at its completion)? */
int ftw_req_uses_type(MPI_Datatype dt);

/* Call fn on the entry of req (under the table's lock: fn must not use
 * the table); 0 if it has none. */
int ftw_req_apply(MPI_Request req, void (*fn)(ftw_req_t *e, void *arg),
                  void *arg);

/* Call fn on every entry (under the table's lock: fn must not use the
 * table). */
void ftw_req_foreach(void (*fn)(ftw_req_t *e, void *arg), void *arg);

/*
 * Native completion calls on requests that may be in the table.  Under
 * MPI_THREAD_MULTIPLE each is one section under the table's lock with the
 * removal of the records of the requests it freed (request.c says why);
 * otherwise the plain PMPI call.  before[]: the handles as they were
 * before (the call's own array may change).
 */
int ftw_req_test_mt(MPI_Request *req, int *flag, MPI_Status *st);
int ftw_req_testall_mt(int n, const MPI_Request before[], MPI_Request reqs[],
                       int *flag, MPI_Status sts[]);
int ftw_req_testany_mt(int n, const MPI_Request before[], MPI_Request reqs[],
                       int *index, int *flag, MPI_Status *st);
int ftw_req_testsome_mt(int n, const MPI_Request before[],
                        MPI_Request reqs[], int *outcount, int indices[],
                        MPI_Status sts[]);
int ftw_req_cancel_mt(MPI_Request *req);
/* Cancel a recorded request once (the table locked): 0 if it was. */
int ftw_req_cancel_once_locked(ftw_req_t *e);
int ftw_req_free_mt(MPI_Request *req);

static inline int ftw_req_test(MPI_Request *req, int *flag, MPI_Status *st)
{
    return ftw_unlikely(ftw_threaded) ? ftw_req_test_mt(req, flag, st)
                                      : PMPI_Test(req, flag, st);
}

static inline int ftw_req_testall(int n, const MPI_Request before[],
                                  MPI_Request reqs[], int *flag,
                                  MPI_Status sts[])
{
    return ftw_unlikely(ftw_threaded)
           ? ftw_req_testall_mt(n, before, reqs, flag, sts)
           : PMPI_Testall(n, reqs, flag, sts);
}

static inline int ftw_req_testany(int n, const MPI_Request before[],
                                  MPI_Request reqs[], int *index, int *flag,
                                  MPI_Status *st)
{
    return ftw_unlikely(ftw_threaded)
           ? ftw_req_testany_mt(n, before, reqs, index, flag, st)
           : PMPI_Testany(n, reqs, index, flag, st);
}

static inline int ftw_req_testsome(int n, const MPI_Request before[],
                                   MPI_Request reqs[], int *outcount,
                                   int indices[], MPI_Status sts[])
{
    return ftw_unlikely(ftw_threaded)
           ? ftw_req_testsome_mt(n, before, reqs, outcount, indices, sts)
           : PMPI_Testsome(n, reqs, outcount, indices, sts);
}

static inline int ftw_req_cancel(MPI_Request *req)
{
    return ftw_unlikely(ftw_threaded) ? ftw_req_cancel_mt(req)
                                      : PMPI_Cancel(req);
}

static inline int ftw_req_free(MPI_Request *req)
{
    return ftw_unlikely(ftw_threaded) ? ftw_req_free_mt(req)
                                      : PMPI_Request_free(req);
}

/* Native requests given up on (their peer failed and they could not be
 * cancelled): progress keeps testing them until the MPI lets go, and only
 * then frees the memory they use (owned, or their table entry's). */
void ftw_grave_add(MPI_Request req);
void ftw_grave_add_owned(MPI_Request req, void *owned);
/* A receive given up on: its buffer stays quarantined until it ends. */
void ftw_grave_add_quarantined(MPI_Request req, unsigned qid);
/* A receive from one peer given up on (writer_world: its world rank): the
 * range is also released once that process has exited, if it ran on this
 * host, and the queued data it left was consumed. */
void ftw_grave_add_recv(MPI_Request req, unsigned qid, int writer_world);
/* Both: the MPI may still use owned and write the quarantined range. */
void ftw_grave_add_full(MPI_Request req, void *owned, unsigned qid);
/* ... and a second block the native request uses (freed with it). */
void ftw_grave_add_shielded(MPI_Request req, void *owned, void *shield);
void ftw_grave_progress(void);
int ftw_grave_count(void);

/* What the end of a record or a grave means to the layers above core,
 * set once at MPI_Init: release a quarantined range (buf/quarantine.h),
 * retry bounced receives after ranges were released (buf/bounce.h), free
 * what a record owned (rndv/rndv.h: a receive's state, once no thread
 * finishes it any more; a send's block, once its transports let go). */
typedef struct ftw_req_ops {
    void (*range_release)(unsigned qid);
    void (*ranges_released)(void);
    void (*owned_free)(unsigned rndv, void *owned, int pooled);
} ftw_req_ops_t;

void ftw_req_ops_set(const ftw_req_ops_t *ops);

#endif
