/*
 * Persistent sends through the rendezvous (MPI_Send_init, MPI_Ssend_init,
 * MPI_Rsend_init and their large-count forms, of at least the threshold,
 * to a peer a transport reaches).
 *
 * The request the program holds is a persistent receive of the FIN word
 * on the rendezvous communicator (ftw_rndv_psend_new), made at init and
 * kept to MPI_Request_free, so its handle stays the same across starts.
 * Each MPI_Start exposes the data as it is then, starts that receive and
 * sends the RTS (ftw_rndv_psend_post); the MPI's waits and tests complete
 * it, and its record (FTW_RNDV_SEND, persistent, watched as a receive
 * from the destination) lets ftwrap's completion read the FIN and end a
 * round whose receiver failed, as for a one-shot rendezvous send.
 */
#include "rndv/p2p_rndv.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/comm.h"
#include "util/log.h"
#include "util/stats.h"
#include "xport/xport.h"

/* The MPI's persistent send: native_init, or native_init_c when the
 * count does not fit an int (only large-count calls pass such counts). */
static int psend_call(const void *buf, MPI_Count count, MPI_Datatype dt,
                      int dest, int tag, MPI_Comm comm, MPI_Request *request,
                      ftw_psend_init_fn_t native_init,
                      ftw_psend_init_c_fn_t native_init_c)
{
    if (count > INT_MAX)
        return native_init_c != NULL ? native_init_c(buf, count, dt, dest,
                                                     tag, comm, request)
                                     : MPI_ERR_COUNT;
    return native_init(buf, (int)count, dt, dest, tag, comm, request);
}

/* The program's call, as the generated wrapper would make it: the MPI's
 * persistent send. */
static int psend_native(const void *buf, MPI_Count count, MPI_Datatype dt,
                        int dest, int tag, MPI_Comm comm, int kind,
                        const char *name, MPI_Request *request,
                        ftw_psend_init_fn_t native_init,
                        ftw_psend_init_c_fn_t native_init_c)
{
    ftw_op_t op;

    if (ftw_quiet()) {
        int rc = psend_call(buf, count, dt, dest, tag, comm, request,
                            native_init, native_init_c);

        if (rc == MPI_SUCCESS)
            ftw_req_add_quiet(*request, comm, dest, kind, 1, NULL, 0,
                              MPI_DATATYPE_NULL);
        return rc;
    }
    ftw_op_begin(&op, name, comm, dest, (ftw_op_kind_t)kind);
    op.info.persistent = 1;
    op.posts = 1;
    if (ftw_op_refused(&op, MPI_STATUS_IGNORE)) {
        *request = MPI_REQUEST_NULL;
        return op.rc;
    }
    return ftw_op_posted(&op, psend_call(buf, count, dt, op.npeer, tag,
                                         op.native, request, native_init,
                                         native_init_c), request);
}

int ftw_rndv_psend_init(const void *buf, MPI_Count count, MPI_Datatype dt,
                        int dest, int tag, MPI_Comm comm, int kind,
                        const char *name, MPI_Request *request,
                        ftw_psend_init_fn_t native_init,
                        ftw_psend_init_c_fn_t native_init_c)
{
    ftw_rndv_psend_t *ps;
    ftw_status_t st;
    MPI_Count size;
    ftw_op_t op;
    int world = ftw_rndv_peer_world(comm, dest);

    if (world < 0 || ftw_type_size(dt, &size) != MPI_SUCCESS ||
        ftw_xport_for(world) == FTW_XPORT_ID_NATIVE)
        return psend_native(buf, count, dt, dest, tag, comm, kind, name,
                            request, native_init, native_init_c);
    ftw_op_begin(&op, name, comm, dest, (ftw_op_kind_t)kind);
    op.info.persistent = 1;
    op.posts = 1;
    if (ftw_op_refused(&op, MPI_STATUS_IGNORE)) {
        *request = MPI_REQUEST_NULL;
        return op.rc;
    }
    st = ftw_rndv_psend_new(buf, count, dt, count * size, world, &ps,
                            request);
    if (st == FTW_ST_UNSUPPORTED)   /* no FIN tag left, or unpackable */
        return ftw_op_posted(&op, psend_call(buf, count, dt, op.npeer, tag,
                                             op.native, request, native_init,
                                             native_init_c), request);
    if (st != FTW_OK) {
        *request = MPI_REQUEST_NULL;
        return ftw_raise(comm, st == FTW_ST_NO_MEMORY ? MPI_ERR_NO_MEM
                                                      : MPI_ERR_OTHER,
                         name, -1);
    }
    ps->tag = tag;
    ps->kind = kind;
    /* Watched like a receive from the destination, as a one-shot
     * rendezvous send's FIN receive is. */
    op.info.kind = FTW_OP_RECV;
    op.info.rndv = FTW_RNDV_SEND;
    op.info.owned = ps;
    op.info.buf = &ps->fin;
    op.info.count = 1;
    op.info.dt = MPI_UINT64_T;
    op.info.p2p_user = NULL;
    ftw_req_add(*request, &op.info);
    return MPI_SUCCESS;
}

/* MPI_Start of a persistent rendezvous send: a new round. */
static int psend_start(const ftw_reqinfo_t *info, MPI_Request *req,
                       const char *name)
{
    ftw_rndv_psend_t *ps = info->owned;
    ftw_op_t op;
    int xport;

    ftw_op_begin(&op, name, info->comm, info->peer, (ftw_op_kind_t)ps->kind);
    op.info.persistent = 1;
    op.posts = 1;
    if (ftw_op_refused(&op, MPI_STATUS_IGNORE))
        return op.rc;
    if (op.npeer < 0)
        return ftw_raise(info->comm, FTW_ERR_PROC_FAIL_STOP, name,
                         info->peer);
    xport = (int)ftw_xport_for_send(ps->world, (uint64_t)ps->size, 0, 1,
                                    ftw_rndv_both_ways());
    /* A round no transport can carry now (a verbs QP still being
     * reconnected, say) is pushed whole after its RTS. */
    if (ftw_rndv_psend_post(ps, xport, op.native, op.npeer, req) != FTW_OK) {
        ftw_warn_sparse("%s: rank %d cannot be reached by the rendezvous "
                        "now; this start is refused", name, info->peer);
        return ftw_raise(info->comm, MPI_ERR_OTHER, name, -1);
    }
    return MPI_SUCCESS;
}

int ftw_rndv_start(MPI_Request *req, const char *name)
{
    ftw_req_t *e = ftw_req_find(*req);

    /* The request being started is the caller's: its record stays. */
    if (e != NULL && e->info.persistent && (e->info.rndv & FTW_RNDV_SEND) &&
        e->info.owned != NULL) {
        ftw_reqinfo_t info = e->info;

        return psend_start(&info, req, name);
    }
    return ftw_rndv_started(*req) ? MPI_SUCCESS : FTW_PENDING_CODE;
}

int ftw_rndv_psend_round(const ftw_reqinfo_t *info, const MPI_Status *st)
{
    ftw_rndv_psend_t *ps = info->owned;
    int cancelled = 0;

    /* An inactive request's empty status: no round ended now. */
    if (st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG)
        return 0;
    PMPI_Test_cancelled(st, &cancelled);
    if (cancelled || ps == NULL)
        return 0;
    ps->started = 0;
    ftw_rndv_send_end(ps);      /* the receiver is done with the data */
    return 1;
}

/* Persistent rendezvous sends freed while a round was in flight: kept
 * until their FIN comes (or their receiver fails), then freed. */
typedef struct porphan {
    struct porphan *next;
    MPI_Request req;
    ftw_reqinfo_t info;
} porphan_t;

static porphan_t *porphans;
static _Atomic int porphans_n;
static pthread_mutex_t porphans_lock = PTHREAD_MUTEX_INITIALIZER;

/* The round of a freed request ended (status st): free it. */
static void porphan_end(MPI_Request *req, const ftw_reqinfo_t *info,
                        const MPI_Status *st)
{
    ftw_rndv_psend_round(info, st);
    PMPI_Request_free(req);
    ftw_rndv_psend_free(info->owned);
}

int ftw_rndv_psend_release(MPI_Request *req)
{
    ftw_req_t *e = ftw_req_find(*req);
    ftw_rndv_psend_t *ps;
    ftw_reqinfo_t info;
    porphan_t *o;
    MPI_Status st;
    int flag = 0;

    if (e == NULL || !e->info.persistent || !(e->info.rndv & FTW_RNDV_SEND) ||
        !ftw_req_remove(*req, &info))
        return 0;
    ps = info.owned;
    /* An inactive request completes at once with an empty status. */
    if (ps == NULL || PMPI_Test(req, &flag, &st) != MPI_SUCCESS || flag ||
        (o = malloc(sizeof(*o))) == NULL) {
        if (flag || ps == NULL) {
            porphan_end(req, &info, &st);
        } else {
            /* Out of memory: left to the MPI, its memory kept. */
            ftw_warn_sparse("out of memory: a freed persistent send is not "
                            "tracked");
            PMPI_Request_free(req);
        }
        *req = MPI_REQUEST_NULL;
        return 1;
    }
    o->req = *req;
    o->info = info;
    ftw_mt_lock(&porphans_lock);
    o->next = porphans;
    porphans = o;
    atomic_fetch_add(&porphans_n, 1);
    ftw_mt_unlock(&porphans_lock);
    *req = MPI_REQUEST_NULL;
    return 1;
}

int ftw_rndv_psend_progress(void)
{
    porphan_t **pp;
    int left;

    if ((left = atomic_load_explicit(&porphans_n, memory_order_relaxed)) ==
        0 || ftw_mt_trylock(&porphans_lock) != 0)
        return left;
    for (pp = &porphans; *pp != NULL;) {
        porphan_t *o = *pp;
        MPI_Status st;
        int flag = 0;

        PMPI_Test(&o->req, &flag, &st);
        if (!flag && ftw_req_doomed(&o->info)) {
            /* Its receiver failed: no FIN will come. */
            PMPI_Cancel(&o->req);
            for (int i = 0; i < 1000 && !flag; i++)
                PMPI_Test(&o->req, &flag, &st);
        }
        if (!flag) {
            pp = &o->next;
            continue;
        }
        ftw_debug("a freed persistent send to rank %d ended",
                  o->info.peer);
        porphan_end(&o->req, &o->info, &st);
        *pp = o->next;
        free(o);
        atomic_fetch_sub(&porphans_n, 1);
    }
    ftw_mt_unlock(&porphans_lock);
    return atomic_load_explicit(&porphans_n, memory_order_relaxed);
}
