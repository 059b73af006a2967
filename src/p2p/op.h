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
#include "core/request.h"
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

/* A matched receive: comm and peer come from the message. */
void ftw_op_begin_msg(ftw_op_t *op, const char *name, MPI_Message message);

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

extern FTW_TLS MPI_Datatype ftw_size_dt;
extern FTW_TLS MPI_Count ftw_size_val;
extern FTW_TLS unsigned ftw_size_gen;
extern _Atomic unsigned ftw_type_gen;
int ftw_send_eager_slow(MPI_Count count, MPI_Datatype dt);

/* The size of dt, through the per-thread cache of the last one asked. */
int ftw_type_size(MPI_Datatype dt, MPI_Count *size_p);

/* Nonzero if count elements of dt fit FTW_EAGER_MAX (last type cached). */
static inline int ftw_send_eager(MPI_Count count, MPI_Datatype dt)
{
    if (ftw_likely(ftw_size_dt == dt && ftw_size_gen ==
                   atomic_load_explicit(&ftw_type_gen, memory_order_relaxed)))
        return count * ftw_size_val <= (MPI_Count)ftw_cfg.eager_max;
    return ftw_send_eager_slow(count, dt);
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

/* Raise an ftwrap error on comm's error handler, as MPI would; returns
 * code for the caller to return (if the handler returns).  peer is the
 * failed rank in comm, or -1. */
int ftw_raise(MPI_Comm comm, int code, const char *name, int peer);

/* The same for a window (MPI_Win_call_errhandler; a window's default
 * handler is MPI_ERRORS_ARE_FATAL). */
int ftw_raise_win(MPI_Win win, int code, const char *name);

/* The same for a file (MPI_FILE_NULL's handler for MPI_FILE_NULL; a
 * file's default handler is MPI_ERRORS_RETURN). */
int ftw_raise_file(MPI_File fh, int code, const char *name);

/* MPI_Type_free: also forgets cached datatype sizes, and leaves a type
 * a tracked request names to be freed once none does. */
int ftw_type_free(MPI_Datatype *dt);

/* MPI_Finalize: free the types MPI_Type_free left to requests. */
void ftw_type_fini(void);

/* MPI_Abort: the whole job ends, even under a launcher told to keep
 * survivors alive.  ftw_abort_status: the exit status for an error code. */
int ftw_abort(MPI_Comm comm, int errorcode);
int ftw_abort_status(int code);

/* Fill a status for an operation that ended in error. */
void ftw_status_fail(MPI_Status *status, int code, int source);

/* The waiting side shared by every blocking call. */
typedef struct {
    uint32_t epoch;         /* failure epoch at the last check */
    uint32_t drains;        /* ftw_drain_seq at the last check */
    uint32_t revokes;       /* ftw_revoke_gen at the last check */
    unsigned spins;
} ftw_poll_t;

static inline void ftw_poll_init(ftw_poll_t *p)
{
    p->epoch = 0;
    p->drains = 0;
    p->revokes = 0;
    p->spins = 0;
}

/* Nonzero when failures, drains or revocations happened since the last
 * call. */
int ftw_poll_changed(ftw_poll_t *p);

/* One idle turn: run pending work, back off when waiting long. */
void ftw_poll_idle(ftw_poll_t *p);

/* A window was made (+1) or freed (-1) here: while any exists, waiting
 * calls do not sleep (FTW_IDLE). */
void ftw_win_count(int delta);

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

/* 1 if code is an error class ftwrap raises itself (ULFM's included). */
static inline int ftw_is_own_error(int code)
{
    return (code >= FTW_ERR_FIRST_ && code <= FTW_ERR_LAST_) ||
           code == MPIX_ERR_PROC_FAILED ||
           code == MPIX_ERR_PROC_FAILED_PENDING || code == MPIX_ERR_REVOKED;
}

#endif
