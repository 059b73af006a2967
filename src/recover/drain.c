/*
 * Drain: cut all in-flight point-to-point traffic of a communicator.
 *
 * FTW_Comm_drain_all is a fault-tolerant collective over the survivors:
 * they agree (ftw_agree) on who failed, then every point-to-point request
 * outstanding on the communicator ends: a receive is cancelled, a send
 * given up, each completing with FTW_ERR_DRAINED unless it had already
 * finished (the application sees the outcome from its wait or test, or
 * at once in a blocking call in progress).  The survivors then move the
 * communicator's point-to-point traffic to a fresh native communicator
 * of their own (on the control communicator, PMPI_Comm_create_group), so
 * no message sent before the drain can be matched after it; messages
 * nobody matched stay behind on the old one, unread.
 *
 * FTW_Comm_drain_peer does the same between two processes: their
 * outstanding requests with each other end, and each sends the other a
 * marker on the communicator (tag MPI_TAG_UB, which a drained
 * communicator reserves) and discards whatever arrives from the other
 * before it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "recover/agree.h"
#include "recover/recover.h"
#include "core/comm.h"
#include "core/ft.h"
#include "core/lock.h"
#include "op/op.h"
#include "rndv/p2p_rndv.h"
#include "rndv/stash.h"
#include "util/log.h"
#include "util/stats.h"

#define TAG_DRAIN_COMM 30002

/* ---- the sink ------------------------------------------------------------ */

typedef struct sink {
    MPI_Comm comm;              /* a view a drain left */
    const ftw_comm_t *owner;
    struct sink *next;
} sink_t;

typedef struct sunk {
    MPI_Request req;            /* a dropped message's receive */
    void *buf;
    struct sunk *next;
} sunk_t;

_Atomic int ftw_drain_sinks;
static sink_t *sinks;
static sunk_t *sunk;
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;

static void sink_add(const ftw_comm_t *c, MPI_Comm comm)
{
    sink_t *k = malloc(sizeof(*k));

    if (k == NULL) {
        ftw_warn_sparse("out of memory: messages sent before a drain stay "
                        "unreceived (their senders wait)");
        return;
    }
    k->comm = comm;
    k->owner = c;
    ftw_mt_lock(&sink_lock);
    k->next = sinks;
    sinks = k;
    ftw_drain_sinks++;
    ftw_mt_unlock(&sink_lock);
}

/*
 * Take one message off comm into scratch memory; 1 if there was one.
 * Communicator creation over the survivors (validate, drain, shrink,
 * split) sends the MPI's own messages on the user's communicator with
 * ftwrap's tags 30001-30009: those stay for it (the sink waits for the
 * next pass).
 */
static int sink_take(MPI_Comm comm)
{
    MPI_Message msg;
    MPI_Status st;
    MPI_Count n = 0;
    sunk_t *d;
    int flag = 0;

    if (PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &st) !=
        MPI_SUCCESS || !flag || (st.MPI_TAG > 30000 && st.MPI_TAG < 30010))
        return 0;
    if (PMPI_Improbe(st.MPI_SOURCE, st.MPI_TAG, comm, &flag, &msg, &st) !=
        MPI_SUCCESS || !flag)
        return 0;
    PMPI_Get_elements_x(&st, MPI_BYTE, &n);
    d = malloc(sizeof(*d));
    if (d != NULL)
        d->buf = malloc((size_t)n + 1);
    if (d == NULL || d->buf == NULL ||
        PMPI_Imrecv(d->buf, (int)n, MPI_BYTE, &msg, &d->req) != MPI_SUCCESS) {
        /* The message stays matched and unreceived: its sender waits. */
        ftw_warn_sparse("out of memory: a message sent before a drain is "
                        "left unreceived");
        if (d != NULL)
            free(d->buf);
        free(d);
        return 1;
    }
    ftw_stat_add(FTW_STAT_DRAIN_DROPPED, 1);
    d->next = sunk;
    sunk = d;
    return 1;
}

void ftw_drain_sink_progress(void)
{
    if (ftw_mt_trylock(&sink_lock) != 0)
        return;     /* another thread is at it */
    for (sink_t *k = sinks; k != NULL; k = k->next)
        for (int i = 0; i < 16 && sink_take(k->comm); i++)
            ;
    for (sunk_t **pp = &sunk; *pp != NULL;) {
        sunk_t *d = *pp;
        MPI_Status st;
        int flag = 0, n = 0;

        PMPI_Test(&d->req, &flag, &st);
        if (!flag) {
            pp = &d->next;
            continue;
        }
        /* A rendezvous RTS: its first fragment goes too. */
        if (PMPI_Get_count(&st, MPI_BYTE, &n) == MPI_SUCCESS)
            ftw_rndv_drop(d->buf, n);
        *pp = d->next;
        free(d->buf);
        free(d);
    }
    ftw_mt_unlock(&sink_lock);
}

void ftw_drain_sink_forget(const ftw_comm_t *c)
{
    if (ftw_drain_sinks == 0)
        return;
    ftw_mt_lock(&sink_lock);
    for (sink_t **pp = &sinks; *pp != NULL;) {
        sink_t *k = *pp;

        if (k->owner != c) {
            pp = &k->next;
            continue;
        }
        *pp = k->next;
        free(k);
        ftw_drain_sinks--;
    }
    ftw_mt_unlock(&sink_lock);
}

/* Cancel the outstanding receives of comm (from peer, or from anyone if
 * peer < 0): they must not match anything the drain leaves behind.  Their
 * waits then report FTW_ERR_DRAINED (ftw_req_drained). */
static void cancel_receives(ftw_req_t *e, void *arg)
{
    const ftw_reqinfo_t *want = arg;

    /* Not a rendezvous send's FIN receive (its receiver may be pulling
     * the buffer: its wait settles it, ftw_rndv_send_settle), nor the
     * receive of a message replayed to this process (on its way from this
     * process: cancelled, it would be left for a later receive). */
    if (e->info.comm != want->comm || e->info.kind != FTW_OP_RECV ||
        e->info.persistent ||
        (e->info.rndv & (FTW_RNDV_SEND | FTW_RNDV_REPLAY)))
        return;
    if (want->peer >= 0 && e->info.peer != want->peer &&
        e->info.peer != MPI_ANY_SOURCE)
        return;
    ftw_req_cancel_once_locked(e);
}

/* A request the drain cancelled completes "cancelled"; its wait reports
 * FTW_ERR_DRAINED (ftw_req_completed). */

/* Move c's point-to-point traffic to a new communicator of the processes
 * not in failed[] (over the agreement's member list: an intercommunicator
 * gets one of both groups' survivors). */
static int drain_move(ftw_comm_t *c, const uint8_t *failed)
{
    MPI_Errhandler eh;
    /* After the agreement: the reserve serves if memory is short (the
     * others are about to make the communicator with this process). */
    ftw_p2p_view_t *v = ftw_agree_malloc_after(sizeof(*v));
    int *world = NULL, rc = MPI_ERR_NO_MEM, lo = 0, rlo = 0;

    if (v == NULL)
        return rc;
    memset(v, 0, sizeof(*v));
    v->of = ftw_agree_malloc_after(sizeof(int) * (size_t)c->size);
    v->user = ftw_agree_malloc_after(sizeof(int) * (size_t)c->size);
    if (c->is_inter) {
        world = ftw_agree_malloc_after(sizeof(int) *
                                       (size_t)(ftw_agree_members(c) + 1));
        if (world == NULL)
            goto out;
        lo = ftw_agree_member_list(c, world) - c->rank;
        rlo = lo == 0 ? c->nlocal : 0;
    }
    if (!v->of || !v->user)
        goto out;
    for (int r = 0; r < c->size; r++) {
        v->of[r] = failed[rlo + r] ? -1 : v->n;
        if (!failed[rlo + r])
            v->user[v->n++] = r;
    }
    rc = c->is_inter ?
         ftw_inter_survivors(failed, world, ftw_agree_members(c), lo,
                             c->nlocal, TAG_DRAIN_COMM, &v->comm) :
         ftw_comm_create_survivors(c, failed, 0xff, TAG_DRAIN_COMM,
                                   &v->comm);
    if (rc != MPI_SUCCESS)
        goto out;
    /* Native errors on the new communicator reach the application's
     * handler as they would on its own. */
    if (PMPI_Comm_get_errhandler(c->user, &eh) == MPI_SUCCESS) {
        PMPI_Comm_set_errhandler(v->comm, eh);
        if (eh != MPI_ERRORS_ARE_FATAL && eh != MPI_ERRORS_RETURN)
            PMPI_Errhandler_free(&eh);
    }
    /* Only drains change the view, one at a time per communicator (they
     * are collective over it). */
    v->prev = ftw_comm_p2p(c);
    atomic_store_explicit(&c->p2pv, v, memory_order_release);
    sink_add(c, v->prev != NULL ? v->prev->comm : c->user);
    if (v->prev == NULL) {
        ftw_p2p_moved++;
        ftw_noisy++;
    }
    v = NULL;
out:
    free(world);
    if (v != NULL) {
        free(v->of);
        free(v->user);
        free(v);
    }
    return rc;
}

/* After the agreement: end the old epoch's traffic, start the new one. */
static int drain_finish(ftw_comm_t *c, const uint8_t *failed, int flag,
                        void *unused)
{
    ftw_reqinfo_t want = { .comm = c->user, .peer = -1 };

    int rc;

    (void)flag;
    (void)unused;
    c->drain_seq = atomic_fetch_add(&ftw_drain_seq, 1) + 1;
    ftw_req_foreach(cancel_receives, &want);
    ftw_stash_drop(c->user, MPI_ANY_SOURCE, 0);
    ftw_stat_add(FTW_STAT_DRAINS, 1);
    rc = drain_move(c, failed);
    /* A request another thread posts meanwhile may take the new number
     * and the old view: its wait cuts it (ftw_req_drained compares
     * views). */
    return rc;
}

FTW_EXPORT int FTW_Comm_drain_all(MPI_Comm comm)
{
    ftw_comm_t *c;
    uint8_t *failed;
    int rc, flag;

    rc = ftw_agree_prepare_inter(comm, &c, &failed);
    if (rc != MPI_SUCCESS)
        return rc;
    ftw_pending_finish_all();
    rc = ftw_agree_settled(c, 1, 1, failed, &flag);
    if (rc == MPI_SUCCESS)
        rc = drain_finish(c, failed, flag, NULL);
    free(failed);
    return rc;
}

FTW_EXPORT int FTW_Icomm_drain_all(MPI_Comm comm, MPI_Request *request)
{
    ftw_comm_t *c;
    uint8_t *failed;
    int rc;

    if (request == NULL)
        return MPI_ERR_ARG;
    rc = ftw_agree_prepare(comm, &c, &failed);
    if (rc != MPI_SUCCESS)
        return rc;
    return ftw_pending_start(c, drain_finish, failed, NULL, 1, NULL,
                             request);
}

/* Receive and drop everything peer sent on c before its marker. */
static int drain_peer_discard(ftw_comm_t *c, int peer, int marker)
{
    const ftw_p2p_view_t *v = ftw_comm_p2p(c);
    ftw_reqinfo_t info = { .comm = c->user, .peer = peer,
                           .peer2 = FTW_NO_PEER, .kind = FTW_OP_RECV,
                           .view = v };
    MPI_Comm p2p = v != NULL ? v->comm : c->user;
    int np = ftw_p2p_rank(v, c->size, peer);

    for (;;) {
        MPI_Status st;
        MPI_Message msg;
        MPI_Request req;
        MPI_Count n = 0;
        void *tmp;
        int rc, flag = 0;

        /* The message probed is the one received (another thread's
         * receive cannot take it in between). */
        while (!flag) {
            rc = PMPI_Improbe(np, MPI_ANY_TAG, p2p, &flag, &msg, &st);
            if (rc != MPI_SUCCESS)
                return rc;
            if (!flag && ftw_comm_peer_failed(c, peer))
                return MPI_SUCCESS;     /* nothing more will come */
        }
        PMPI_Get_elements_x(&st, MPI_BYTE, &n);
        tmp = malloc((size_t)n + 1);
        if (tmp == NULL) {
            /* Matched, so taken off the queue all the same: received
             * truncated (the error returned, not raised). */
            MPI_Errhandler eh;

            if (PMPI_Comm_get_errhandler(p2p, &eh) == MPI_SUCCESS) {
                PMPI_Comm_set_errhandler(p2p, MPI_ERRORS_RETURN);
                PMPI_Mrecv(NULL, 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
                PMPI_Comm_set_errhandler(p2p, eh);
                PMPI_Errhandler_free(&eh);
            }
            return MPI_ERR_NO_MEM;
        }
        rc = PMPI_Imrecv(tmp, (int)n, MPI_BYTE, &msg, &req);
        if (rc != MPI_SUCCESS) {
            free(tmp);
            return rc;
        }
        rc = ftw_req_wait(&info, &req, MPI_STATUS_IGNORE, 1);
        free(tmp);
        if (rc != MPI_SUCCESS || st.MPI_TAG == marker)
            return MPI_SUCCESS;
    }
}

FTW_EXPORT int FTW_Comm_drain_peer(MPI_Comm comm, int peer)
{
    ftw_reqinfo_t want = { .comm = comm, .peer = peer };
    const ftw_p2p_view_t *v;
    ftw_comm_t *c;
    int *tag_ub, flag = 0, marker;
    char b = 0;

    ftw_wrap_check();
    c = ftw_comm_get(comm);
    if (c == NULL)
        return MPI_ERR_COMM;
    if (peer < 0 || peer >= c->size || peer == c->rank)
        return MPI_ERR_RANK;
    if (c->peer_drain_seq == NULL) {
        _Atomic uint32_t *seqs = calloc((size_t)c->size, sizeof(*seqs));
        _Atomic uint32_t *none = NULL;

        if (seqs == NULL)
            return MPI_ERR_NO_MEM;
        /* Another thread's drain_peer on c may have set it meanwhile. */
        if (!atomic_compare_exchange_strong(&c->peer_drain_seq, &none,
                                            seqs))
            free((void *)seqs);
        else
            /* Requests must record the drain sequence from now on: the
             * fast path, which records none, is over. */
            ftw_noisy++;
    }
    c->peer_drain_seq[peer] = atomic_fetch_add(&ftw_drain_seq, 1) + 1;
    ftw_req_foreach(cancel_receives, &want);
    ftw_stash_drop(c->user, peer, 0);
    ftw_stat_add(FTW_STAT_DRAINS, 1);
    v = ftw_comm_p2p(c);
    if (ftw_comm_peer_failed(c, peer) ||
        ftw_p2p_rank(v, c->size, peer) == FTW_EXCLUDED)
        return MPI_SUCCESS;
    PMPI_Comm_get_attr(comm, MPI_TAG_UB, &tag_ub, &flag);
    marker = flag ? *tag_ub : 32767;
    PMPI_Send(&b, 0, MPI_BYTE, ftw_p2p_rank(v, c->size, peer), marker,
              v != NULL ? v->comm : c->user);
    return drain_peer_discard(c, peer, marker);
}

FTW_EXPORT int FTW_Comm_set_interrupt(MPI_Comm comm, int flag)
{
    ftw_comm_t *c = ftw_comm_get(comm);

    if (c == NULL)
        return MPI_ERR_COMM;
    c->interrupt = flag != 0;
    return MPI_SUCCESS;
}
