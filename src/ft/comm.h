/*
 * Per-communicator state, keyed by the user's handle (uthash).  The user's
 * handle never changes; "native" is the communicator the traffic uses.
 */
#ifndef FTW_FT_COMM_H
#define FTW_FT_COMM_H

#include <mpi.h>
#include <uthash.h>

#include "util/status.h"

typedef struct ftw_comm {
    MPI_Comm user;          /* key: the handle the application holds */
    MPI_Comm native;        /* the communicator traffic runs on */
    int size;
    int rank;
    int is_inter;
    UT_hash_handle hh;
} ftw_comm_t;

/* Start tracking a communicator the MPI just returned to the user (no-op
 * for MPI_COMM_NULL or one already tracked). */
ftw_status_t ftw_comm_track(MPI_Comm comm);

/* Stop tracking it (before the native free). */
void ftw_comm_untrack(MPI_Comm comm);

/* The state of a tracked communicator, or NULL. */
ftw_comm_t *ftw_comm_lookup(MPI_Comm comm);

/* Drop every record (at finalize). */
void ftw_comm_table_clear(void);

#endif
