/* Point-to-point operations that never hang on a failed peer. */
#include "op/op.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "buf/bounce.h"
#include "core/comm.h"
#include "buf/cut.h"
#include "core/ft.h"
#include "buf/quarantine.h"
#include "core/revoke.h"
#include "util/config.h"
#include "util/log.h"
#include "util/stats.h"
#include "xport/xport.h"

static const ftw_inject_point_t inject_of_kind[] = {
    [FTW_OP_SEND] = FTW_INJECT_SEND,
    [FTW_OP_SSEND] = FTW_INJECT_SEND,
    [FTW_OP_RECV] = FTW_INJECT_RECV,
    [FTW_OP_PROBE] = FTW_INJECT_PROBE,
};

void ftw_op_begin(ftw_op_t *op, const char *name, MPI_Comm comm, int peer,
                  ftw_op_kind_t kind)
{
    op->name = name;
    op->info.comm = comm;
    op->info.peer = peer;
    op->info.peer2 = FTW_NO_PEER;
    op->info.kind = (uint8_t)kind;
    op->info.persistent = 0;
    op->info.coll_gen = 0;
    op->info.owned = NULL;
    op->info.buf = NULL;
    op->info.p2p_user = NULL;
    op->info.view = NULL;
    op->info.rndv = 0;
    op->info.failed_at_start = 0;
    op->info.cancelled = 0;
    op->info.pooled = 0;
    op->info.early = 0;
    op->replay = 0;
    op->info.bounce = NULL;
    op->bounceable = 0;
    op->posts = 0;
    op->native = comm;
    op->npeer = peer;
    op->npeer2 = FTW_NO_PEER;
    op->rc = MPI_SUCCESS;
    op->req = MPI_REQUEST_NULL;
    op->req2 = MPI_REQUEST_NULL;
    op->tmp = NULL;
    ftw_wrap_check();
    op->info.epoch0 = ftw_seen_epoch;
    op->info.drain_seq = atomic_load_explicit(&ftw_drain_seq,
                                              memory_order_relaxed);
    if (ftw_unlikely(ftw_p2p_moved))
        ftw_op_route(op);
    ftw_inject(inject_of_kind[kind]);
}

void ftw_op_route(ftw_op_t *op)
{
    ftw_comm_t *c = ftw_comm_get(op->info.comm);
    const ftw_p2p_view_t *v;

    if (c == NULL || (v = ftw_comm_p2p(c)) == NULL)
        return;
    op->native = v->comm;
    op->info.view = v;
    op->info.p2p_user = v->user;
    op->info.p2p_n = v->n;
    op->npeer = ftw_p2p_rank(v, c->size, op->info.peer);
    if (op->info.peer2 != FTW_NO_PEER)
        op->npeer2 = ftw_p2p_rank(v, c->size, op->info.peer2);
}

/* ---- the layers above ------------------------------------------------ */

static const ftw_op_rndv_ops_t *op_rndv;

void ftw_op_rndv_ops_set(const ftw_op_rndv_ops_t *ops)
{
    op_rndv = ops;
}

int ftw_req_test_briefly(MPI_Request *req, MPI_Status *status)
{
    double until = PMPI_Wtime() + 0.002;
    int flag = 0;

    for (int i = 0; !flag && (i < 100 || PMPI_Wtime() < until); i++)
        PMPI_Test(req, &flag, status);
    return flag;
}

/* A nonblocking collective's request cut off by a failure since it
 * started (its communicator's collective generation moved): one that
 * completes at once still counts; else it is given up, its receive
 * buffer quarantined. */
static int coll_cut_off(ftw_comm_t *c, const ftw_reqinfo_t *info,
                        MPI_Request *req, MPI_Status *status)
{
    if (ftw_req_test_briefly(req, status))
        return MPI_SUCCESS;
    ftw_grave_add_quarantined(*req, info->buf ? ftw_quarantine_add(
                                  info->buf, info->count, info->dt) : 0);
    *req = MPI_REQUEST_NULL;
    ftw_status_fail(status, ftw_coll_code(c), MPI_ANY_SOURCE);
    return ftw_coll_code(c);
}

/* The failed peer of an operation, or -1 if none is known failed. */
static int op_failed_peer(ftw_comm_t *c, const ftw_reqinfo_t *info)
{
    if (info->peer >= 0 && ftw_comm_peer_failed(c, info->peer))
        return info->peer;
    if (info->peer2 >= 0 && ftw_comm_peer_failed(c, info->peer2))
        return info->peer2;
    return -1;
}

static int op_refused_failed(ftw_op_t *op, MPI_Status *status);

/* Would the receive write a quarantined range? */
static int op_buffer_quarantined(const ftw_op_t *op)
{
    const char *lo, *hi;

    if (ftw_buffer_span(op->info.buf, op->info.count, op->info.dt, &lo,
                        &hi) != MPI_SUCCESS)
        return 0;
    return ftw_quarantine_overlaps(lo, (size_t)(hi - lo));
}

/* A call on a revoked communicator: MPIX_ERR_REVOKED. */
static int op_revoked(ftw_op_t *op, MPI_Status *status)
{
    ftw_comm_t *c = ftw_comm_get(op->info.comm);

    if (c == NULL || !c->revoked)
        return 0;
    ftw_status_fail(status, MPIX_ERR_REVOKED, op->info.peer);
    op->rc = ftw_raise(op->info.comm, MPIX_ERR_REVOKED, op->name, -1);
    return 1;
}

/* A receive into a quarantined range: through a bounce buffer if
 * configured and the call allows it (0), else refused (1, op->rc). */
static int op_quarantine_refused(ftw_op_t *op, MPI_Status *status)
{
    ftw_bounce_t *b;
    int code = FTW_ERR_BUFFER_UNUSABLE;

    if (ftw_cfg.quarantine == FTW_QUARANTINE_BOUNCE && op->bounceable) {
        code = ftw_bounce_new(op->info.buf, op->info.count, op->info.dt, &b);
        if (code == MPI_SUCCESS) {
            op->info.bounce = b;
            op->info.owned = b;
            ftw_bounce_native(b, &op->rbuf, &op->rcount, &op->rdt);
            return 0;
        }
    }
    ftw_status_fail(status, code, op->info.peer);
    op->rc = ftw_raise(op->info.comm, code, op->name, -1);
    return 1;
}

/* The operation will not be posted: drop its bounce buffer (other owned
 * memory, a rendezvous receive's, stays with its caller). */
static void op_unbounce(ftw_op_t *op)
{
    if (op->info.bounce == NULL)
        return;
    free(op->info.owned);
    op->info.owned = NULL;
    op->info.bounce = NULL;
}

int ftw_op_refused(ftw_op_t *op, MPI_Status *status)
{
    int rc;

    ftw_revoke_check();
    if (ftw_unlikely(ftw_revoked_count) && op_revoked(op, status))
        return 1;
    if (ftw_unlikely(ftw_quarantine_count) && op->info.buf != NULL &&
        op_buffer_quarantined(op) && op_quarantine_refused(op, status))
        return 1;
    if (ftw_likely(atomic_load_explicit(&ftw_fail_epoch,
                                        memory_order_relaxed) == 0))
        return 0;
    rc = op_refused_failed(op, status);
    if (rc)
        op_unbounce(op);
    return rc;
}

/* ftw_op_refused once failures are known. */
static int op_refused_failed(ftw_op_t *op, MPI_Status *status)
{
    ftw_comm_t *c;
    int code, bad;

    c = ftw_comm_get(op->info.comm);
    if (c == NULL)
        return 0;
    /* A receive from a failed process is still posted: a message it sent
     * before it failed may be there to take.  Sends to it are refused. */
    if (op->npeer == FTW_EXCLUDED)
        bad = op->info.peer;    /* a drain excluded it: it failed */
    else if (op->npeer2 == FTW_EXCLUDED)
        bad = op->info.peer2;
    else if (op->info.kind == FTW_OP_SEND || op->info.kind == FTW_OP_SSEND)
        bad = op_failed_peer(c, &op->info);
    else if (op->info.peer2 >= 0 && ftw_comm_peer_failed(c, op->info.peer2))
        bad = op->info.peer2;
    else
        bad = -1;
    if (bad >= 0 && bad == op->info.peer && op->posts &&
        !op->info.persistent && op->npeer != FTW_EXCLUDED &&
        (op->info.kind == FTW_OP_SEND || op->info.kind == FTW_OP_SSEND)) {
        /* A nonblocking send to a failed process starts and completes in
         * error, as in ULFM's MPI: a halo exchange posts its other sends
         * after this one, and a program whose error handler left the
         * exchange at the start would never post them (its live
         * neighbours would wait for them for ever; ULFM's Jacobi). */
        op->npeer = MPI_PROC_NULL;
        op->info.failed_at_start = 1;
        ftw_late_failed = 1;
        return 0;
    }
    if (bad >= 0) {
        code = FTW_ERR_PROC_FAIL_STOP;
    } else if (op->info.peer == MPI_ANY_SOURCE && !op->posts &&
               (op->info.kind == FTW_OP_RECV ||
                op->info.kind == FTW_OP_PROBE) &&
               ftw_comm_any_disabled(c)) {
        /* "Pending" is for requests, which stay pending (a posted
         * wildcard receive is reported by its wait or test): a call
         * without one fails as the failure itself. */
        code = FTW_ERR_PROC_FAIL_STOP;
        ftw_stat_add(FTW_STAT_ANY_DISABLED, 1);
    } else {
        return 0;
    }
    ftw_status_fail(status, code, bad >= 0 ? bad : MPI_ANY_SOURCE);
    op->rc = ftw_raise(op->info.comm, code, op->name, bad);
    return 1;
}

int ftw_op_direct(ftw_op_t *op, MPI_Count count, MPI_Datatype dt)
{
    if (op->info.peer == MPI_PROC_NULL)
        return 1;
    return ftw_send_eager(count, dt);
}

static int late_query(void *extra, MPI_Status *st)
{
    (void)extra;
    PMPI_Status_set_elements(st, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(st, 0);
    st->MPI_SOURCE = MPI_UNDEFINED;
    st->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

static int late_free(void *extra)
{
    (void)extra;
    return MPI_SUCCESS;
}

static int late_cancel(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

/* A send posted to end in error (failed_at_start): the MPI's request to
 * MPI_PROC_NULL may be a shared built-in handle (MPICH 4.0), so it is
 * finished and replaced by a completed request of its own, which ftwrap
 * finds by its handle and fails at its completion. */
static int late_failed_request(MPI_Request *request)
{
    int rc = *request != MPI_REQUEST_NULL ?
             PMPI_Wait(request, MPI_STATUS_IGNORE) : MPI_SUCCESS;

    ftw_req_mark_testall_unsafe();
    if (rc == MPI_SUCCESS)
        rc = PMPI_Grequest_start(late_query, late_free, late_cancel, NULL,
                                 request);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Grequest_complete(*request);
    return rc;
}

int ftw_op_posted(ftw_op_t *op, int rc, MPI_Request *request)
{
    if (ftw_unlikely(op->info.failed_at_start) && rc == MPI_SUCCESS)
        rc = late_failed_request(request);
    if (rc == MPI_SUCCESS)
        ftw_req_add(*request, &op->info);
    else
        op_unbounce(op);
    return rc;
}

/* ---- waiting ----------------------------------------------------------- */

/* The peer of a receive failed: take the request back from the MPI.  A
 * message that arrived before the failure is still delivered. */
/* May the receive be cancelled?  MPICH's cancel of a receive that
 * already matched a large (rendezvous) message waits for the transfer
 * to finish, forever if the sender died (seen with UCX's shared-memory
 * transports); such a receive from a failed process is given up without
 * a cancel, and its buffer quarantined.  A receive no larger than
 * FTW_EAGER_MAX can only have matched an eager message, which is whole
 * once matched. */
static int recv_cancellable(const ftw_reqinfo_t *info, int source)
{
#if defined(MPICH)
    MPI_Count size;

    if (source < 0 || info->buf == NULL)
        return 1;
    if (ftw_type_size(info->dt, &size) != MPI_SUCCESS)
        return 1;
    return info->count * size <= (MPI_Count)ftw_cfg.eager_max;
#else
    (void)info;
    (void)source;
    return 1;
#endif
}

/* The MPI holds on to a receive and may still write its buffer: keep
 * driving it, quarantine the buffer until nothing can write it.  A
 * bounced receive writes ftwrap's buffer (the graveyard keeps it), so the
 * user's is untouched and the receive ends with code. */
static int recv_abandon(const ftw_reqinfo_t *info, MPI_Request *req,
                        MPI_Status *status, int source, int code)
{
    ftw_comm_t *c = ftw_comm_get(info->comm);
    int writer = -1;

    if (c != NULL && source >= 0 && source < c->size)
        writer = c->peer_world[source];
    if (info->bounce != NULL) {
        ftw_grave_add(*req);
    } else {
        ftw_grave_add_recv(*req, ftw_quarantine_add(info->buf, info->count,
                                                    info->dt), writer);
        code = FTW_ERR_BUFFER_UNUSABLE;
    }
    *req = MPI_REQUEST_NULL;
    ftw_status_fail(status, code, source);
    return code;
}

/* Seconds a transfer that cannot be cancelled is driven before it is
 * given up: what a dead sender had already handed to the MPI (a
 * shared-memory transport's queued fragments), or a matched transfer
 * between two live processes that both cut it (a revocation), completes
 * in well under this. */
#define FTW_ABANDON_GRACE 0.05

/* Drive *req until it completes or FTW_ABANDON_GRACE has passed. */
static int req_settle(MPI_Request *req, MPI_Status *st)
{
    double end = PMPI_Wtime() + FTW_ABANDON_GRACE;
    int flag = 0;

    while (!flag && ftw_req_test(req, &flag, st) == MPI_SUCCESS && !flag &&
           PMPI_Wtime() < end)
        ;
    return flag;
}

static int req_cut(const ftw_reqinfo_t *info, MPI_Status *st);

/* A receive that was cancelled has ended (status st): code if the cancel
 * took, else the message it had matched (checked for cut copies, a
 * rendezvous finished). */
static int recv_ended(const ftw_reqinfo_t *info, MPI_Status *st,
                      MPI_Status *status, int source, int code)
{
    int cancelled = 0, rc = MPI_SUCCESS;

    PMPI_Test_cancelled(st, &cancelled);
    if (cancelled) {
        ftw_stat_add(FTW_STAT_RECV_CANCELLED, 1);
        ftw_status_fail(status, code, source);
        return code;
    }
    if (ftw_unlikely(ftw_cut_seq != 0))
        rc = req_cut(info, st);
    if (rc == MPI_SUCCESS && info->rndv)
        rc = op_rndv->finish(info, st);
    if (status != MPI_STATUS_IGNORE)
        *status = *st;
    return rc;
}

/* Seconds a receive of a message replayed to this process is waited for
 * (the message is on its way from this process itself: it comes with the
 * next progress, whichever thread makes it). */
#define FTW_REPLAY_GRACE 10.0

static int recv_cancel(const ftw_reqinfo_t *info, MPI_Request *req,
                       MPI_Status *status, int source, int code)
{
    MPI_Status st;
    int flag = 0;

    for (int i = 0; i < 3 && !flag; i++)
        ftw_req_test(req, &flag, &st);
    if (!flag && (info->rndv & FTW_RNDV_REPLAY)) {
        /* Never cancelled: a cancelled one would leave the replay to be
         * matched by a later receive of this process. */
        double end = PMPI_Wtime() + FTW_REPLAY_GRACE;

        while (!flag && ftw_req_test(req, &flag, &st) == MPI_SUCCESS &&
               !flag && PMPI_Wtime() < end)
            ftw_xport_progress();
    }
    if (!flag && recv_cancellable(info, source)) {
        ftw_req_cancel(req);
        for (int i = 0; i < 1000 && !flag; i++)
            ftw_req_test(req, &flag, &st);
    } else if (!flag) {
        flag = req_settle(req, &st);
    }
    if (!flag)
        return recv_abandon(info, req, status, source, code);
    return recv_ended(info, &st, status, source, code);
}

/* The peer of a send failed: an eager send may be done; anything else can
 * never finish. */
static int send_abandon(MPI_Request *req, MPI_Status *status, int dest,
                        int code)
{
    MPI_Status st;
    int flag = 0;

    ftw_req_test(req, &flag, &st);
    if (flag) {
        if (status != MPI_STATUS_IGNORE)
            *status = st;
        return MPI_SUCCESS;
    }
    ftw_grave_add(*req);
    *req = MPI_REQUEST_NULL;
    ftw_status_fail(status, code, dest);
    return code;
}

/* Ends a request: a receive is cancelled, a send (or a send-receive)
 * abandoned.  A send to a process that is alive is driven a grace first:
 * its receiver may have matched it already, and the MPI would go on
 * reading a buffer the program takes back (and frees) once the call
 * returns. */
static int op_cut(const ftw_reqinfo_t *info, MPI_Request *req,
                  MPI_Status *status, int peer, int code)
{
    ftw_comm_t *c = ftw_comm_get(info->comm);
    MPI_Status st;

    /* A rendezvous send's request is its FIN receive: a live receiver
     * may be pulling the buffer, its FIN is waited for first. */
    if ((info->rndv & FTW_RNDV_SEND) &&
        op_rndv->send_settle(info, req, &st)) {
        if (status != MPI_STATUS_IGNORE)
            *status = st;
        return MPI_SUCCESS;
    }
    if (info->kind == FTW_OP_RECV && info->peer2 < 0)
        return recv_cancel(info, req, status, peer, code);
    if (c != NULL && op_failed_peer(c, info) < 0 && req_settle(req, &st)) {
        if (status != MPI_STATUS_IGNORE)
            *status = st;
        return MPI_SUCCESS;
    }
    return send_abandon(req, status, peer, code);
}

/* Was the request's traffic cut by a drain since it was posted? */
int ftw_req_drained(const ftw_comm_t *c, const ftw_reqinfo_t *info)
{
    const ftw_p2p_view_t *v;

    /* Threads may post while another drains: what counts is whether the
     * request runs on the view now in use, not the sequence number it
     * read before its route (ftw_p2p_view_t). */
    if (ftw_unlikely(ftw_threaded) && info->kind != FTW_OP_COLL &&
        (v = ftw_comm_p2p(c)) != NULL) {
        if ((const void *)v != info->view)
            return 1;
    } else if (c->drain_seq > info->drain_seq) {
        return 1;
    }
    if (c->peer_drain_seq == NULL)
        return 0;
    return (info->peer >= 0 && info->peer < c->size &&
            c->peer_drain_seq[info->peer] > info->drain_seq) ||
           (info->peer2 >= 0 && info->peer2 < c->size &&
            c->peer_drain_seq[info->peer2] > info->drain_seq);
}

/*
 * A request a drain cut whose peer lives.  Given up, it would stay with
 * the MPI: a send its receiver had matched would go on reading a buffer
 * the program takes back, a receive would go on writing one.  So a
 * receive is cancelled and waited for (cancelled, or matched and then
 * whole), and a send is left to complete: a receive of the peer's had
 * matched it, or the peer's drain sink (drain.c) takes it and drops it,
 * either while the peer calls MPI.  Only a failure (of the peer; for a
 * wildcard receive, any in the communicator, now or before) ends the
 * wait early, as a failure ends any request.  A nonblocking check leaves it pending.
 * A send ends FTW_ERR_DRAINED unless it had completed at the first test;
 * a receive that had matched completes normally.
 */
static int drain_cut(ftw_comm_t *c, const ftw_reqinfo_t *info,
                     MPI_Request *req, MPI_Status *status, int blocking)
{
    int recv = info->kind == FTW_OP_RECV && info->peer2 < 0;
    uint32_t epoch0 = ftw_seen_epoch;
    MPI_Status st;
    ftw_poll_t p;
    int flag = 0, first = 1;

    /* A wildcard receive may have matched a message of a process that
     * failed since: with failures in the communicator it is cut as for a
     * failure.  A receive from a live process may be cancelled whatever
     * its size (the drain's own pass did): MPICH's cancel of a matched
     * large receive waits only for a dead sender. */
    ftw_comm_refresh(c);
    if (info->rndv || op_failed_peer(c, info) >= 0 ||
        (info->peer < 0 && c->nfailed > 0))
        return op_cut(info, req, status, info->peer, FTW_ERR_DRAINED);
    ftw_poll_init(&p);
    for (;;) {
        int rc = ftw_req_test(req, &flag, &st);

        if (rc != MPI_SUCCESS)
            return rc;
        if (flag)
            break;
        if (recv && first)
            ftw_req_cancel(req);    /* once per table record */
        first = 0;
        if (op_failed_peer(c, info) >= 0 ||
            (info->peer < 0 && ftw_comm_failed_since(c, epoch0)))
            return op_cut(info, req, status, info->peer, FTW_ERR_DRAINED);
        if (!blocking)
            return FTW_PENDING_CODE;
        ftw_poll_idle(&p);
        ftw_poll_changed(&p);
    }
    if (recv)
        return recv_ended(info, &st, status, info->peer, FTW_ERR_DRAINED);
    if (first) {
        if (status != MPI_STATUS_IGNORE)
            *status = st;
        return MPI_SUCCESS;
    }
    ftw_status_fail(status, FTW_ERR_DRAINED, info->peer);
    return FTW_ERR_DRAINED;
}

ftw_fate_t ftw_req_fate(ftw_comm_t *c, const ftw_reqinfo_t *info,
                        unsigned ask, int *bad_p)
{
    int bad;

    *bad_p = -1;
    if (info->kind == FTW_OP_COLL) {
        ftw_comm_refresh(c);
        return c->coll_gen != info->coll_gen ? FTW_FATE_COLL_CUT
                                             : FTW_FATE_LIVE;
    }
    if (ftw_unlikely(c->revoked))
        return FTW_FATE_REVOKED;
    if ((ask & FTW_ASK_DRAINED) && ftw_req_drained(c, info))
        return FTW_FATE_DRAINED;
    bad = op_failed_peer(c, info);
    if (bad >= 0) {
        *bad_p = bad;
        return FTW_FATE_PEER_FAILED;
    }
    if (info->peer == MPI_ANY_SOURCE && (info->kind == FTW_OP_RECV ||
                                         info->kind == FTW_OP_PROBE) &&
        ftw_comm_any_disabled(c))
        return FTW_FATE_ANY_DISABLED;
    if ((ask & FTW_ASK_INTERRUPTED) && c->interrupt &&
        ftw_comm_failed_since(c, info->epoch0))
        return FTW_FATE_INTERRUPTED;
    return FTW_FATE_LIVE;
}

int ftw_req_failcheck(const ftw_reqinfo_t *info, MPI_Request *req,
                      MPI_Status *status, int blocking)
{
    ftw_comm_t *c = ftw_comm_get(info->comm);
    int send = info->kind == FTW_OP_SEND || info->kind == FTW_OP_SSEND;
    int bad;

    if (c == NULL || *req == MPI_REQUEST_NULL)
        return FTW_PENDING_CODE;
    switch (ftw_req_fate(c, info, FTW_ASK_DRAINED |
                         (blocking ? FTW_ASK_INTERRUPTED : 0), &bad)) {
    case FTW_FATE_LIVE:
        return FTW_PENDING_CODE;
    case FTW_FATE_COLL_CUT:
        return coll_cut_off(c, info, req, status);
    case FTW_FATE_REVOKED:
        return op_cut(info, req, status, info->peer, MPIX_ERR_REVOKED);
    case FTW_FATE_DRAINED:
        return drain_cut(c, info, req, status, blocking);
    case FTW_FATE_PEER_FAILED:
        return send ? send_abandon(req, status, bad, FTW_ERR_PROC_FAIL_STOP)
                    : op_cut(info, req, status, bad, FTW_ERR_PROC_FAIL_STOP);
    case FTW_FATE_ANY_DISABLED:
        if (blocking)
            return recv_cancel(info, req, status, MPI_ANY_SOURCE,
                               FTW_ERR_PROC_FAIL_STOP);
        ftw_stat_add(FTW_STAT_ANY_DISABLED, 1);
        ftw_status_fail(status, FTW_ERR_ANY_SOURCE_DISABLED, MPI_ANY_SOURCE);
        return FTW_ERR_ANY_SOURCE_DISABLED;
    case FTW_FATE_INTERRUPTED:
        return op_cut(info, req, status, info->peer, FTW_ERR_INTERRUPTED);
    }
    return FTW_PENDING_CODE;
}

int ftw_req_doomed(const ftw_reqinfo_t *info)
{
    ftw_comm_t *c = ftw_comm_get(info->comm);
    int bad;

    return c != NULL && ftw_req_fate(c, info, 0, &bad) != FTW_FATE_LIVE;
}

/* Was the completed receive cancelled by a drain? */
static int req_cut_by_drain(const ftw_reqinfo_t *info, MPI_Status *st)
{
    ftw_comm_t *c;
    int cancelled = 0;

    if (ftw_unlikely(ftw_threaded)) {
        /* Another thread's drain may have cancelled it between taking its
         * number and publishing its view: any cancelled receive on a
         * drained communicator counts. */
        c = ftw_comm_get(info->comm);
        if (c == NULL || c->drain_seq == 0)
            return 0;
        PMPI_Test_cancelled(st, &cancelled);
        return cancelled;
    }
    if (atomic_load_explicit(&ftw_drain_seq, memory_order_relaxed) ==
        info->drain_seq)
        return 0;
    c = ftw_comm_get(info->comm);
    if (c == NULL || !ftw_req_drained(c, info))
        return 0;
    PMPI_Test_cancelled(st, &cancelled);
    return cancelled;
}

/* Did the death of the process it copied from leave the completed
 * request's data incomplete (buf/cut.h)?  FTW_ERR_PROC_FAIL_STOP if so. */
static int req_cut(const ftw_reqinfo_t *info, MPI_Status *st)
{
    void *buf = info->buf;
    MPI_Count count = info->count;
    MPI_Datatype dt = info->dt;

    if (info->kind == FTW_OP_COLL) {
        if (info->cut_seq == ftw_cut_seq ||
            !ftw_cut_since(info->cut_seq, ftw_comm_get(info->comm)))
            return MPI_SUCCESS;
    } else {
        if (info->kind != FTW_OP_RECV || ftw_cut_count == 0)
            return MPI_SUCCESS;
        if (info->bounce != NULL)
            ftw_bounce_native(info->bounce, &buf, &count, &dt);
        if (!ftw_cut_hit(buf, count, dt))
            return MPI_SUCCESS;
    }
    ftw_status_fail(st, FTW_ERR_PROC_FAIL_STOP,
                    st != MPI_STATUS_IGNORE ? st->MPI_SOURCE : info->peer);
    return FTW_ERR_PROC_FAIL_STOP;
}

_Atomic int ftw_late_failed;

int ftw_req_completed(const ftw_reqinfo_t *info, MPI_Status *st)
{
    if (info == NULL)
        return MPI_SUCCESS;
    if (ftw_unlikely(info->failed_at_start)) {
        ftw_status_fail(st, FTW_ERR_PROC_FAIL_STOP, info->peer);
        return FTW_ERR_PROC_FAIL_STOP;
    }
    if (ftw_unlikely(ftw_cut_seq != 0) && req_cut(info, st) != MPI_SUCCESS)
        return FTW_ERR_PROC_FAIL_STOP;
    if (info->kind != FTW_OP_RECV)
        return MPI_SUCCESS;
    if (req_cut_by_drain(info, st)) {
        ftw_status_fail(st, FTW_ERR_DRAINED, info->peer);
        return FTW_ERR_DRAINED;
    }
    if (ftw_unlikely(info->bounce != NULL))
        return ftw_bounce_finish(info->bounce, st);
    return MPI_SUCCESS;
}

int ftw_req_wait(const ftw_reqinfo_t *info, MPI_Request *req,
                 MPI_Status *status, int blocking)
{
    MPI_Status local;
    ftw_poll_t p;

    if (status == MPI_STATUS_IGNORE)
        status = &local;
    ftw_poll_init(&p);
    for (;;) {
        int flag = 0, rc = ftw_req_test(req, &flag, status);

        if (rc != MPI_SUCCESS)
            return rc;
        if (flag) {
            rc = ftw_req_completed(info, status);
            if (info != NULL && info->rndv && rc == MPI_SUCCESS)
                rc = op_rndv->finish_raise(info, status, "MPI_Wait");
            return rc;
        }
        if (ftw_poll_changed(&p) && info != NULL) {
            rc = ftw_req_failcheck(info, req, status, blocking);
            if (rc != FTW_PENDING_CODE)
                return rc;
        }
        ftw_poll_idle(&p);
    }
}

static int wait_one(const ftw_reqinfo_t *info, MPI_Request *req,
                    MPI_Status *status)
{
    return ftw_req_wait(info, req, status, 1);
}

#if defined(OPEN_MPI)
/* Open MPI's PMPI_Wait loops over opal_progress(), which calls every
 * registered progress callback on each pass: cheaper than a PMPI_Test per
 * pass, and the gap to the MPI's own blocking receive.  The callback
 * watches the receive this thread waits for; when the fast path must be
 * left (a failure published, ftw_noisy) it cancels it, which ends the
 * wait, and ftw_recv_fast posts the receive again, watched.  A receive
 * that matched before the cancel completes as usual: it is one of at most
 * FTW_EAGER_MAX bytes, so the message it matched is whole. */
typedef int (*fast_wait_cb_t)(void);
typedef int (*fast_wait_reg_t)(fast_wait_cb_t);

static FTW_TLS MPI_Request *fast_wait_req;
static FTW_TLS unsigned fast_wait_spins;
static FTW_TLS int fast_wait_cut;
static int fast_wait_on;

static int fast_wait_progress(void)
{
    MPI_Request *req = fast_wait_req;

    if (ftw_likely(req == NULL))
        return 0;
    if (ftw_likely(ftw_quiet())) {
        if ((++fast_wait_spins & 255) == 0)
            ftw_detect_peek();
        ftw_xport_progress();
        ftw_poll_backoff(fast_wait_spins);
        return 0;
    }
    fast_wait_req = NULL;
    fast_wait_cut = 1;
    PMPI_Cancel(req);
    return 0;
}

void ftw_fast_wait_init(void)
{
    fast_wait_reg_t reg = (fast_wait_reg_t)dlsym(RTLD_DEFAULT,
                                                 "opal_progress_register");

    fast_wait_on = reg != NULL && reg(fast_wait_progress) == 0;
    ftw_debug("fast-path receives wait in %s", fast_wait_on ?
              "PMPI_Wait (progress callback)" : "a PMPI_Test loop");
}

void ftw_fast_wait_fini(void)
{
    fast_wait_reg_t unreg = (fast_wait_reg_t)dlsym(RTLD_DEFAULT,
                                                   "opal_progress_unregister");

    if (fast_wait_on && unreg != NULL)
        unreg(fast_wait_progress);
    fast_wait_on = 0;
}

/* PMPI_Wait on a fast-path receive: 1 if it ended (rc), 0 if the
 * callback took it back (posted again in *req, or rc on failure). */
static int fast_wait(MPI_Request *req, MPI_Status *status, MPI_Comm comm,
                     int source, int tag, void *buf, MPI_Count count,
                     MPI_Datatype dt, int *rc_p)
{
    MPI_Status local;
    int cancelled = 0;

    if (status == MPI_STATUS_IGNORE)
        status = &local;
    fast_wait_spins = 0;
    fast_wait_cut = 0;
    fast_wait_req = req;
    *rc_p = PMPI_Wait(req, status);
    fast_wait_req = NULL;
    if (ftw_likely(!fast_wait_cut) || *rc_p != MPI_SUCCESS)
        return 1;
    PMPI_Test_cancelled(status, &cancelled);
    if (!cancelled)
        return 1;
    *rc_p = PMPI_Irecv(buf, (int)count, dt, source, tag, comm, req);
    return *rc_p != MPI_SUCCESS;
}
#else
void ftw_fast_wait_init(void)
{
}

void ftw_fast_wait_fini(void)
{
}
#endif

/* A fast-path receive that must be watched from now on: posted while
 * quiet, so no drain had moved anything (drain_seq 0), and every failure
 * now known is new to it (epoch0 0). */
static int recv_watched(MPI_Request *req, MPI_Status *status, MPI_Comm comm,
                        int source, const char *name, void *buf,
                        MPI_Count count, MPI_Datatype dt)
{
    ftw_op_t op;

    op.name = name;
    op.info = (ftw_reqinfo_t){ .comm = comm, .peer = source,
                               .peer2 = FTW_NO_PEER, .kind = FTW_OP_RECV,
                               .buf = buf, .count = count, .dt = dt };
    op.native = comm;
    op.npeer = source;
    op.npeer2 = FTW_NO_PEER;
    op.rc = MPI_SUCCESS;
    op.req = *req;
    op.req2 = MPI_REQUEST_NULL;
    op.tmp = NULL;
    op.bounceable = 0;
    return ftw_op_wait(&op, MPI_SUCCESS, status);
}

/* A fast-path receive completed (rc): fail it if a dead sender's cut
 * copy left its data short (buf/cut.h).  One branch until a cut. */
static int recv_fast_done(int rc, MPI_Status *status, MPI_Comm comm,
                          int source, const char *name, void *buf,
                          MPI_Count count, MPI_Datatype dt)
{
    if (ftw_likely(ftw_cut_count == 0) || rc != MPI_SUCCESS ||
        !ftw_cut_hit(buf, count, dt))
        return rc;
    ftw_status_fail(status, FTW_ERR_PROC_FAIL_STOP, source);
    return ftw_raise(comm, FTW_ERR_PROC_FAIL_STOP, name, source);
}

int ftw_recv_fast(MPI_Request *req, MPI_Status *status, MPI_Comm comm,
                  int source, int tag, const char *name, void *buf,
                  MPI_Count count, MPI_Datatype dt)
{
    unsigned spins = 0;

#if defined(OPEN_MPI)
    MPI_Count size;

    /* A wildcard receive keeps the test loop: taken back and posted again
     * it would be a new one, refused once a failure is known.  So does a
     * receive larger than FTW_EAGER_MAX: one that matched a large message
     * cannot be cancelled, and its wait would outlast a failed sender. */
    if (fast_wait_on && source >= 0 && count <= INT_MAX &&
        ftw_type_size(dt, &size) == MPI_SUCCESS &&
        count * size <= (MPI_Count)ftw_cfg.eager_max) {
        int rc;

        if (fast_wait(req, status, comm, source, tag, buf, count, dt, &rc))
            return recv_fast_done(rc, status, comm, source, name, buf,
                                  count, dt);
        return recv_watched(req, status, comm, source, name, buf, count, dt);
    }
#else
    (void)tag;
#endif
    for (;;) {
        int flag = 0, rc = PMPI_Test(req, &flag, status);

        if (ftw_likely(flag) || rc != MPI_SUCCESS) {
            if (source == MPI_PROC_NULL && rc == MPI_SUCCESS)
                break;      /* the status fix-up in ftw_op_wait */
            return recv_fast_done(rc, status, comm, source, name, buf,
                                  count, dt);
        }
        if (ftw_unlikely(!ftw_quiet()))
            break;
        if ((++spins & 255) == 0)
            ftw_detect_peek();
        ftw_xport_progress();
        ftw_poll_backoff(spins);
    }
    return recv_watched(req, status, comm, source, name, buf, count, dt);
}

/* A send-receive: both requests, each watched against its own peer. */
static int wait_pair(ftw_op_t *op, MPI_Status *status)
{
    ftw_reqinfo_t sinfo = op->info;
    int rc_recv, rc_send;

    sinfo.peer = op->info.peer2;
    sinfo.peer2 = FTW_NO_PEER;
    sinfo.kind = FTW_OP_SEND;
    op->info.peer2 = FTW_NO_PEER;
    rc_recv = wait_one(&op->info, &op->req, status);
    rc_send = wait_one(&sinfo, &op->req2, MPI_STATUS_IGNORE);
    op->info.peer2 = sinfo.peer;
    if (rc_recv != MPI_SUCCESS)
        return rc_recv;
    if (rc_send != MPI_SUCCESS)
        ftw_status_fail(status, rc_send, sinfo.peer);
    return rc_send;
}

/* The post failed half-way (a send-receive's send): withdraw the rest. */
static void op_withdraw(ftw_op_t *op)
{
    if (op->req != MPI_REQUEST_NULL) {
        int flag = 0;

        PMPI_Cancel(&op->req);
        for (int i = 0; i < 1000 && !flag; i++)
            PMPI_Test(&op->req, &flag, MPI_STATUS_IGNORE);
        if (!flag)
            ftw_grave_add(op->req);
    }
}

int ftw_op_wait(ftw_op_t *op, int rc, MPI_Status *status)
{
    MPI_Request bounced = MPI_REQUEST_NULL;

    /* A bounced receive is in the request table while it waits, so that
     * the graveyard can take its buffer if it is given up.  (Other owned
     * memory, a rendezvous receive's, stays with its caller.) */
    if (ftw_unlikely(op->info.bounce != NULL) && rc == MPI_SUCCESS)
        ftw_req_add(bounced = op->req, &op->info);
    else if (rc != MPI_SUCCESS)
        op_unbounce(op);
    if (rc != MPI_SUCCESS) {
        op_withdraw(op);
    } else if (op->req2 != MPI_REQUEST_NULL) {
        rc = wait_pair(op, status);
    } else {
        rc = wait_one(&op->info, &op->req, status);
    }
    if (bounced != MPI_REQUEST_NULL)
        ftw_req_del(bounced);
    if (op->tmp != NULL)
        free(op->tmp);
    if (rc == MPI_SUCCESS && op->info.peer == MPI_PROC_NULL &&
        status != MPI_STATUS_IGNORE) {
        /* What a blocking receive from MPI_PROC_NULL reports (MPICH 4.0's
         * nonblocking one, used here, leaves source and tag 0). */
        status->MPI_SOURCE = MPI_PROC_NULL;
        status->MPI_TAG = MPI_ANY_TAG;
        PMPI_Status_set_elements(status, MPI_BYTE, 0);
    }
    if (rc == MPI_SUCCESS)
        ftw_status_to_user(op->info.p2p_user, op->info.p2p_n, status);
    if (ftw_is_own_error(rc)) {
        ftw_comm_t *c = ftw_comm_get(op->info.comm);
        int bad = c ? op_failed_peer(c, &op->info) : -1;

        rc = ftw_raise(op->info.comm, rc, op->name, bad);
    }
    return rc;
}

void *ftw_op_copy_span(ftw_op_t *op, const void *buf, MPI_Count count,
                       MPI_Datatype dt)
{
    MPI_Count lo, hi;

    if (count <= 0)
        return (void *)buf;
    if (ftw_type_span(dt, count, &lo, &hi) != MPI_SUCCESS) {
        op->rc = MPI_ERR_TYPE;
        return NULL;
    }
    op->tmp = malloc((size_t)(hi - lo) + 1);
    if (op->tmp == NULL) {
        ftw_error("%s: out of memory for %lld bytes", op->name,
                  (long long)(hi - lo));
        op->rc = MPI_ERR_NO_MEM;
        return NULL;
    }
    memcpy(op->tmp, (const char *)buf + lo, (size_t)(hi - lo));
    return (char *)op->tmp - lo;
}
