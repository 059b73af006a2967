/*
 * One internal status type for the layers that do not speak MPI error
 * codes (util, detect, xport, and the rendezvous protocol's returns).
 * Ranges are grouped by what a failure takes down: a single request, a
 * peer, or the job.  core/raise.h maps a status to an MPI error class in
 * one place (ftw_status_to_mpi); communicator-wide conditions (drained,
 * revoked, wildcards disabled, ...) are decided above core and are MPI
 * classes from the start.
 */
#ifndef FTW_UTIL_STATUS_H
#define FTW_UTIL_STATUS_H

typedef enum {
    FTW_OK                  =   0,
    FTW_INPROGRESS          =   1,  /* not done yet; poll again */

    /* The request fails; everything else goes on. */
    FTW_ST_NO_MEMORY        =  -1,
    FTW_ST_INVALID_PARAM    =  -2,
    FTW_ST_UNSUPPORTED      =  -3,
    FTW_ST_TRUNCATED        =  -4,
    FTW_ST_IO_ERROR         =  -6,
    FTW_ST_MPI_ERROR        =  -7,  /* the native MPI call failed */

    /* A peer is gone: every operation with it fails. */
    FTW_ST_PEER_FAILED      = -20,

    /* The whole job cannot go on. */
    FTW_ST_FATAL            = -60,
} ftw_status_t;

/* A short lowercase description of a status. */
const char *ftw_status_string(ftw_status_t status);

#endif
