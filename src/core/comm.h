/*
 * Per-communicator state, keyed by the user's handle (uthash).  The user's
 * handle never changes; "native" is the communicator the traffic uses.
 */
#ifndef FTW_FT_COMM_H
#define FTW_FT_COMM_H

#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>
#include <uthash.h>

#include "util/status.h"

/*
 * Where a communicator's point-to-point traffic runs after a drain: a
 * native communicator of the survivors and the rank maps both ways.  A
 * drain publishes a new view whole, so a thread posting at the same time
 * reads one view, never half of two; earlier views stay until the
 * communicator's record is freed (requests posted on them map their
 * statuses through them).
 */
typedef struct ftw_p2p_view {
    MPI_Comm comm;
    int *of;                    /* [size] rank in comm of each user rank,
                                 * -1 if excluded */
    int *user;                  /* [n] the user's rank of each rank of comm */
    int n;
    struct ftw_p2p_view *prev;
} ftw_p2p_view_t;

typedef struct ftw_comm {
    MPI_Comm user;          /* key: the handle the application holds */
    MPI_Comm native;        /* the communicator traffic runs on */
    int rank;
    int is_inter;
    int size;               /* ranks point-to-point addresses (the remote
                             * group of an intercommunicator) */
    int *peer_world;        /* [size]: world rank of each addressable rank
                             * (a process of another job: the id
                             * ftw_detect_foreign gave it; -1: unknown) */
    int nlocal;             /* an intercommunicator's local group */
    int *local_world;       /* [nlocal], NULL for intracommunicators */
    uint32_t epoch_seen;    /* failures accounted for in nfailed */
    /* Read without a lock by any thread (ftw_comm_any_disabled), written
     * under refresh_lock (nfailed) or by the acknowledging thread. */
    _Atomic int nfailed;    /* members known failed (both groups) */
    _Atomic int nacked;     /* nfailed when wildcards were last re-enabled */

    /* Point-to-point routing (drain.c).  A drain moves this process's
     * point-to-point traffic on the communicator to a fresh native one of
     * the survivors, so nothing sent before it can be matched after. */
    _Atomic(struct ftw_p2p_view *) p2pv; /* NULL: the user's own */
    _Atomic uint32_t drain_seq; /* ftw_drain_seq of the last drain_all */
    /* [size] of the last drain_peer, or NULL (set once) */
    _Atomic uint32_t *_Atomic peer_drain_seq;
    int interrupt;          /* FTW_Comm_set_interrupt */

    /* Identity (ctl.h): the same on every member, computed without
     * communication from the parent's; 0 for intercommunicators and
     * communicators ftwrap did not see made, which take no agreement. */
    uint64_t id;
    struct ftw_ctl_chan *chan; /* a channel of its own when members are in
                             * two jobs (ctl.h), else NULL */
    uint32_t child_seq;     /* communicators made from this one over all
                             * of its members */
    struct ftw_group_seq *group_seq; /* MPI_Comm_create_group calls on it,
                             * counted per (tag, group) */

    /* Collectives and agreements (coll.c, validate.c). */
    MPI_Comm coll;          /* where collectives run: the user's comm, or
                             * the survivors' comm after a validate that
                             * excluded failed ranks */
    int nsurv;              /* ranks of coll */
    int *surv;              /* [nsurv] comm rank of each survivor, or NULL
                             * while nothing was excluded */
    int *surv_of;           /* [size] survivor rank of each comm rank, -1 if
                             * excluded; NULL while nothing was excluded */
    uint8_t *local_out;     /* [nlocal] an intercommunicator's local ranks
                             * a validate excluded; NULL if none */
    _Atomic int coll_active;    /* 0 after a failure until validate */
    _Atomic uint32_t coll_gen;  /* bumped when collectives are cut off */
    int nvalidated;         /* nfailed at the last validate */
    uint64_t agree_seq;     /* agreements run on ctl so far */
    int revoked;            /* MPIX_Comm_revoke reached this process
                             * (revoke.c): non-local calls fail */
    int idup_seen;          /* Open MPI: an MPI_Comm_idup of it was made
                             * (every member's call sets it alike); its
                             * duplicate and split take no nonblocking
                             * collective of ftwrap's then (coll.c) */
    UT_hash_handle hh;
    UT_hash_handle hh_id;   /* in the table by id (id != 0) */
} ftw_comm_t;

/* Ids of MPI_COMM_WORLD and MPI_COMM_SELF. */
#define FTW_COMM_ID_WORLD 1
#define FTW_COMM_ID_SELF 2

/* Start tracking a communicator the MPI just returned to the user, with
 * id (0: none); no-op for MPI_COMM_NULL or one already tracked.  like: a
 * tracked intracommunicator whose members comm has in the same order (a
 * duplicate's parent), whose record gives them without asking the MPI;
 * or NULL. */
ftw_status_t ftw_comm_track(MPI_Comm comm, uint64_t id,
                            const ftw_comm_t *like);

/* The id of the next communicator made from parent over all of its
 * members (dup, split, create, topologies, shrink...): every member counts
 * these calls alike, as MPI orders them.  0 if parent has none. */
uint64_t ftw_comm_next_id(ftw_comm_t *parent);

/* The same for MPI_Comm_create_group(parent, group, tag), which only the
 * group's members call: counted per (tag, group). */
uint64_t ftw_comm_next_group_id(ftw_comm_t *parent, MPI_Group group,
                                int tag);

/* An id for comm agreed by its members with one native broadcast
 * (collective over comm: only where all of them are making it now), for
 * a communicator whose parent has none (MPI_Intercomm_merge, say). */
uint64_t ftw_comm_agreed_id(MPI_Comm comm);

/* comm (a handle MPI_Comm_idup returned, not usable before it completes)
 * gets id when ftwrap first looks at it. */
void ftw_comm_expect(MPI_Comm comm, uint64_t id);

/* The record with this id, or NULL. */
ftw_comm_t *ftw_comm_by_id(uint64_t id);

/* Stop tracking it (after the native free); its id, or 0 if it was not
 * tracked. */
uint64_t ftw_comm_untrack(MPI_Comm comm);

/* The state of a communicator, made on first use if the MPI created it
 * without ftwrap seeing it; NULL for MPI_COMM_NULL or no memory. */
ftw_comm_t *ftw_comm_get(MPI_Comm comm);

/* Bring nfailed up to the detector's current epoch. */
void ftw_comm_refresh(ftw_comm_t *c);

/* Around a change of a record's survivors (surv, surv_of, local_out),
 * which ftw_comm_refresh reads from any thread. */
void ftw_comm_survivors_lock(void);
void ftw_comm_survivors_unlock(void);

/* 1 if world rank w is a member of c (either group). */
int ftw_comm_has_member(const ftw_comm_t *c, int w);

/* 1 if a process of c failed after the failure epoch epoch0. */
int ftw_comm_failed_since(const ftw_comm_t *c, uint32_t epoch0);

/* 1 if addressable rank r of c is a failed process. */
int ftw_comm_peer_failed(const ftw_comm_t *c, int r);

/* 1 while MPI_ANY_SOURCE receives on c are disabled (failures in c not
 * yet acknowledged by FTW_Comm_reenable_any_source). */
static inline int ftw_comm_any_disabled(ftw_comm_t *c)
{
    ftw_comm_refresh(c);
    return c->nfailed > c->nacked;
}

/* The failed addressable ranks of c as a group of c's (remote) group;
 * *count_p gets the number of failed members of either group. */
ftw_status_t ftw_comm_failed_group(ftw_comm_t *c, MPI_Group *group_p,
                                   int *count_p);

/* The failed members of an intercommunicator's local group, as a group
 * of it. */
ftw_status_t ftw_comm_failed_local_group(ftw_comm_t *c, MPI_Group *group_p);

/* The view point-to-point traffic on c runs on now, NULL: c->user. */
static inline ftw_p2p_view_t *ftw_comm_p2p(const ftw_comm_t *c)
{
    return atomic_load_explicit(&((ftw_comm_t *)c)->p2pv,
                                memory_order_acquire);
}

/* Rank in view v of c (NULL: c itself) of user rank r (MPI_ANY_SOURCE
 * and MPI_PROC_NULL are kept); FTW_EXCLUDED if r was excluded by a
 * drain. */
#define FTW_EXCLUDED (-4)
static inline int ftw_p2p_rank(const ftw_p2p_view_t *v, int size, int r)
{
    if (v == NULL || r < 0 || r >= size)
        return r;
    return v->of[r] >= 0 ? v->of[r] : FTW_EXCLUDED;
}

/* Communicators whose point-to-point traffic was moved (the wrappers
 * then route every call; 0 keeps the fast path). */
extern _Atomic int ftw_p2p_moved;  /* a gate */

/* Drains so far in this process. */
extern _Atomic uint32_t ftw_drain_seq;

/* Turn status->MPI_SOURCE (a rank in the native communicator the request
 * ran on, whose rank map is p2p_user[0..n), NULL: the user's own) back
 * into the user's rank. */
static inline void ftw_status_to_user(const int *p2p_user, int n,
                                      MPI_Status *status)
{
    if (p2p_user != NULL && status != MPI_STATUS_IGNORE &&
        status->MPI_SOURCE >= 0 && status->MPI_SOURCE < n)
        status->MPI_SOURCE = p2p_user[status->MPI_SOURCE];
}

/* An intercommunicator of the survivors of both groups of c (an
 * intercommunicator of one job): failed[] over the agreement's member list
 * world[] (ftw_agree_member_list), whose [lo, lo + c->nlocal) is this
 * process's group, bit 0 set for a failed one.  Each group's survivors
 * make a communicator on the control channel (MPI_Comm_create_group with
 * tag: only they call it), joined by MPI_Intercomm_create between each
 * group's first survivor in member order.  FTW_ERR_PROC_FAIL_STOP if a
 * whole group failed. */
int ftw_inter_survivors(const uint8_t *failed, const int *world, int n,
                        int lo, int nlocal, int tag, MPI_Comm *newcomm_p);

/* A duplicate of the intracommunicator comm whose members are the
 * processes ids[0..n) (world ranks or ids the detector watches):
 * MPI_Comm_idup, waited for while every member lives.  A member's failure
 * makes it give up (the request stays with the graveyard) and return
 * FTW_ERR_PROC_FAIL_STOP with *dup_p MPI_COMM_NULL.  Every member calls
 * it, even one out of memory for its own record: the others would wait. */
int ftw_comm_dup_watched(MPI_Comm comm, const int *ids, int n,
                         MPI_Comm *dup_p);

/* After a creation was given up: Open MPI 4.1 makes context ids one
 * creation at a time, the one of the lowest (parent id, tag) first, and
 * an abandoned one holds up every later one of a higher key until a
 * creation of a lower or equal key ends.  MPI_Comm_create_group of this
 * process alone on MPI_COMM_WORLD (id 0) with tag 0 has the lowest key
 * and is local: it ends at once and lets them go.  Nothing to do on
 * MPICH. */
void ftw_comm_creation_release(void);

/* A native communicator of the ranks r of c with !(failed[r] & mask),
 * made by MPI_Comm_create_group on c with tag (only they call it). */
int ftw_comm_create_survivors(ftw_comm_t *c, const uint8_t *failed,
                              uint8_t mask, int tag, MPI_Comm *newcomm_p);

/* acked[r] = 1 for each rank r of c whose failure this process has
 * acknowledged (the first nacked failures it learned of), else 0. */
void ftw_comm_acked(ftw_comm_t *c, uint8_t *acked);
/* The same over any list of n members of c (world ranks: an
 * intercommunicator's agreement members, ftw_agree_member_list). */
void ftw_comm_acked_of(ftw_comm_t *c, const int *world, int n,
                       uint8_t *acked);

/* What forgetting a communicator means to the layers above core, set
 * once at MPI_Init: untracked(user) after ftw_comm_untrack took its record
 * out (the probe stash drops its messages), freed(c) as a record's memory
 * is freed (drain sinks forget it). */
typedef struct ftw_comm_ops {
    void (*untracked)(MPI_Comm user);
    void (*freed)(const ftw_comm_t *c);
} ftw_comm_ops_t;

void ftw_comm_ops_set(const ftw_comm_ops_t *ops);

/* Drop every record (at finalize). */
void ftw_comm_table_clear(void);

#endif
