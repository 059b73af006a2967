/*
 * Per-communicator state, keyed by the user's handle (uthash).  The user's
 * handle never changes; "native" is the communicator the traffic uses.
 */
#ifndef FTW_FT_COMM_H
#define FTW_FT_COMM_H

#include <mpi.h>
#include <stdint.h>
#include <uthash.h>

#include "util/status.h"

typedef struct ftw_comm {
    MPI_Comm user;          /* key: the handle the application holds */
    MPI_Comm native;        /* the communicator traffic runs on */
    int rank;
    int is_inter;
    int size;               /* ranks point-to-point addresses (the remote
                             * group of an intercommunicator) */
    int *peer_world;        /* [size]: world rank of each addressable rank */
    int nlocal;             /* an intercommunicator's local group */
    int *local_world;       /* [nlocal], NULL for intracommunicators */
    uint32_t epoch_seen;    /* failures accounted for in nfailed */
    int nfailed;            /* members known failed (both groups) */
    int nacked;             /* nfailed when wildcards were last re-enabled */

    /* Collectives and agreements (coll.c, validate.c). */
    MPI_Comm ctl;           /* ftwrap's own messages about this comm, or
                             * MPI_COMM_NULL (intercommunicators) */
    MPI_Comm coll;          /* where collectives run: the user's comm, or
                             * the survivors' comm after a validate that
                             * excluded failed ranks */
    int nsurv;              /* ranks of coll */
    int *surv;              /* [nsurv] comm rank of each survivor, or NULL
                             * while nothing was excluded */
    int *surv_of;           /* [size] survivor rank of each comm rank, -1 if
                             * excluded; NULL while nothing was excluded */
    int coll_active;        /* 0 after a failure until validate */
    uint32_t coll_gen;      /* bumped when collectives are cut off */
    int nvalidated;         /* nfailed at the last validate */
    uint32_t agree_seq;     /* agreements run on ctl so far */
    UT_hash_handle hh;
} ftw_comm_t;

/* Start tracking a communicator the MPI just returned to the user (no-op
 * for MPI_COMM_NULL or one already tracked).  collective: every member is
 * making this call now, so ftwrap may create the control communicator. */
ftw_status_t ftw_comm_track(MPI_Comm comm, int collective);

/* Stop tracking it (after the native free). */
void ftw_comm_untrack(MPI_Comm comm);

/* The state of a communicator, made on first use if the MPI created it
 * without ftwrap seeing it; NULL for MPI_COMM_NULL or no memory. */
ftw_comm_t *ftw_comm_get(MPI_Comm comm);

/* Bring nfailed up to the detector's current epoch. */
void ftw_comm_refresh(ftw_comm_t *c);

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

/* Drop every record (at finalize). */
void ftw_comm_table_clear(void);

#endif
