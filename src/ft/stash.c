/* The probe stash (ft/stash.h). */
#include "ft/stash.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

int ftw_stash_n;
static ftw_stash_t *head, **tail = &head;
static pthread_mutex_t stash_lock = PTHREAD_MUTEX_INITIALIZER;

static int matches(const ftw_stash_t *e, MPI_Comm comm, int nsrc, int tag)
{
    return e->comm == comm && (nsrc == MPI_ANY_SOURCE || nsrc == e->nsrc) &&
           (tag == MPI_ANY_TAG || tag == e->tag);
}

/* The oldest matching entry and the link pointing at it. */
static ftw_stash_t **find(MPI_Comm comm, int nsrc, int tag)
{
    ftw_stash_t **pp;

    for (pp = &head; *pp != NULL; pp = &(*pp)->next)
        if (matches(*pp, comm, nsrc, tag))
            return pp;
    return NULL;
}

static void unlink_at(ftw_stash_t **pp)
{
    ftw_stash_t *e = *pp;

    *pp = e->next;
    if (tail == &e->next)
        tail = pp;
    ftw_stash_n--;
}

static void describe(const ftw_stash_t *e, MPI_Status *st)
{
    st->MPI_SOURCE = e->nsrc;
    st->MPI_TAG = e->tag;
    st->MPI_ERROR = MPI_SUCCESS;
    PMPI_Status_set_cancelled(st, 0);
    PMPI_Status_set_elements_x(st, MPI_BYTE, e->size);
}

/* Take the RTS-sized message st describes out of the MPI into a new
 * entry at the stash's end. */
static int pull_in(ftw_op_t *op, const MPI_Status *st, ftw_stash_t **e_p)
{
    ftw_stash_t *e = calloc(1, sizeof(*e));
    MPI_Message msg;
    MPI_Status mst;
    int flag = 0, rc;

    if (e == NULL) {
        ftw_error("%s: out of memory", op->name);
        return MPI_ERR_NO_MEM;
    }
    /* The oldest message of that source and tag is the one the probe
     * saw: an older one would have matched the probe too. */
    rc = PMPI_Improbe(st->MPI_SOURCE, st->MPI_TAG, op->native, &flag, &msg,
                      &mst);
    if (rc == MPI_SUCCESS && flag)
        rc = PMPI_Mrecv(e->hdr, FTW_RTS_SIZE, MPI_BYTE, &msg, &mst);
    if (rc != MPI_SUCCESS || !flag) {
        ftw_error("%s: the probed message went away", op->name);
        free(e);
        return rc != MPI_SUCCESS ? rc : MPI_ERR_INTERN;
    }
    e->comm = op->info.comm;
    e->nsrc = mst.MPI_SOURCE;
    ftw_status_to_user(op->info.p2p_user, op->info.p2p_n, &mst);
    e->usrc = mst.MPI_SOURCE;
    e->tag = mst.MPI_TAG;
    e->size = FTW_RTS_SIZE;
    if (ftw_rndv_is_rts(e->hdr, FTW_RTS_SIZE))
        e->size = (MPI_Count)((const ftw_rts_t *)(void *)e->hdr)->size;
    *tail = e;
    tail = &e->next;
    ftw_stash_n++;
    *e_p = e;
    return MPI_SUCCESS;
}

int ftw_stash_look(ftw_op_t *op, int tag, int *flag_p, MPI_Status *st,
                   ftw_stash_t **e_p)
{
    ftw_stash_t **pp, *e = NULL;
    MPI_Count n = 0;
    int rc = MPI_SUCCESS;

    *e_p = NULL;
    pthread_mutex_lock(&stash_lock);
    pp = ftw_stash_n > 0 ? find(op->info.comm, op->npeer, tag) : NULL;
    if (pp != NULL) {
        e = *pp;
        *flag_p = 1;
        goto out;
    }
    rc = PMPI_Iprobe(op->npeer, tag, op->native, flag_p, st);
    if (rc != MPI_SUCCESS || !*flag_p)
        goto out;
    PMPI_Get_elements_x(st, MPI_BYTE, &n);
    if (n == FTW_RTS_SIZE)
        rc = pull_in(op, st, &e);
out:
    pthread_mutex_unlock(&stash_lock);
    if (e != NULL) {
        describe(e, st);
        *e_p = e;
    }
    return rc;
}

ftw_stash_t *ftw_stash_take(const ftw_op_t *op, int tag)
{
    ftw_stash_t **pp, *e = NULL;

    pthread_mutex_lock(&stash_lock);
    pp = find(op->info.comm, op->npeer, tag);
    if (pp != NULL) {
        e = *pp;
        unlink_at(pp);
    }
    pthread_mutex_unlock(&stash_lock);
    return e;
}

void ftw_stash_drop(MPI_Comm comm, int usrc, int tell)
{
    ftw_stash_t *gone = NULL, **pp = &head;

    if (ftw_stash_n == 0)
        return;
    pthread_mutex_lock(&stash_lock);
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
    pthread_mutex_unlock(&stash_lock);
    while (gone != NULL) {
        ftw_stash_t *e = gone;

        gone = e->next;
        if (tell && ftw_rndv_is_rts(e->hdr, FTW_RTS_SIZE))
            ftw_rndv_refuse((const ftw_rts_t *)(const void *)e->hdr);
        free(e);
    }
}

void ftw_stash_remove(ftw_stash_t *e)
{
    pthread_mutex_lock(&stash_lock);
    for (ftw_stash_t **pp = &head; *pp != NULL; pp = &(*pp)->next)
        if (*pp == e) {
            unlink_at(pp);
            break;
        }
    pthread_mutex_unlock(&stash_lock);
}

int ftw_stash_replay(ftw_stash_t *e, MPI_Comm *comm_p, int *rank_p,
                     int *tag_p, int *src_p, int *tag0_p)
{
    int src = e->nsrc, tag0 = e->tag;

    if (ftw_rndv_replay(e->hdr, comm_p, rank_p, tag_p) != FTW_OK) {
        free(e);
        return MPI_ERR_OTHER;
    }
    free(e);
    *src_p = src;
    *tag0_p = tag0;
    return MPI_SUCCESS;
}
