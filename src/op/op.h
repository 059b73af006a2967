/*
 * One point-to-point operation as the generated wrappers drive it:
 *
 *   ftw_op_begin()    note the call, its communicator and peer
 *   ftw_op_refused()  fail at once if the peer is known dead, or a
 *                     wildcard receive while wildcards are disabled
 *   ftw_op_direct()   a small blocking send may go straight to the MPI
 *   native post       PMPI_Isend, PMPI_Irecv, ... by the wrapper
 *   ftw_op_posted()   nonblocking: remember the request for its wait
 *   ftw_op_wait()     blocking: wait, watching the peer
 *
 * Errors ftwrap itself decides are raised on the communicator's error
 * handler (ftw_raise); errors of native calls were already handled by the
 * MPI, which keeps the application's handlers on the native objects.
 */
#ifndef FTW_FT_OP_H
#define FTW_FT_OP_H

#include <mpi.h>

#include <stdatomic.h>

#include "mpi-ext.h"
#include "detect/detect.h"
#include "core/comm.h"
#include "core/progress.h"
#include "core/raise.h"
#include "core/request.h"
#include "core/types.h"
#include "util/compiler.h"
#include "util/config.h"

typedef struct {
    const char *name;       /* the MPI call, for messages */
    ftw_reqinfo_t info;
    MPI_Comm native;        /* where the traffic runs (ftw_comm_t.p2p) */
    int npeer, npeer2;      /* the peers' ranks there */
    uint32_t epoch0;        /* failure epoch at the start */
    int rc;                 /* the error ftw_op_refused decided */
    MPI_Request req;        /* the blocking call's native request */
    MPI_Request req2;       /* a send-receive's send */
    void *tmp;              /* a send-receive-replace's copy of the data */
    int replay;             /* a stashed message replayed to self: its */
    int rsrc, rtag;         /* status must say this source and tag */
    void *rbuf;             /* what the native receive uses: the user's */
    MPI_Count rcount;       /* buffer, or a bounce buffer (bounceable */
    MPI_Datatype rdt;       /* calls only) */
    int bounceable;         /* the wrapper posts rbuf, rcount, rdt */
    int posts;              /* a nonblocking or persistent call: its
                             * request, not the call, reports a disabled
                             * wildcard receive */
} ftw_op_t;

void ftw_op_begin(ftw_op_t *op, const char *name, MPI_Comm comm, int peer,
                  ftw_op_kind_t kind);

/* ---- the fast path -------------------------------------------------------
 * While no failure is known and nothing else needs watching, a blocking
 * send small enough to go eagerly is the MPI's own call, and a blocking
 * receive is PMPI_Irecv plus a tight test loop (ftw_recv_fast) that hands
 * over to the watched wait the moment a failure is published; on Open MPI,
 * PMPI_Irecv plus PMPI_Wait, watched from a progress callback. */

/* Reasons to leave the fast path besides failures: ftw_noisy (see
 * detect/detect.h). */
static inline int ftw_quiet(void)
{
    return atomic_load_explicit(&ftw_fail_epoch, memory_order_relaxed) == 0
           && atomic_load_explicit(&ftw_noisy, memory_order_relaxed) == 0;
}

/* The rest of a fast-path blocking receive after its PMPI_Irecv. */
int ftw_recv_fast(MPI_Request *req, MPI_Status *status, MPI_Comm comm,
                  int source, int tag, const char *name, void *buf,
                  MPI_Count count, MPI_Datatype dt);

/* Open MPI: hook the fast-path receive's watch into the MPI's progress
 * loop (see ftw_recv_fast); without the hook the test loop is used. */
void ftw_fast_wait_init(void);
void ftw_fast_wait_fini(void);

/* A receive's buffer (for the quarantine). */
static inline void ftw_op_set_buf(ftw_op_t *op, void *buf, MPI_Count count,
                                  MPI_Datatype dt)
{
    op->info.buf = buf;
    op->info.count = count;
    op->info.dt = dt;
    op->rbuf = buf;
    op->rcount = count;
    op->rdt = dt;
}

/* Route the operation on a communicator whose traffic was moved. */
void ftw_op_route(ftw_op_t *op);

/* A send-receive's second peer. */
static inline void ftw_op_set_peer2(ftw_op_t *op, int peer2)
{
    op->info.peer2 = peer2;
    op->npeer2 = peer2;
    if (ftw_unlikely(ftw_p2p_moved))
        ftw_op_route(op);
}

/* Nonzero if the operation must fail before it starts; op->rc is then the
 * error, already raised, and status (if any) describes it. */
int ftw_op_refused(ftw_op_t *op, MPI_Status *status);

/* Nonzero if a blocking send of count elements of dt may use the MPI's
 * own blocking call: small enough to go eagerly, so it cannot wait on a
 * dead receiver. */
int ftw_op_direct(ftw_op_t *op, MPI_Count count, MPI_Datatype dt);

/* A nonblocking post returned rc; remember the request if it worked. */
int ftw_op_posted(ftw_op_t *op, int rc, MPI_Request *request);

/* Wait for op->req (and op->req2) after a native post that returned rc. */
int ftw_op_wait(ftw_op_t *op, int rc, MPI_Status *status);

/* Send-receive-replace: copy the data span of buf into op->tmp and
 * return where the copy of buf starts, or NULL (op->rc set). */
void *ftw_op_copy_span(ftw_op_t *op, const void *buf, MPI_Count count,
                       MPI_Datatype dt);

/* The fate of a pending request: the one place that decides why it can
 * no longer complete normally, in this order. */
typedef enum ftw_fate {
    FTW_FATE_LIVE,          /* nothing stops it */
    FTW_FATE_COLL_CUT,      /* a collective whose communicator lost a
                             * member since it started */
    FTW_FATE_REVOKED,       /* its communicator was revoked */
    FTW_FATE_DRAINED,       /* a drain cut its traffic (asked) */
    FTW_FATE_PEER_FAILED,   /* its peer, or a send-receive's second peer,
                             * failed (*bad_p: which) */
    FTW_FATE_ANY_DISABLED,  /* a wildcard receive while an unacknowledged
                             * failure disables wildcards */
    FTW_FATE_INTERRUPTED,   /* interrupt mode: a member failed since it
                             * started (asked: blocking calls only) */
} ftw_fate_t;

#define FTW_ASK_DRAINED     1u
#define FTW_ASK_INTERRUPTED 2u

/* Decide info's fate on c.  ask: which of the conditions that depend on
 * the question apply (a drain or an interruption ends a wait, but does
 * not doom a request). */
ftw_fate_t ftw_req_fate(ftw_comm_t *c, const ftw_reqinfo_t *info,
                        unsigned ask, int *bad_p);

/* Check a pending request against the failures: returns FTW_PENDING_CODE
 * if it may still complete, else the MPI error code it completed with
 * (MPI_SUCCESS if it finished after all).  blocking: a wildcard receive
 * is cancelled (blocking calls) rather than reported disabled. */
#define FTW_PENDING_CODE (-1)
int ftw_req_failcheck(const ftw_reqinfo_t *info, MPI_Request *req,
                      MPI_Status *status, int blocking);

/* A request just completed with status st: FTW_ERR_DRAINED (st filled)
 * if a drain cancelled it, else MPI_SUCCESS. */
int ftw_req_completed(const ftw_reqinfo_t *info, MPI_Status *st);

/* Nonzero once a nonblocking send to a failed process was posted to end
 * in error (ftw_reqinfo_t.failed_at_start): completions must be checked. */
extern _Atomic int ftw_late_failed;

/* Nonzero if a drain cut the request's traffic since it was posted. */
int ftw_req_drained(const ftw_comm_t *c, const ftw_reqinfo_t *info);

/* Nonzero if a pending request can only end in error (its peer failed,
 * or it is a wildcard receive while wildcards are disabled). */
int ftw_req_doomed(const ftw_reqinfo_t *info);

/* Wait for one native request, watching its peer(s) as info says (NULL:
 * nothing to watch).  blocking: see ftw_req_failcheck. */
int ftw_req_wait(const ftw_reqinfo_t *info, MPI_Request *req,
                 MPI_Status *status, int blocking);

/* The rendezvous' part in a request's end (rndv/p2p_rndv.h), set once at
 * MPI_Init; called only for requests whose info.rndv is set. */
typedef struct ftw_op_rndv_ops {
    int (*finish)(const ftw_reqinfo_t *info, MPI_Status *st);
    int (*finish_raise)(const ftw_reqinfo_t *info, MPI_Status *st,
                        const char *name);
    int (*send_settle)(const ftw_reqinfo_t *info, MPI_Request *req,
                       MPI_Status *st);
} ftw_op_rndv_ops_t;

void ftw_op_rndv_ops_set(const ftw_op_rndv_ops_t *ops);

/* Test req for up to 2 ms (and 100 tries): 1 if it completed.  A
 * collective whose communicator lost a process may still finish with
 * what the dead process sent before it died. */
int ftw_req_test_briefly(MPI_Request *req, MPI_Status *status);

/* The error of a collective cut off on c: revoked, or a member failed. */
static inline int ftw_coll_code(const ftw_comm_t *c)
{
    return c != NULL && c->revoked ? MPIX_ERR_REVOKED
                                   : FTW_ERR_PROC_FAIL_STOP;
}

#endif
