/* The probe stash (rndv/stash.h). */
#include "rndv/stash.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "detect/detect.h"
#include "core/comm.h"
#include "ftwrap.h"
#include "util/log.h"
#include "xport/xport.h"

_Atomic int ftw_stash_n;
static ftw_stash_t *head, **tail = &head;
static pthread_mutex_t stash_lock = PTHREAD_MUTEX_INITIALIZER;
/* Threads: receives hold it shared from their look at the stash to their
 * native post; a probe taking messages into the stash holds it alone
 * (taken before stash_lock). */
static pthread_rwlock_t post_lock = PTHREAD_RWLOCK_INITIALIZER;

void ftw_stash_post_begin(void)
{
    if (ftw_unlikely(ftw_threaded))
        pthread_rwlock_rdlock(&post_lock);
}

void ftw_stash_post_end(void)
{
    if (ftw_unlikely(ftw_threaded))
        pthread_rwlock_unlock(&post_lock);
}

int ftw_stash_post_begin_empty(void)
{
    ftw_stash_post_begin();
    if (ftw_stash_n == 0)
        return 1;
    ftw_stash_post_end();
    return 0;
}

static int matches(const ftw_stash_t *e, MPI_Comm comm, MPI_Comm native,
                   int nsrc, int tag)
{
    return e->comm == comm && e->native == native &&
           (nsrc == MPI_ANY_SOURCE || nsrc == e->nsrc) &&
           (tag == MPI_ANY_TAG || tag == e->tag);
}

/* The oldest matching entry and the link pointing at it. */
static ftw_stash_t **find(MPI_Comm comm, MPI_Comm native, int nsrc,
                          int tag)
{
    ftw_stash_t **pp;

    for (pp = &head; *pp != NULL; pp = &(*pp)->next)
        if (matches(*pp, comm, native, nsrc, tag))
            return pp;
    return NULL;
}

static void unlink_at(ftw_stash_t **pp)
{
    ftw_stash_t *e = *pp;

    *pp = e->next;
    if (tail == &e->next)
        tail = pp;
    ftw_gate_add(ftw_stash_n, -1);
}

/* Unlink entry e (stash_lock held). */
static void ftw_stash_unlink_locked(ftw_stash_t *e)
{
    for (ftw_stash_t **pp = &head; *pp != NULL; pp = &(*pp)->next)
        if (*pp == e) {
            unlink_at(pp);
            break;
        }
}

static void describe(const ftw_stash_t *e, MPI_Status *st)
{
    st->MPI_SOURCE = e->nsrc;
    st->MPI_TAG = e->tag;
    st->MPI_ERROR = MPI_SUCCESS;
    PMPI_Status_set_cancelled(st, 0);
    PMPI_Status_set_elements_x(st, MPI_BYTE, e->size);
}

/* Receive matched message msg of n bytes into e (its header, or a data
 * block of its own), watching its sender: a large message the MPI moves
 * itself may need the sender to finish. */
static int take_message(ftw_op_t *op, ftw_stash_t *e, MPI_Message *msg,
                        MPI_Count n, MPI_Status *mst)
{
    ftw_comm_t *c = ftw_comm_get(op->info.comm);
    int world = -1, src = mst->MPI_SOURCE, flag = 0, rc;
    void *dst = e->hdr;
    MPI_Request req;

    if (n != FTW_RTS_SIZE) {
        e->data = malloc(n > 0 ? (size_t)n : 1);
        if (e->data == NULL) {
            ftw_error("%s: no room for a message of %lld bytes taken "
                      "ahead of a probed one", op->name, (long long)n);
            return MPI_ERR_NO_MEM;
        }
        dst = e->data;
    }
    rc = ftw_imrecv_any(dst, n, MPI_BYTE, msg, &req);
    if (rc != MPI_SUCCESS) {
        ftw_error("%s: cannot take a message of %lld bytes ahead of a "
                  "probed one", op->name, (long long)n);
        free(e->data);
        e->data = NULL;
        return rc;
    }
    if (c != NULL && !c->is_inter && src >= 0 && src < c->size)
        world = c->peer_world[src];
    while (rc == MPI_SUCCESS && !flag) {
        rc = PMPI_Test(&req, &flag, mst);
        if (rc != MPI_SUCCESS || flag)
            break;
        ftw_xport_progress();
        if (world >= 0 && world < ftw_detect_world_size() &&
            ftw_detect_is_failed(world)) {
            /* Kept until the MPI lets go of it, with its buffer. */
            ftw_rndv_loose_add(req, e->data);
            e->data = NULL;
            return FTW_ERR_PROC_FAIL_STOP;
        }
    }
    e->n = n;
    return rc;
}

/* pull_in: the probed message is gone (another thread's receive took it
 * between the probe and the matched probes that take its source's older
 * messages).  Only threads calling MPI at once see this. */
#define STASH_GONE (-1)

/* Take the RTS-sized message st describes out of the MPI into a new
 * entry at the stash's end, after every older message from its source
 * (of other tags, which the probe did not match): entries from a source
 * are then all older than its messages still in the MPI, so a receive of
 * any tag selection that takes the oldest matching entry first keeps
 * MPI's order.  *e_p: the probed message's entry. */
static int pull_in(ftw_op_t *op, const MPI_Status *st, ftw_stash_t **e_p)
{
    for (;;) {
        ftw_stash_t *e = calloc(1, sizeof(*e));
        MPI_Message msg;
        MPI_Status mst;
        MPI_Count n = 0;
        int flag = 0, rc, probed;

        if (e == NULL) {
            ftw_error("%s: out of memory", op->name);
            return MPI_ERR_NO_MEM;
        }
        /* The oldest message of that source; the oldest of the probe's
         * tag is the one it saw: an older one would have matched too. */
        rc = PMPI_Improbe(st->MPI_SOURCE, MPI_ANY_TAG, op->native, &flag,
                          &msg, &mst);
        if (rc == MPI_SUCCESS && flag)
            rc = PMPI_Get_elements_x(&mst, MPI_BYTE, &n);
        if (rc == MPI_SUCCESS && !flag) {
            free(e);
            return STASH_GONE;
        }
        if (rc != MPI_SUCCESS) {
            ftw_error("%s: a matched probe of a probed message's source "
                      "failed", op->name);
            free(e);
            return rc;
        }
        probed = mst.MPI_TAG == st->MPI_TAG && n == FTW_RTS_SIZE;
        rc = take_message(op, e, &msg, n, &mst);
        if (rc != MPI_SUCCESS) {
            free(e);
            return rc;
        }
        e->comm = op->info.comm;
        e->native = op->native;
        e->nsrc = mst.MPI_SOURCE;
        ftw_status_to_user(op->info.p2p_user, op->info.p2p_n, &mst);
        e->usrc = mst.MPI_SOURCE;
        e->tag = mst.MPI_TAG;
        e->size = n;
        if (e->data == NULL && ftw_rndv_is_rts(e->hdr, FTW_RTS_SIZE))
            e->size = (MPI_Count)((const ftw_rts_t *)(void *)e->hdr)->size;
        *tail = e;
        tail = &e->next;
        ftw_gate_add(ftw_stash_n, 1);
        if (probed) {
            *e_p = e;
            return MPI_SUCCESS;
        }
    }
}

/* A matched probe's message that the MPI still holds, which an Iprobe
 * showed (st): matched now, without blocking (another thread's receive
 * may have taken it meanwhile: then *flag_p = 0).  The oldest of its
 * source and tag; if it is RTS-sized (not the one the Iprobe saw), it
 * goes into a new entry *e_p, not listed, as a stashed one would. */
static int match_rest(ftw_op_t *op, MPI_Status *st, int *flag_p,
                      MPI_Message *msg_p, ftw_stash_t **e_p)
{
    MPI_Count n = 0;
    MPI_Status u;
    ftw_stash_t *e;
    int rc;

    rc = PMPI_Improbe(st->MPI_SOURCE, st->MPI_TAG, op->native, flag_p, msg_p,
                      st);
    if (rc != MPI_SUCCESS || !*flag_p)
        return rc;
    PMPI_Get_elements_x(st, MPI_BYTE, &n);
    if (n != FTW_RTS_SIZE)
        return MPI_SUCCESS;
    if ((e = calloc(1, sizeof(*e))) == NULL)
        return MPI_ERR_NO_MEM;  /* the message stays matched: lost */
    rc = take_message(op, e, msg_p, n, st);
    if (rc != MPI_SUCCESS) {
        free(e);
        return rc;
    }
    u = *st;
    ftw_status_to_user(op->info.p2p_user, op->info.p2p_n, &u);
    e->comm = op->info.comm;
    e->native = op->native;
    e->nsrc = st->MPI_SOURCE;
    e->usrc = u.MPI_SOURCE;
    e->tag = st->MPI_TAG;
    e->size = ftw_rndv_is_rts(e->hdr, FTW_RTS_SIZE)
              ? (MPI_Count)((const ftw_rts_t *)(void *)e->hdr)->size : n;
    describe(e, st);
    *e_p = e;
    return MPI_SUCCESS;
}

int ftw_stash_look(ftw_op_t *op, int tag, MPI_Message *msg_p, int *flag_p,
                   MPI_Status *st, ftw_stash_t **e_p)
{
    ftw_stash_t **pp = NULL, *e = NULL;
    MPI_Count n = 0;
    int rc = MPI_SUCCESS, take = msg_p != NULL, alone = 0;

    *e_p = NULL;
    if (msg_p != NULL)
        *msg_p = MPI_MESSAGE_NULL;
    ftw_mt_lock(&stash_lock);
    if (ftw_stash_n > 0)
        pp = find(op->info.comm, op->native, op->npeer, tag);
    if (pp != NULL) {
        e = *pp;
        *flag_p = 1;
        goto out;
    }
    rc = PMPI_Iprobe(op->npeer, tag, op->native, flag_p, st);
    if (rc != MPI_SUCCESS || !*flag_p)
        goto out;
    PMPI_Get_elements_x(st, MPI_BYTE, &n);
    if (n == FTW_RTS_SIZE && ftw_threaded) {
        /* No receive posts while messages are taken into the stash: one
         * posted natively meanwhile would get a newer message than one
         * taken here, which it should have got first. */
        ftw_mt_unlock(&stash_lock);
        pthread_rwlock_wrlock(&post_lock);
        ftw_mt_lock(&stash_lock);
        alone = 1;
        if (ftw_stash_n > 0 &&
            (pp = find(op->info.comm, op->native, op->npeer, tag)) != NULL) {
            e = *pp;    /* another thread stashed one meanwhile */
            *flag_p = 1;
            goto out;
        }
    }
    if (n == FTW_RTS_SIZE)
        rc = pull_in(op, st, &e);
    else if (take)
        rc = match_rest(op, st, flag_p, msg_p, e_p);
    if (rc == STASH_GONE) {
        *flag_p = 0;
        rc = MPI_SUCCESS;
    }
out:
    /* Described, and taken, before another thread can take it. */
    if (e != NULL) {
        describe(e, st);
        if (take)
            ftw_stash_unlink_locked(e);
        *e_p = take ? e : NULL;
    }
    ftw_mt_unlock(&stash_lock);
    if (alone)
        pthread_rwlock_unlock(&post_lock);
    return rc;
}

ftw_stash_t *ftw_stash_take(const ftw_op_t *op, int tag)
{
    ftw_stash_t **pp, *e = NULL;

    ftw_mt_lock(&stash_lock);
    pp = find(op->info.comm, op->native, op->npeer, tag);
    if (pp != NULL) {
        e = *pp;
        unlink_at(pp);
    }
    ftw_mt_unlock(&stash_lock);
    return e;
}

void ftw_stash_drop(MPI_Comm comm, int usrc, int tell)
{
    ftw_stash_t *gone = NULL, **pp = &head;

    if (ftw_stash_n == 0)
        return;
    ftw_mt_lock(&stash_lock);
    while (*pp != NULL) {
        ftw_stash_t *e = *pp;

        if (e->comm != comm || (usrc != MPI_ANY_SOURCE && e->usrc != usrc)) {
            pp = &e->next;
            continue;
        }
        unlink_at(pp);
        e->next = gone;
        gone = e;
    }
    ftw_mt_unlock(&stash_lock);
    while (gone != NULL) {
        ftw_stash_t *e = gone;

        gone = e->next;
        if (tell && e->data == NULL && ftw_rndv_is_rts(e->hdr, FTW_RTS_SIZE))
            ftw_rndv_refuse((const ftw_rts_t *)(const void *)e->hdr);
        else if (e->data == NULL)
            ftw_rndv_drop(e->hdr, FTW_RTS_SIZE);
        free(e->data);
        free(e);
    }
}

int ftw_stash_replay(ftw_stash_t *e, MPI_Comm *comm_p, int *rank_p,
                     int *tag_p, int *src_p, int *tag0_p)
{
    int src = e->nsrc, tag0 = e->tag;
    void *buf = e->data;
    MPI_Count n = e->data != NULL ? e->n : FTW_RTS_SIZE;

    if (buf == NULL && (buf = malloc(FTW_RTS_SIZE)) != NULL)
        memcpy(buf, e->hdr, FTW_RTS_SIZE);
    free(e);
    if (buf == NULL) {
        ftw_error("out of memory for a probed message");
        return MPI_ERR_NO_MEM;
    }
    if (ftw_rndv_replay(buf, n, comm_p, rank_p, tag_p) != FTW_OK)
        return MPI_ERR_OTHER;
    *src_p = src;
    *tag0_p = tag0;
    return MPI_SUCCESS;
}
