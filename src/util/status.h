/*
 * One internal status type for the whole library.  Ranges are grouped by
 * what a failure takes down: a single request, a peer, a communicator, or
 * the job.  The wrapper boundary maps a status to an MPI error class
 * (ftw_status_to_mpi); nothing below it speaks MPI error codes.
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
    FTW_ST_CANCELLED        =  -5,
    FTW_ST_IO_ERROR         =  -6,
    FTW_ST_MPI_ERROR        =  -7,  /* the native MPI call failed */

    /* A peer is gone: every operation with it fails. */
    FTW_ST_PEER_FAILED      = -20,

    /* A communicator-wide condition. */
    FTW_ST_ANY_SOURCE_DISABLED = -40,
    FTW_ST_DRAINED          = -41,
    FTW_ST_BUFFER_UNUSABLE  = -42,
    FTW_ST_INTERRUPTED      = -43,

    /* The whole job cannot go on. */
    FTW_ST_FATAL            = -60,
} ftw_status_t;

/* A short lowercase description of a status. */
const char *ftw_status_string(ftw_status_t status);

#endif
