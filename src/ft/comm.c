/* The per-communicator state table and failure accounting. */
#include "ft/comm.h"

#include <pthread.h>
#include <stdlib.h>

#include "detect/detect.h"
#include "ft/stash.h"
#include "util/log.h"
#include "util/stats.h"

static ftw_comm_t *comm_table;
int ftw_p2p_moved;
_Atomic uint32_t ftw_drain_seq;
static pthread_mutex_t comm_lock = PTHREAD_MUTEX_INITIALIZER;

static ftw_comm_t *comm_find_locked(MPI_Comm comm)
{
    ftw_comm_t *c;

    HASH_FIND(hh, comm_table, &comm, sizeof(comm), c);
    return c;
}

/* World ranks of every member of group, or NULL. */
static int *group_world_ranks(MPI_Group group, int n)
{
    MPI_Group world;
    int *ranks = malloc(sizeof(int) * (size_t)(n ? n : 1));
    int *out = malloc(sizeof(int) * (size_t)(n ? n : 1));

    if (ranks == NULL || out == NULL)
        goto err_free;
    for (int i = 0; i < n; i++)
        ranks[i] = i;
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    PMPI_Group_translate_ranks(group, n, ranks, world, out);
    PMPI_Group_free(&world);
    free(ranks);
    return out;

err_free:
    free(ranks);
    free(out);
    return NULL;
}

static void comm_free_record(ftw_comm_t *c)
{
    free(c->peer_world);
    free(c->local_world);
    free(c->surv);
    free(c->surv_of);
    free(c->p2p_of);
    free(c->p2p_user);
    free(c->peer_drain_seq);
    while (c->old_maps != NULL) {
        struct ftw_map *m = c->old_maps;

        c->old_maps = m->next;
        free(m->map);
        free(m);
    }
    free(c);
}

static ftw_comm_t *comm_new(MPI_Comm comm)
{
    ftw_comm_t *c = calloc(1, sizeof(*c));
    MPI_Group g;

    if (c == NULL)
        goto err;
    c->user = comm;
    c->native = comm;
    c->ctl = MPI_COMM_NULL;
    c->coll = comm;
    c->p2p = comm;
    c->coll_active = 1;
    PMPI_Comm_test_inter(comm, &c->is_inter);
    PMPI_Comm_rank(comm, &c->rank);
    if (c->is_inter) {
        PMPI_Comm_remote_size(comm, &c->size);
        PMPI_Comm_remote_group(comm, &g);
    } else {
        PMPI_Comm_size(comm, &c->size);
        PMPI_Comm_group(comm, &g);
    }
    c->peer_world = group_world_ranks(g, c->size);
    c->nsurv = c->size;
    PMPI_Group_free(&g);
    if (c->peer_world == NULL)
        goto err_free;
    if (c->is_inter) {
        PMPI_Comm_size(comm, &c->nlocal);
        PMPI_Comm_group(comm, &g);
        c->local_world = group_world_ranks(g, c->nlocal);
        PMPI_Group_free(&g);
        if (c->local_world == NULL)
            goto err_free;
    }
    return c;

err_free:
    comm_free_record(c);
err:
    ftw_error("out of memory for a communicator record");
    return NULL;
}

/* Insert c unless the handle is already known; returns the record in the
 * table. */
static ftw_comm_t *comm_insert(ftw_comm_t *c)
{
    ftw_comm_t *old;

    pthread_mutex_lock(&comm_lock);
    old = comm_find_locked(c->user);
    if (old == NULL)
        HASH_ADD(hh, comm_table, user, sizeof(c->user), c);
    pthread_mutex_unlock(&comm_lock);
    if (old != NULL) {
        MPI_Comm ctl = c->ctl;

        comm_free_record(c);
        if (ctl != MPI_COMM_NULL)
            PMPI_Comm_free(&ctl);
        return old;
    }
    ftw_stat_add(FTW_STAT_COMMS_CREATED, 1);
    return c;
}

ftw_status_t ftw_comm_track(MPI_Comm comm, int collective)
{
    ftw_comm_t *c;

    if (comm == MPI_COMM_NULL)
        return FTW_OK;
    c = comm_new(comm);
    if (c == NULL)
        return FTW_ST_NO_MEMORY;
    /* The control communicator needs a collective call: only where every
     * member is known to be making this one. */
    if (collective && !c->is_inter) {
        PMPI_Comm_dup(comm, &c->ctl);
        PMPI_Comm_set_errhandler(c->ctl, MPI_ERRORS_RETURN);
    }
    if (comm_insert(c) != c && c->ctl != MPI_COMM_NULL)
        PMPI_Comm_free(&c->ctl);
    return FTW_OK;
}

ftw_comm_t *ftw_comm_get(MPI_Comm comm)
{
    ftw_comm_t *c;

    if (comm == MPI_COMM_NULL)
        return NULL;
    pthread_mutex_lock(&comm_lock);
    c = comm_find_locked(comm);
    pthread_mutex_unlock(&comm_lock);
    if (c != NULL)
        return c;
    c = comm_new(comm);
    return c ? comm_insert(c) : NULL;
}

void ftw_comm_untrack(MPI_Comm comm)
{
    ftw_comm_t *c;

    pthread_mutex_lock(&comm_lock);
    c = comm_find_locked(comm);
    if (c != NULL)
        HASH_DEL(comm_table, c);
    pthread_mutex_unlock(&comm_lock);
    if (c == NULL)
        return;
    ftw_stash_drop(comm, MPI_ANY_SOURCE, 1);
    if (c->ctl != MPI_COMM_NULL)
        PMPI_Comm_free(&c->ctl);
    /* A survivors' communicator may still hold collectives abandoned on a
     * failure; it is left to the MPI. */
    comm_free_record(c);
    ftw_stat_add(FTW_STAT_COMMS_FREED, 1);
}

/* Rank of world rank w in world[0..n), or -1. */
static int world_index(const int *world, int n, int w)
{
    for (int i = 0; i < n; i++)
        if (world[i] == w)
            return i;
    return -1;
}

void ftw_comm_refresh(ftw_comm_t *c)
{
    uint32_t epoch = atomic_load_explicit(&ftw_fail_epoch,
                                          memory_order_acquire);

    for (uint32_t i = c->epoch_seen; i < epoch; i++) {
        int w = ftw_detect_failure(i);

        if (ftw_comm_has_member(c, w)) {
            c->nfailed++;
            c->coll_active = 0;
            c->coll_gen++;
        }
    }
    c->epoch_seen = epoch;
}

int ftw_comm_has_member(const ftw_comm_t *c, int w)
{
    return world_index(c->peer_world, c->size, w) >= 0 ||
           (c->local_world && world_index(c->local_world, c->nlocal, w) >= 0);
}

int ftw_comm_failed_since(const ftw_comm_t *c, uint32_t epoch0)
{
    uint32_t now = atomic_load_explicit(&ftw_fail_epoch,
                                        memory_order_acquire);

    for (uint32_t i = epoch0; i < now; i++)
        if (ftw_comm_has_member(c, ftw_detect_failure(i)))
            return 1;
    return 0;
}

int ftw_comm_peer_failed(const ftw_comm_t *c, int r)
{
    if (r < 0 || r >= c->size)
        return 0;
    return ftw_detect_is_failed(c->peer_world[r]);
}

ftw_status_t ftw_comm_failed_group(ftw_comm_t *c, MPI_Group *group_p,
                                   int *count_p)
{
    MPI_Group all;
    int *ranks = malloc(sizeof(int) * (size_t)(c->size ? c->size : 1));
    int n = 0;

    if (ranks == NULL) {
        ftw_error("out of memory for a group of %d ranks", c->size);
        return FTW_ST_NO_MEMORY;
    }
    /* One snapshot of the failure log: the group and the count agree. */
    ftw_comm_refresh(c);
    for (uint32_t i = 0; i < c->epoch_seen; i++) {
        int r = world_index(c->peer_world, c->size, ftw_detect_failure(i));

        if (r >= 0)
            ranks[n++] = r;
    }
    if (c->is_inter)
        PMPI_Comm_remote_group(c->user, &all);
    else
        PMPI_Comm_group(c->user, &all);
    PMPI_Group_incl(all, n, ranks, group_p);
    PMPI_Group_free(&all);
    free(ranks);
    *count_p = c->nfailed;
    return FTW_OK;
}

void ftw_comm_foreach(void (*fn)(ftw_comm_t *c, void *arg), void *arg)
{
    ftw_comm_t *c, *tmp;

    pthread_mutex_lock(&comm_lock);
    HASH_ITER(hh, comm_table, c, tmp)
        fn(c, arg);
    pthread_mutex_unlock(&comm_lock);
}

void ftw_comm_acked(ftw_comm_t *c, uint8_t *acked)
{
    int n = 0;

    ftw_comm_refresh(c);
    for (int r = 0; r < c->size; r++)
        acked[r] = 0;
    for (uint32_t i = 0; i < c->epoch_seen && n < c->nacked; i++) {
        int w = ftw_detect_failure(i);
        int r = world_index(c->peer_world, c->size, w);

        if (r >= 0)
            acked[r] = 1;
        if (ftw_comm_has_member(c, w))
            n++;
    }
}

void ftw_comm_table_clear(void)
{
    ftw_comm_t *c, *tmp;

    pthread_mutex_lock(&comm_lock);
    HASH_ITER(hh, comm_table, c, tmp) {
        HASH_DEL(comm_table, c);
        comm_free_record(c);
    }
    pthread_mutex_unlock(&comm_lock);
}
