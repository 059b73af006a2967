/*
 * FTW_Comm_validate and friends: agree on the failed processes of a
 * communicator, then re-enable its collectives on the survivors.
 */
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "recover/agree.h"
#include "recover/recover.h"
#include "core/comm.h"
#include "core/ft.h"
#include "op/op.h"
#include "util/log.h"
#include "util/stats.h"

#define TAG_SURVIVORS 30001

typedef struct pending pending_t;
static pending_t *pending_list;     /* nonblocking validates, in order */

/* c's collectives run on coll from now on (errors returned), over the
 * survivors surv/surv_of (taken, as is local_out). */
static void survivors_set(ftw_comm_t *c, MPI_Comm coll, int nsurv, int *surv,
                          int *surv_of, uint8_t *local_out)
{
    int *old_surv, *old_surv_of;
    uint8_t *old_local_out;

    PMPI_Comm_set_errhandler(coll, MPI_ERRORS_RETURN);
    ftw_comm_survivors_lock();
    c->coll = coll;
    c->nsurv = nsurv;
    old_surv = c->surv;
    old_surv_of = c->surv_of;
    old_local_out = c->local_out;
    c->surv = surv;
    c->surv_of = surv_of;
    c->local_out = local_out;
    ftw_comm_survivors_unlock();
    free(old_surv);
    free(old_surv_of);
    free(old_local_out);
}

/* Collectives of c run on the processes not in failed[] from now on;
 * on a fresh communicator of them unless the decision excludes nobody
 * and every member's collectives were active (flag: the AND of that),
 * which every member sees alike. */
static int validate_apply(ftw_comm_t *c, const uint8_t *failed, int flag)
{
    MPI_Comm coll;
    int *surv = ftw_agree_malloc_after(sizeof(int) * (size_t)c->size);
    int *surv_of = ftw_agree_malloc_after(sizeof(int) * (size_t)c->size);
    int nsurv = 0, rc;

    if (!surv || !surv_of) {
        rc = MPI_ERR_NO_MEM;
        goto out;
    }
    for (int r = 0; r < c->size; r++) {
        surv_of[r] = failed[r] ? -1 : nsurv;
        if (!failed[r])
            surv[nsurv++] = r;
    }
    if (nsurv == c->size && flag) {
        rc = MPI_SUCCESS;
        goto out;
    }
    /* A fresh communicator also leaves behind whatever the collectives
     * abandoned on the old one. */
    rc = ftw_comm_create_survivors(c, failed, 0xff, TAG_SURVIVORS, &coll);
    if (rc != MPI_SUCCESS)
        goto out;
    survivors_set(c, coll, nsurv, surv, surv_of, NULL);
    surv = surv_of = NULL;
out:
    free(surv);
    free(surv_of);
    return rc;
}

/* The decided failed ranks as a group of c's ranks. */
static int failed_group_of(ftw_comm_t *c, const uint8_t *failed,
                           MPI_Group *group)
{
    MPI_Group all;
    int *ranks = ftw_agree_malloc_after(sizeof(int) * (size_t)c->size);
    int n = 0, rc;

    *group = MPI_GROUP_EMPTY;
    if (ranks == NULL || PMPI_Comm_group(c->user, &all) != MPI_SUCCESS) {
        free(ranks);
        return MPI_ERR_NO_MEM;
    }
    for (int r = 0; r < c->size; r++)
        if (failed[r])
            ranks[n++] = r;
    rc = PMPI_Group_incl(all, n, ranks, group);
    PMPI_Group_free(&all);
    free(ranks);
    return rc;
}

int ftw_validate_finish(ftw_comm_t *c, const uint8_t *failed, int flag,
                        void *out)
{
    MPI_Group *failed_group = out;
    int rc = validate_apply(c, failed, flag);

    if (rc != MPI_SUCCESS)
        return rc;
    c->coll_active = 1;
    c->coll_gen++;
    ftw_stat_add(FTW_STAT_VALIDATES, 1);
    /* Out of memory here, the validate is done all the same: the error
     * says the group is missing (every member decided alike). */
    if (failed_group != NULL)
        return failed_group_of(c, failed, failed_group);
    return MPI_SUCCESS;
}

/* Nonblocking validates and drains started earlier finish first (see
 * ftw_validate_progress). */
void ftw_pending_finish_all(void)
{
    ftw_poll_t p;

    ftw_poll_init(&p);
    while (pending_list != NULL) {
        ftw_validate_progress();
        ftw_poll_changed(&p);
        ftw_poll_idle(&p);
    }
}

/* An intercommunicator of one job: its agreement runs over both groups
 * on the job's channel. */
static int inter_agrees(const ftw_comm_t *c)
{
    return c->is_inter && c->id != 0 && c->chan == NULL;
}

int ftw_agree_prepare_inter(MPI_Comm comm, ftw_comm_t **c_p,
                            uint8_t **failed_p)
{
    ftw_comm_t *c;

    ftw_wrap_check();
    c = ftw_comm_get(comm);
    if (c == NULL || !inter_agrees(c))
        return ftw_agree_prepare(comm, c_p, failed_p);
    *failed_p = ftw_agree_malloc((size_t)ftw_agree_members(c) + 1);
    if (*failed_p == NULL)
        return MPI_ERR_NO_MEM;
    ftw_comm_refresh(c);
    *c_p = c;
    return MPI_SUCCESS;
}

int ftw_agree_prepare(MPI_Comm comm, ftw_comm_t **c_p, uint8_t **failed_p)
{
    ftw_comm_t *c;

    ftw_wrap_check();
    c = ftw_comm_get(comm);
    if (c == NULL)
        return MPI_ERR_COMM;
    if (c->id == 0 || c->is_inter) {
        ftw_error("not possible on an intercommunicator, on one between "
                  "two jobs that ftwrap could not give a channel, or on one "
                  "ftwrap did not see made");
        return MPI_ERR_COMM;
    }
    *failed_p = ftw_agree_malloc((size_t)c->size + 1);
    if (*failed_p == NULL)
        return MPI_ERR_NO_MEM;
    ftw_comm_refresh(c);
    *c_p = c;
    return MPI_SUCCESS;
}

/* The processes failed[] marks among the member list world[] (world
 * ranks: one job), as a group. */
static int failed_world_group(const uint8_t *failed, const int *world,
                              int n, MPI_Group *group)
{
    MPI_Group wg;
    int *ranks = ftw_agree_malloc_after(sizeof(int) * (size_t)(n ? n : 1));
    int nf = 0, rc;

    *group = MPI_GROUP_EMPTY;
    if (ranks == NULL || PMPI_Comm_group(MPI_COMM_WORLD, &wg) != MPI_SUCCESS) {
        free(ranks);
        return MPI_ERR_NO_MEM;
    }
    for (int i = 0; i < n; i++)
        if (failed[i] & 1)
            ranks[nf++] = world[i];
    rc = PMPI_Group_incl(wg, nf, ranks, group);
    PMPI_Group_free(&wg);
    free(ranks);
    return rc;
}

/*
 * Validate of an intercommunicator of one job: the agreement runs over
 * both groups (ftw_agree_members), and when it excluded processes the
 * collectives move to an intercommunicator of both groups' survivors
 * (ftw_inter_survivors): surv/surv_of translate the remote group's ranks
 * (roots, rank-indexed buffers), local_out keeps the local group's
 * exclusions from cutting the collectives off again.  The failed group
 * holds the failed processes of both groups.
 */
static int validate_inter(ftw_comm_t *c, MPI_Group *failed_group)
{
    int n = ftw_agree_members(c), lo, flag, rc, nsurv = 0, rlo;
    int *world = ftw_agree_malloc(sizeof(int) * (size_t)(n + 1));
    uint8_t *failed = ftw_agree_malloc((size_t)n + 1);
    int *surv = ftw_agree_malloc(sizeof(int) * (size_t)(c->size + 1));
    int *surv_of = ftw_agree_malloc(sizeof(int) * (size_t)(c->size + 1));
    uint8_t *local_out = ftw_agree_malloc((size_t)c->nlocal + 1);
    MPI_Comm coll = MPI_COMM_NULL;

    rc = world && failed && surv && surv_of && local_out ? MPI_SUCCESS
                                                        : MPI_ERR_NO_MEM;
    if (rc != MPI_SUCCESS)
        goto out;
    lo = ftw_agree_member_list(c, world) - c->rank;
    rlo = lo == 0 ? c->nlocal : 0;
    ftw_pending_finish_all();
    ftw_comm_refresh(c);
    rc = ftw_agree_settled(c, c->coll_active, 0, failed, &flag);
    if (rc != MPI_SUCCESS)
        goto out;
    for (int r = 0; r < c->size; r++) {
        surv_of[r] = failed[rlo + r] & 1 ? -1 : nsurv;
        if (surv_of[r] >= 0)
            surv[nsurv++] = r;
    }
    for (int r = 0; r < c->nlocal; r++)
        local_out[r] = failed[lo + r] & 1;
    if (nsurv < c->size || memchr(local_out, 1, (size_t)c->nlocal) ||
        !flag) {
        uint64_t h = c->id * 0x9E3779B97F4A7C15ull + c->agree_seq;

        rc = ftw_inter_survivors(failed, world, n, lo, c->nlocal,
                                 TAG_SURVIVORS + (int)(h % 1000u), &coll);
        if (rc != MPI_SUCCESS)
            goto out;
        survivors_set(c, coll, nsurv, surv, surv_of, local_out);
        surv = surv_of = NULL;
        local_out = NULL;
    }
    c->coll_active = 1;
    c->coll_gen++;
    ftw_stat_add(FTW_STAT_VALIDATES, 1);
    rc = failed_world_group(failed, world, n, failed_group);
out:
    free(world);
    free(failed);
    free(surv);
    free(surv_of);
    free(local_out);
    return rc;
}

FTW_EXPORT int FTW_Comm_validate(MPI_Comm comm, MPI_Group *failed_group)
{
    ftw_comm_t *c;
    uint8_t *failed;
    int rc, flag;

    if (failed_group == NULL)
        return MPI_ERR_ARG;
    c = comm != MPI_COMM_NULL ? ftw_comm_get(comm) : NULL;
    if (c != NULL && inter_agrees(c)) {
        ftw_wrap_check();
        return validate_inter(c, failed_group);
    }
    rc = ftw_agree_prepare(comm, &c, &failed);
    if (rc != MPI_SUCCESS)
        return rc;
    ftw_pending_finish_all();
    rc = ftw_agree_settled(c, c->coll_active, 0, failed, &flag);
    if (rc == MPI_SUCCESS)
        rc = ftw_validate_finish(c, failed, flag, failed_group);
    free(failed);
    return rc;
}

FTW_EXPORT int FTW_Comm_validate_multiple(int count, MPI_Comm comms[],
                                          MPI_Group *failed_group)
{
    MPI_Group world, acc, g, gw;
    int rc = MPI_SUCCESS;

    if (count < 0 || failed_group == NULL || (count > 0 && comms == NULL))
        return MPI_ERR_ARG;
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    acc = MPI_GROUP_EMPTY;
    for (int i = 0; i < count && rc == MPI_SUCCESS; i++) {
        rc = FTW_Comm_validate(comms[i], &g);
        if (rc != MPI_SUCCESS)
            break;
        PMPI_Group_union(acc, g, &gw);
        PMPI_Group_free(&g);
        if (acc != MPI_GROUP_EMPTY)
            PMPI_Group_free(&acc);
        acc = gw;
    }
    PMPI_Group_free(&world);
    if (rc != MPI_SUCCESS) {
        if (acc != MPI_GROUP_EMPTY)
            PMPI_Group_free(&acc);
        return rc;
    }
    *failed_group = acc;
    return MPI_SUCCESS;
}

/* ---- nonblocking validate: a generalized request ----------------------- */

struct pending {
    struct pending *next;
    ftw_pending_finish_fn_t finish;
    ftw_comm_t *c;
    ftw_agree_t *agree;
    uint8_t *failed;
    void *out;
    int err;                /* what finish returned; the request's error */
    MPI_Request greq;
};

_Atomic int ftw_validates_pending;  /* entries in pending_list */

/* The request's status and error: what its finish returned.  The
 * record lives until the MPI frees the request (greq_free). */
static int greq_query(void *extra, MPI_Status *status)
{
    pending_t *v = extra;

    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    status->MPI_ERROR = v->err;
    return v->err;
}

static int greq_free(void *extra)
{
    free(extra);
    return MPI_SUCCESS;
}

static int greq_cancel(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

/* Pending validates finish in the order they started, the same on every
 * process: each ends with a blocking PMPI_Comm_create_group, and two
 * processes finishing them in different orders would wait for each other
 * forever. */
void ftw_validate_progress(void)
{
    while (pending_list != NULL) {
        pending_t *v = pending_list;

        if (!ftw_agree_test(v->agree))
            return;
        pending_list = v->next;
        ftw_validates_pending--;
        ftw_noisy--;
        {
            int flag, err;

            ftw_agree_result(v->agree, v->failed, &flag);
            /* A member ran short of memory: nobody goes on. */
            err = ftw_agree_error(v->agree);
            ftw_agree_free(v->agree);
            v->err = err != MPI_SUCCESS ? err :
                     v->finish(v->c, v->failed, flag, v->out);
        }
        free(v->failed);
        v->failed = NULL;
        PMPI_Grequest_complete(v->greq);
    }
}

int ftw_pending_start(ftw_comm_t *c, ftw_pending_finish_fn_t finish,
                      uint8_t *failed, const uint8_t *proposal, int flag,
                      void *out, MPI_Request *request)
{
    pending_t *v = calloc(1, sizeof(*v)), **tail;
    int rc;

    if (v == NULL) {
        free(failed);
        return MPI_ERR_NO_MEM;
    }
    rc = ftw_agree_start(c, proposal, flag, &v->agree);
    if (rc != MPI_SUCCESS) {
        free(failed);
        free(v);
        return rc;
    }
    v->finish = finish;
    v->c = c;
    v->failed = failed;
    v->out = out;
    ftw_req_mark_testall_unsafe();
    PMPI_Grequest_start(greq_query, greq_free, greq_cancel, v, &v->greq);
    *request = v->greq;
    for (tail = &pending_list; *tail != NULL; tail = &(*tail)->next)
        ;
    *tail = v;
    ftw_validates_pending++;
    ftw_noisy++;
    return MPI_SUCCESS;
}

FTW_EXPORT int FTW_Icomm_validate(MPI_Comm comm, MPI_Group *failed_group,
                                  MPI_Request *request)
{
    ftw_comm_t *c;
    uint8_t *failed;
    int rc;

    if (failed_group == NULL || request == NULL)
        return MPI_ERR_ARG;
    rc = ftw_agree_prepare(comm, &c, &failed);
    if (rc != MPI_SUCCESS)
        return rc;
    return ftw_pending_start(c, ftw_validate_finish, failed, NULL,
                             c->coll_active, failed_group, request);
}
