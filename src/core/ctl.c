/* The control channel: receive, match, park (see ctl.h). */
#include "core/ctl.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "detect/detect.h"
#include "core/comm.h"
#include "core/lock.h"
#include "core/request.h"
#include "util/log.h"

MPI_Comm ftw_ctl_comm = MPI_COMM_NULL;

static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static ftw_ctl_msg_t *parked;       /* oldest first */
static ftw_ctl_msg_t **parked_tail = &parked;
static uint32_t parked_epoch;       /* failures looked at by the sweep */

struct ftw_ctl_chan {
    struct ftw_ctl_chan *next;      /* on chans, under ctl_lock */
    MPI_Comm comm;
    int refs;                       /* under ctl_lock */
    int n;
    int ids[];                      /* [n] */
};
static ftw_ctl_chan_t *chans;       /* open ones, read by receive() */

ftw_ctl_chan_t *ftw_ctl_chan_open(MPI_Comm comm, const int *ids, int n)
{
    ftw_ctl_chan_t *ch = malloc(sizeof(*ch) + sizeof(int) * (size_t)n);
    MPI_Comm dup = MPI_COMM_NULL;
    int rc;

    /* Every member calls the duplicate, even one out of memory: the
     * others would wait in it.  A member dying meanwhile makes the
     * others give it up. */
    rc = ftw_comm_dup_watched(comm, ids, n, &dup);
    if (rc != MPI_SUCCESS || ch == NULL) {
        ftw_error("no control channel for a communicator with members in "
                  "two jobs (%s): no revocation or agreement on it",
                  ch == NULL ? "out of memory" :
                  rc == FTW_ERR_PROC_FAIL_STOP ? "a member failed" :
                  "MPI_Comm_dup failed");
        if (dup != MPI_COMM_NULL)
            PMPI_Comm_free(&dup);
        free(ch);
        return NULL;
    }
    PMPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    ch->comm = dup;
    ch->refs = 1;
    ch->n = n;
    memcpy(ch->ids, ids, sizeof(int) * (size_t)n);
    ftw_mt_lock(&ctl_lock);
    ch->next = chans;
    chans = ch;
    ftw_mt_unlock(&ctl_lock);
    return ch;
}

void ftw_ctl_chan_hold(ftw_ctl_chan_t *ch)
{
    ftw_mt_lock(&ctl_lock);
    ch->refs++;
    ftw_mt_unlock(&ctl_lock);
}

void ftw_ctl_chan_put(ftw_ctl_chan_t *ch)
{
    int last, finalized = 0;

    if (ch == NULL)
        return;
    ftw_mt_lock(&ctl_lock);
    last = --ch->refs == 0;
    if (last) {
        for (ftw_ctl_chan_t **pp = &chans; *pp != NULL; pp = &(*pp)->next) {
            if (*pp == ch) {
                *pp = ch->next;
                break;
            }
        }
    }
    ftw_mt_unlock(&ctl_lock);
    if (!last)
        return;
    /* A process that is gone may leave sends of ours pending: the MPI
     * finishes or keeps them, the duplicate's release waits for none.
     * After MPI_Finalize the MPI has freed it. */
    if (PMPI_Finalized(&finalized) == MPI_SUCCESS && !finalized)
        PMPI_Comm_free(&ch->comm);
    free(ch);
}

int ftw_ctl_isend(ftw_ctl_chan_t *ch, int rank, int id, const void *buf,
                  int len, int tag, MPI_Request *req)
{
    return PMPI_Isend(buf, len, MPI_BYTE, ch != NULL ? rank : id, tag,
                      ch != NULL ? ch->comm : ftw_ctl_comm, req);
}

int ftw_ctl_init(void)
{
    if (PMPI_Comm_dup(MPI_COMM_WORLD, &ftw_ctl_comm) != MPI_SUCCESS) {
        ftw_error("MPI_Comm_dup of MPI_COMM_WORLD for the control channel "
                  "failed");
        return MPI_ERR_INTERN;
    }
    PMPI_Comm_set_errhandler(ftw_ctl_comm, MPI_ERRORS_RETURN);
    return MPI_SUCCESS;
}

void ftw_ctl_fini(void)
{
    ftw_mt_lock(&ctl_lock);
    while (parked != NULL) {
        ftw_ctl_msg_t *m = parked;

        parked = m->next;
        free(m);
    }
    parked_tail = &parked;
    chans = NULL;               /* the MPI's finalize frees their comms */
    ftw_mt_unlock(&ctl_lock);
}

static void park_locked(ftw_ctl_msg_t *m)
{
    m->next = NULL;
    *parked_tail = m;
    parked_tail = &m->next;
}

/* Unlink and return the first parked message of tag that match takes. */
static ftw_ctl_msg_t *unpark_locked(int tag, ftw_ctl_match_fn_t match,
                                    void *arg)
{
    for (ftw_ctl_msg_t **pp = &parked; *pp != NULL; pp = &(*pp)->next) {
        ftw_ctl_msg_t *m = *pp;

        if (m->tag != tag || !match(&m->u.hdr, arg))
            continue;
        *pp = m->next;
        if (parked_tail == &m->next)
            parked_tail = pp;
        return m;
    }
    return NULL;
}

/* A process known failed takes part in no exchange that starts after
 * its failure was learned, and the ones in progress have looked for its
 * messages already: what it left parked is dropped. */
static void sweep_locked(void)
{
    uint32_t epoch = atomic_load_explicit(&ftw_fail_epoch,
                                          memory_order_acquire);

    if (epoch == parked_epoch)
        return;
    parked_epoch = epoch;
    for (ftw_ctl_msg_t **pp = &parked; *pp != NULL;) {
        ftw_ctl_msg_t *m = *pp;

        if (!ftw_detect_is_failed(m->from)) {
            pp = &m->next;
            continue;
        }
        *pp = m->next;
        free(m);
    }
    parked_tail = &parked;
    while (*parked_tail != NULL)
        parked_tail = &(*parked_tail)->next;
}

/* A message of tag on the job's channel or a communicator's own (the
 * job's first), matched; 0 if none is here. */
static int probe_any_locked(int tag, MPI_Message *mh, MPI_Status *st,
                            int *from)
{
    int flag = 0;

    if (PMPI_Improbe(MPI_ANY_SOURCE, tag, ftw_ctl_comm, &flag, mh, st) ==
            MPI_SUCCESS && flag) {
        *from = st->MPI_SOURCE;
        return 1;
    }
    for (ftw_ctl_chan_t *ch = chans; ch != NULL; ch = ch->next) {
        if (PMPI_Improbe(MPI_ANY_SOURCE, tag, ch->comm, &flag, mh, st) ==
                MPI_SUCCESS && flag) {
            *from = st->MPI_SOURCE >= 0 && st->MPI_SOURCE < ch->n ?
                    ch->ids[st->MPI_SOURCE] : -1;
            return 1;
        }
    }
    return 0;
}

/* One message of tag off the channels, or NULL. */
static ftw_ctl_msg_t *receive(int tag)
{
    MPI_Message mh;
    MPI_Status st;
    ftw_ctl_msg_t *m;
    int len = 0, from = -1;

    if (!probe_any_locked(tag, &mh, &st, &from))
        return NULL;
    PMPI_Get_count(&st, MPI_BYTE, &len);
    m = malloc(offsetof(ftw_ctl_msg_t, u) +
               (size_t)(len > (int)sizeof(ftw_ctl_hdr_t) ?
                        len : (int)sizeof(ftw_ctl_hdr_t)));
    if (m == NULL) {
        /* Taken and lost: the exchange waiting for it stalls, so say so. */
        ftw_error("out of memory for a control message of %d bytes", len);
        PMPI_Mrecv(NULL, 0, MPI_BYTE, &mh, MPI_STATUS_IGNORE);
        return NULL;
    }
    if (PMPI_Mrecv(m->u.data, len, MPI_BYTE, &mh, MPI_STATUS_IGNORE) !=
        MPI_SUCCESS) {
        ftw_warn_sparse("control message of %d bytes from world rank %d "
                        "could not be received", len, from);
        free(m);
        return NULL;
    }
    m->tag = tag;
    m->from = from;
    m->len = len;
    if (len < (int)sizeof(ftw_ctl_hdr_t)) {
        ftw_warn_sparse("control message of %d bytes from world rank %d "
                        "dropped", len, m->from);
        free(m);
        return NULL;
    }
    return m;
}

ftw_ctl_msg_t *ftw_ctl_take(int tag, ftw_ctl_match_fn_t match, void *arg)
{
    ftw_ctl_msg_t *m;

    ftw_mt_lock(&ctl_lock);
    sweep_locked();
    m = unpark_locked(tag, match, arg);
    while (m == NULL) {
        m = receive(tag);
        if (m == NULL)
            break;
        if (match(&m->u.hdr, arg))
            break;
        park_locked(m);
        m = NULL;
    }
    ftw_mt_unlock(&ctl_lock);
    return m;
}

ftw_ctl_msg_t *ftw_ctl_take_parked(int tag, ftw_ctl_match_fn_t match,
                                   void *arg)
{
    ftw_ctl_msg_t *m;

    if (parked == NULL)
        return NULL;
    ftw_mt_lock(&ctl_lock);
    sweep_locked();
    m = unpark_locked(tag, match, arg);
    ftw_mt_unlock(&ctl_lock);
    return m;
}

void ftw_ctl_send_finish(MPI_Request *req, int peer)
{
    int flag = 0;

    while (*req != MPI_REQUEST_NULL) {
        PMPI_Test(req, &flag, MPI_STATUS_IGNORE);
        if (!flag && ftw_detect_is_failed(peer)) {
            ftw_grave_add(*req);
            *req = MPI_REQUEST_NULL;
        }
    }
}
