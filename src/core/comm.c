/* The per-communicator state table and failure accounting. */
#include "core/comm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "detect/detect.h"
#include "core/lock.h"
#include "core/ctl.h"
#include "core/xjob.h"
#include "core/request.h"
#include "core/progress.h"
#include "util/log.h"
#include "util/stats.h"

static ftw_comm_t *comm_table;
static ftw_comm_t *id_table;        /* the records with an id, by id */
_Atomic int ftw_p2p_moved;
_Atomic uint32_t ftw_drain_seq;
static pthread_mutex_t comm_lock = PTHREAD_MUTEX_INITIALIZER;

/* MPI_Comm_create_group calls on one communicator with one (tag, group). */
struct ftw_group_seq {
    uint64_t key;           /* hash of the tag and the group's world ranks */
    uint32_t seq;
    UT_hash_handle hh;
};

/* Handles from MPI_Comm_idup and the ids they get (ftw_comm_expect). */
struct expected {
    struct expected *next;
    MPI_Comm comm;
    uint64_t id;
};
static struct expected *expected_list;

/* splitmix64's finalizer: ids of different inputs differ. */
static uint64_t mix(uint64_t h, uint64_t v)
{
    uint64_t z = h ^ (v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2));

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z > FTW_COMM_ID_SELF ? z : z + FTW_COMM_ID_SELF + 1;
}

static ftw_comm_t *comm_find_locked(MPI_Comm comm)
{
    ftw_comm_t *c;

    HASH_FIND(hh, comm_table, &comm, sizeof(comm), c);
    return c;
}

/* MPI_COMM_WORLD's group, made once (the MPI frees it at finalize). */
static MPI_Group world_group = MPI_GROUP_NULL;
static pthread_once_t world_group_once = PTHREAD_ONCE_INIT;

static void world_group_make(void)
{
    PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
}

/* The ranks in target of group's n members into out[n]; 0 if out of
 * memory. */
static int translate_all(MPI_Group group, int n, MPI_Group target, int *out)
{
    int small[64] = { 0 }, *ranks = n <= 64 ? small :
                                    malloc(sizeof(int) * (size_t)n);

    if (ranks == NULL)
        return 0;
    for (int i = 0; i < n; i++)
        ranks[i] = i;
    PMPI_Group_translate_ranks(group, n, ranks, target, out);
    if (ranks != small)
        free(ranks);
    return 1;
}

/* World ranks (the ids of processes of other jobs) of every member of
 * group, or NULL. */
static int *group_world_ranks(MPI_Group group, int n)
{
    int *out = malloc(sizeof(int) * (size_t)(n ? n : 1));

    pthread_once(&world_group_once, world_group_make);
    if (out != NULL && !translate_all(group, n, world_group, out)) {
        free(out);
        return NULL;
    }
    if (out != NULL)
        ftw_xjob_translate(group, n, out);
    return out;
}

static const ftw_comm_ops_t *comm_ops;

void ftw_comm_ops_set(const ftw_comm_ops_t *ops)
{
    comm_ops = ops;
}

static void comm_free_record(ftw_comm_t *c)
{
    struct ftw_group_seq *g, *tmp;

    HASH_ITER(hh, c->group_seq, g, tmp) {
        HASH_DEL(c->group_seq, g);
        free(g);
    }
    ftw_ctl_chan_put(c->chan);
    free(c->peer_world);
    free(c->local_world);
    free(c->surv);
    free(c->surv_of);
    free(c->local_out);
    free((void *)c->peer_drain_seq);
    if (comm_ops != NULL)
        comm_ops->freed(c);
    for (ftw_p2p_view_t *v = ftw_comm_p2p(c), *prev; v != NULL; v = prev) {
        prev = v->prev;
        free(v->of);
        free(v->user);
        free(v);
    }
    free(c);
}

/* The record of comm.  like: a record whose members comm has in the same
 * order (a duplicate's parent, an intracommunicator), copied instead of
 * asking the MPI; or NULL. */
static ftw_comm_t *comm_new(MPI_Comm comm, const ftw_comm_t *like)
{
    ftw_comm_t *c = calloc(1, sizeof(*c));
    MPI_Group g;

    if (c == NULL)
        goto err;
    c->user = comm;
    c->native = comm;
    c->coll = comm;
    c->coll_active = 1;
    if (like != NULL && !like->is_inter) {
        c->rank = like->rank;
        c->size = like->size;
        c->peer_world = malloc(sizeof(int) *
                               (size_t)(c->size ? c->size : 1));
        if (c->peer_world != NULL)
            memcpy(c->peer_world, like->peer_world,
                   sizeof(int) * (size_t)c->size);
    } else {
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
        PMPI_Group_free(&g);
    }
    c->nsurv = c->size;
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

/* 1 if a member of c is a process of another job. */
static int comm_two_jobs(const ftw_comm_t *c)
{
    int world = ftw_detect_world_size();

    for (int i = 0; i < c->size; i++)
        if (c->peer_world[i] >= world)
            return 1;
    for (int i = 0; c->is_inter && i < c->nlocal; i++)
        if (c->local_world[i] >= world)
            return 1;
    return 0;
}

static void set_id_locked(ftw_comm_t *c, uint64_t id)
{
    /* Members in two jobs need the channel ftw_comm_track opens, which an
     * id learned later (an MPI_Comm_idup's) comes without. */
    if (c->id != 0 || id == 0 || (c->chan == NULL && comm_two_jobs(c)))
        return;
    c->id = id;
    HASH_ADD(hh_id, id_table, id, sizeof(c->id), c);
}

/* The id an MPI_Comm_idup handle was promised, taken off the list. */
static uint64_t expected_take_locked(MPI_Comm comm)
{
    for (struct expected **pp = &expected_list; *pp != NULL;
         pp = &(*pp)->next) {
        struct expected *e = *pp;
        uint64_t id = e->id;

        if (e->comm != comm)
            continue;
        *pp = e->next;
        free(e);
        return id;
    }
    return 0;
}

/* Insert c unless the handle is already known (then give the known record
 * the id if it had none); returns the record in the table. */
static ftw_comm_t *comm_insert(ftw_comm_t *c, uint64_t id)
{
    ftw_comm_t *old;

    ftw_mt_lock(&comm_lock);
    old = comm_find_locked(c->user);
    if (id == 0 && expected_list != NULL)
        id = expected_take_locked(c->user);
    if (old == NULL) {
        HASH_ADD(hh, comm_table, user, sizeof(c->user), c);
        set_id_locked(c, id);
    } else {
        set_id_locked(old, id);
    }
    ftw_mt_unlock(&comm_lock);
    if (old != NULL) {
        comm_free_record(c);
        return old;
    }
    ftw_stat_add(FTW_STAT_COMMS_CREATED, 1);
    return c;
}

ftw_status_t ftw_comm_track(MPI_Comm comm, uint64_t id,
                            const ftw_comm_t *like)
{
    ftw_comm_t *c;

    if (comm == MPI_COMM_NULL)
        return FTW_OK;
    c = comm_new(comm, like);
    if (c == NULL)
        return FTW_ST_NO_MEMORY;
    /* Members ftwrap does not know (of another job it made no exchange
     * with) are out of reach: no agreement or revocation.  Known members
     * of other jobs are reached on a channel of the communicator's own
     * (an intercommunicator gets none). */
    for (int i = 0; id != 0 && i < c->size; i++)
        if (c->peer_world[i] < 0)
            id = 0;
    for (int i = 0; id != 0 && c->is_inter && i < c->nlocal; i++)
        if (c->local_world[i] < 0)
            id = 0;
    if (id != 0 && comm_two_jobs(c)) {
        if (!c->is_inter)
            c->chan = ftw_ctl_chan_open(comm, c->peer_world, c->size);
        if (c->chan == NULL)
            id = 0;
    }
    comm_insert(c, id);
    return FTW_OK;
}

uint64_t ftw_comm_next_id(ftw_comm_t *parent)
{
    if (parent == NULL || parent->id == 0)
        return 0;
    return mix(parent->id, ++parent->child_seq);
}

/* A hash of group's members in order: as world ranks, or, when parent's
 * members are in two jobs (the ids of processes of other jobs differ
 * from process to process), as ranks in parent's group. */
static uint64_t group_hash(MPI_Group group, int tag, const ftw_comm_t *parent)
{
    MPI_Group pg;
    int n = 0, *w, ok;
    uint64_t h = mix(parent->chan != NULL ? 0x6B1E : 0x6B1D,
                     (uint64_t)(uint32_t)tag);

    PMPI_Group_size(group, &n);
    if (parent->chan == NULL) {
        w = group_world_ranks(group, n);
    } else {
        w = malloc(sizeof(int) * (size_t)(n ? n : 1));
        PMPI_Comm_group(parent->user, &pg);
        ok = w != NULL && translate_all(group, n, pg, w);
        PMPI_Group_free(&pg);
        if (!ok) {
            free(w);
            w = NULL;
        }
    }
    if (w == NULL)
        return 0;
    for (int i = 0; i < n; i++)
        h = mix(h, (uint64_t)(uint32_t)w[i]);
    free(w);
    return h;
}

uint64_t ftw_comm_next_group_id(ftw_comm_t *parent, MPI_Group group, int tag)
{
    struct ftw_group_seq *g;
    uint64_t key, id = 0;

    if (parent == NULL || parent->id == 0)
        return 0;
    key = group_hash(group, tag, parent);
    if (key == 0)
        return 0;
    /* Threads may make groups of one parent at once (with other tags). */
    ftw_mt_lock(&comm_lock);
    HASH_FIND(hh, parent->group_seq, &key, sizeof(key), g);
    if (g == NULL && (g = calloc(1, sizeof(*g))) != NULL) {
        g->key = key;
        HASH_ADD(hh, parent->group_seq, key, sizeof(g->key), g);
    }
    if (g != NULL)
        id = mix(mix(parent->id, key), ++g->seq);
    ftw_mt_unlock(&comm_lock);
    return id;
}

/* Unique among jobs: the job's cookie, this process's world rank and
 * count. */
static uint64_t fresh_id(void)
{
    static _Atomic uint64_t made;
    int wrank = 0;

    PMPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    return mix(mix(mix(0xA6EED, ftw_detect_cookie()), (uint64_t)wrank),
               atomic_fetch_add(&made, 1) + 1);
}

/* The lowest world rank of group's members; -1 if one is not in this
 * job's MPI_COMM_WORLD (the other side of a spawn or a join) or on error. */
static int group_lowest_world(MPI_Group group)
{
    int n = 0, low = -1, *w;

    PMPI_Group_size(group, &n);
    w = group_world_ranks(group, n);
    if (w == NULL)
        return -1;
    for (int i = 0; i < n; i++) {
        if (w[i] < 0 || w[i] >= ftw_detect_world_size()) {
            low = -1;
            break;
        }
        if (low < 0 || w[i] < low)
            low = w[i];
    }
    free(w);
    return low;
}

/* An intercommunicator's id: the group holding the lowest world rank
 * picks it (its rank 0) and sends it to the other group, whose rank 0
 * sends it back to the rest of the first.  0, without communicating, when
 * a member is in another job: every member sees that alike. */
static uint64_t inter_agreed_id(MPI_Comm comm)
{
    MPI_Group lg, rg;
    int rank, lo_local, lo_remote, first;
    uint64_t id = 0;

    PMPI_Comm_group(comm, &lg);
    PMPI_Comm_remote_group(comm, &rg);
    lo_local = group_lowest_world(lg);
    lo_remote = group_lowest_world(rg);
    PMPI_Group_free(&lg);
    PMPI_Group_free(&rg);
    if (lo_local < 0 || lo_remote < 0)
        return 0;
    PMPI_Comm_rank(comm, &rank);
    first = lo_local < lo_remote;
    if (first && rank == 0)
        id = fresh_id();
    if (PMPI_Bcast(&id, 1, MPI_UINT64_T, first ? (rank == 0 ? MPI_ROOT :
                                                  MPI_PROC_NULL) : 0,
                   comm) != MPI_SUCCESS ||
        PMPI_Bcast(&id, 1, MPI_UINT64_T, first ? 0 : (rank == 0 ? MPI_ROOT :
                                                      MPI_PROC_NULL),
                   comm) != MPI_SUCCESS)
        return 0;
    return id;
}

uint64_t ftw_comm_agreed_id(MPI_Comm comm)
{
    uint64_t id = 0;
    int rank, inter = 1;

    if (comm == MPI_COMM_NULL ||
        PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS)
        return 0;
    if (inter)
        return inter_agreed_id(comm);
    PMPI_Comm_rank(comm, &rank);
    if (rank == 0)
        id = fresh_id();
    if (PMPI_Bcast(&id, 1, MPI_UINT64_T, 0, comm) != MPI_SUCCESS)
        return 0;
    return id;
}

void ftw_comm_expect(MPI_Comm comm, uint64_t id)
{
    struct expected *e;

    if (comm == MPI_COMM_NULL || id == 0 || (e = malloc(sizeof(*e))) == NULL)
        return;
    e->comm = comm;
    e->id = id;
    ftw_mt_lock(&comm_lock);
    e->next = expected_list;
    expected_list = e;
    ftw_mt_unlock(&comm_lock);
}

ftw_comm_t *ftw_comm_by_id(uint64_t id)
{
    ftw_comm_t *c;

    ftw_mt_lock(&comm_lock);
    HASH_FIND(hh_id, id_table, &id, sizeof(id), c);
    ftw_mt_unlock(&comm_lock);
    return c;
}

ftw_comm_t *ftw_comm_get(MPI_Comm comm)
{
    ftw_comm_t *c;

    if (comm == MPI_COMM_NULL)
        return NULL;
    ftw_mt_lock(&comm_lock);
    c = comm_find_locked(comm);
    ftw_mt_unlock(&comm_lock);
    if (c != NULL)
        return c;
    c = comm_new(comm, NULL);
    return c ? comm_insert(c, 0) : NULL;
}

uint64_t ftw_comm_untrack(MPI_Comm comm)
{
    ftw_comm_t *c;
    uint64_t id;

    ftw_mt_lock(&comm_lock);
    c = comm_find_locked(comm);
    if (c != NULL) {
        HASH_DEL(comm_table, c);
        if (c->id != 0)
            HASH_DELETE(hh_id, id_table, c);
    }
    expected_take_locked(comm);
    ftw_mt_unlock(&comm_lock);
    if (c == NULL)
        return 0;
    id = c->id;
    if (comm_ops != NULL)
        comm_ops->untracked(comm);
    /* A survivors' communicator may still hold collectives abandoned on a
     * failure; it is left to the MPI. */
    comm_free_record(c);
    ftw_stat_add(FTW_STAT_COMMS_FREED, 1);
    return id;
}

/* Rank of world rank w in world[0..n), or -1. */
static int world_index(const int *world, int n, int w)
{
    for (int i = 0; i < n; i++)
        if (world[i] == w)
            return i;
    return -1;
}

/* Serialises refreshes (threads of one process may refresh one record at
 * once; only under MPI_THREAD_MULTIPLE), and a refresh with a validate's
 * change of the survivors it reads. */
static pthread_mutex_t refresh_lock = PTHREAD_MUTEX_INITIALIZER;

void ftw_comm_survivors_lock(void)
{
    ftw_mt_lock(&refresh_lock);
}

void ftw_comm_survivors_unlock(void)
{
    ftw_mt_unlock(&refresh_lock);
}

void ftw_comm_refresh(ftw_comm_t *c)
{
    uint32_t epoch = atomic_load_explicit(&ftw_fail_epoch,
                                          memory_order_acquire);

    if (__atomic_load_n(&c->epoch_seen, __ATOMIC_ACQUIRE) == epoch)
        return;
    ftw_mt_lock(&refresh_lock);
    for (uint32_t i = c->epoch_seen; i < epoch; i++) {
        int w = ftw_detect_failure(i), r;

        if (!ftw_comm_has_member(c, w))
            continue;
        c->nfailed++;
        /* A validate may have excluded it before this process's detector
         * published it (the agreement brought it from another member):
         * the survivors' collectives go on. */
        r = c->surv_of != NULL ? world_index(c->peer_world, c->size, w) : -1;
        if (r >= 0 && c->surv_of[r] < 0)
            continue;
        r = c->local_out != NULL ?
            world_index(c->local_world, c->nlocal, w) : -1;
        if (r >= 0 && c->local_out[r])
            continue;
        c->coll_active = 0;
        c->coll_gen++;
    }
    if (epoch > c->epoch_seen)
        __atomic_store_n(&c->epoch_seen, epoch, __ATOMIC_RELEASE);
    ftw_mt_unlock(&refresh_lock);
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

/* The failed members of one group of c (world[0..n), whose group is
 * all) as a group of it; all is freed. */
static ftw_status_t failed_of(ftw_comm_t *c, const int *world, int n,
                              MPI_Group all, MPI_Group *group_p)
{
    int *ranks = malloc(sizeof(int) * (size_t)(n ? n : 1));
    int nf = 0;

    if (ranks == NULL) {
        ftw_error("out of memory for a group of %d ranks", n);
        PMPI_Group_free(&all);
        return FTW_ST_NO_MEMORY;
    }
    uint32_t seen;

    /* One snapshot of the failure log: the group and the count agree. */
    ftw_comm_refresh(c);
    seen = __atomic_load_n(&c->epoch_seen, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < seen; i++) {
        int r = world_index(world, n, ftw_detect_failure(i));

        if (r >= 0)
            ranks[nf++] = r;
    }
    PMPI_Group_incl(all, nf, ranks, group_p);
    PMPI_Group_free(&all);
    free(ranks);
    return FTW_OK;
}

ftw_status_t ftw_comm_failed_group(ftw_comm_t *c, MPI_Group *group_p,
                                   int *count_p)
{
    MPI_Group all;
    ftw_status_t st;

    if (c->is_inter)
        PMPI_Comm_remote_group(c->user, &all);
    else
        PMPI_Comm_group(c->user, &all);
    st = failed_of(c, c->peer_world, c->size, all, group_p);
    *count_p = c->nfailed;
    return st;
}

ftw_status_t ftw_comm_failed_local_group(ftw_comm_t *c, MPI_Group *group_p)
{
    MPI_Group all;

    PMPI_Comm_group(c->user, &all);
    return failed_of(c, c->local_world, c->nlocal, all, group_p);
}

int ftw_inter_survivors(const uint8_t *failed, const int *world, int n,
                        int lo, int nlocal, int tag, MPI_Comm *newcomm_p)
{
    int *keep = malloc(sizeof(int) * (size_t)(n ? n : 1));
    int nkeep = 0, remote_leader = -1, rc = MPI_SUCCESS;
    MPI_Group wg, g;
    MPI_Comm local = MPI_COMM_NULL;

    if (keep == NULL)
        return MPI_ERR_NO_MEM;
    for (int i = 0; i < n; i++) {
        if (failed[i] & 1)
            continue;
        if (i >= lo && i < lo + nlocal)
            keep[nkeep++] = world[i];
        else if (remote_leader < 0)
            remote_leader = world[i];
    }
    if (remote_leader < 0) {
        ftw_error("every process of the remote group failed");
        rc = FTW_ERR_PROC_FAIL_STOP;
    }
    if (rc == MPI_SUCCESS)
        rc = PMPI_Comm_group(ftw_ctl_comm, &wg);
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Group_incl(wg, nkeep, keep, &g);
        if (rc == MPI_SUCCESS) {
            ftw_inject(FTW_INJECT_AGREED);
            rc = PMPI_Comm_create_group(ftw_ctl_comm, g, tag, &local);
            PMPI_Group_free(&g);
        }
        PMPI_Group_free(&wg);
    }
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Intercomm_create(local, 0, ftw_ctl_comm, remote_leader,
                                   tag, newcomm_p);
        PMPI_Comm_free(&local);
    }
    free(keep);
    return rc;
}

void ftw_comm_creation_release(void)
{
#if defined(OPEN_MPI)
    MPI_Group wg, me;
    MPI_Comm self = MPI_COMM_NULL;
    int r = 0;

    /* Parent MPI_COMM_WORLD (id 0) and tag 0: the lowest key there is,
     * so it goes first whatever was given up; one member, so local. */
    if (PMPI_Comm_rank(MPI_COMM_WORLD, &r) != MPI_SUCCESS ||
        PMPI_Comm_group(MPI_COMM_WORLD, &wg) != MPI_SUCCESS)
        return;
    if (PMPI_Group_incl(wg, 1, &r, &me) == MPI_SUCCESS) {
        if (PMPI_Comm_create_group(MPI_COMM_WORLD, me, 0, &self) ==
                MPI_SUCCESS && self != MPI_COMM_NULL)
            PMPI_Comm_free(&self);
        PMPI_Group_free(&me);
    }
    PMPI_Group_free(&wg);
#endif
}

static int any_failed(const int *ids, int n)
{
    for (int i = 0; i < n; i++)
        if (ftw_detect_is_failed(ids[i]))
            return 1;
    return 0;
}

int ftw_comm_dup_watched(MPI_Comm comm, const int *ids, int n,
                         MPI_Comm *dup_p)
{
    MPI_Comm *slot = malloc(sizeof(*slot));
    MPI_Request req = MPI_REQUEST_NULL;
    ftw_poll_t p;
    int rc, flag = 0;

    *dup_p = MPI_COMM_NULL;
    ftw_inject(FTW_INJECT_DUP);
    /* A communicator of this process alone has no member to wait for
     * (and MPICH 4.0's nonblocking duplicate of one takes turns with other
     * threads' creations very slowly: coll.c). */
    if (slot == NULL || n <= 1) {
        free(slot);
        return PMPI_Comm_dup(comm, dup_p);
    }
    *slot = MPI_COMM_NULL;
    rc = PMPI_Comm_idup(comm, slot, &req);
    if (rc != MPI_SUCCESS) {
        free(slot);
        return rc;
    }
    ftw_poll_init(&p);
    for (;;) {
        rc = PMPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag)
            break;
        if (ftw_poll_changed(&p) && any_failed(ids, n)) {
            /* The MPI may still write the handle: the slot goes with the
             * request. */
            ftw_grave_add_owned(req, slot);
            ftw_comm_creation_release();
            return FTW_ERR_PROC_FAIL_STOP;
        }
        ftw_poll_idle(&p);
    }
    if (rc == MPI_SUCCESS)
        *dup_p = *slot;
    free(slot);
    return rc;
}

int ftw_comm_create_survivors(ftw_comm_t *c, const uint8_t *failed,
                              uint8_t mask, int tag, MPI_Comm *newcomm_p)
{
    MPI_Group all = MPI_GROUP_NULL, keep = MPI_GROUP_NULL;
    int *excl = malloc(sizeof(int) * (size_t)(c->size ? c->size : 1));
    int nexcl = 0, rc;

    /* The group is asked for first: MPICH 4.0's MPI_Comm_create_group
     * crashes on a communicator whose group was never asked for. */
    rc = PMPI_Comm_group(c->user, &all);
    if (rc == MPI_SUCCESS && excl != NULL) {
        for (int r = 0; r < c->size; r++)
            if (failed[r] & mask)
                excl[nexcl++] = r;
        rc = PMPI_Group_excl(all, nexcl, excl, &keep);
    } else if (rc == MPI_SUCCESS) {
        /* No memory for the list: the others are about to make the
         * communicator with this process, so the group is made one
         * excluded member at a time (the difference keeps the order). */
        rc = PMPI_Group_union(all, MPI_GROUP_EMPTY, &keep);
        for (int r = 0; r < c->size && rc == MPI_SUCCESS; r++) {
            MPI_Group one, next;

            if (!(failed[r] & mask))
                continue;
            rc = PMPI_Group_incl(all, 1, &r, &one);
            if (rc != MPI_SUCCESS)
                break;
            rc = PMPI_Group_difference(keep, one, &next);
            PMPI_Group_free(&one);
            if (rc == MPI_SUCCESS) {
                PMPI_Group_free(&keep);
                keep = next;
            }
        }
    }
    if (rc == MPI_SUCCESS) {
        ftw_inject(FTW_INJECT_AGREED);
        rc = PMPI_Comm_create_group(c->user, keep, tag, newcomm_p);
    } else {
        ftw_error("the group of a communicator's survivors could not be "
                  "made (error %d): the others wait for this process", rc);
    }
    if (keep != MPI_GROUP_NULL)
        PMPI_Group_free(&keep);
    if (all != MPI_GROUP_NULL)
        PMPI_Group_free(&all);
    free(excl);
    return rc;
}

void ftw_comm_acked_of(ftw_comm_t *c, const int *world, int n,
                       uint8_t *acked)
{
    uint32_t seen;
    int k = 0;

    ftw_comm_refresh(c);
    seen = __atomic_load_n(&c->epoch_seen, __ATOMIC_ACQUIRE);
    for (int q = 0; q < n; q++)
        acked[q] = 0;
    for (uint32_t i = 0; i < seen && k < c->nacked; i++) {
        int w = ftw_detect_failure(i);
        int q = world_index(world, n, w);

        if (q >= 0)
            acked[q] = 1;
        if (ftw_comm_has_member(c, w))
            k++;
    }
}

void ftw_comm_acked(ftw_comm_t *c, uint8_t *acked)
{
    ftw_comm_acked_of(c, c->peer_world, c->size, acked);
}

void ftw_comm_table_clear(void)
{
    ftw_comm_t *c, *tmp;

    ftw_mt_lock(&comm_lock);
    HASH_CLEAR(hh_id, id_table);
    HASH_ITER(hh, comm_table, c, tmp) {
        HASH_DEL(comm_table, c);
        comm_free_record(c);
    }
    while (expected_list != NULL) {
        struct expected *e = expected_list;

        expected_list = e->next;
        free(e);
    }
    ftw_mt_unlock(&comm_lock);
}
