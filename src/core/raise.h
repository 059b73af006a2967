/*
 * Errors ftwrap decides itself: the texts of its error classes, and their
 * raising on the error handler of the communicator, window or file, as
 * the MPI would raise its own.
 */
#ifndef FTW_CORE_RAISE_H
#define FTW_CORE_RAISE_H

#include <mpi.h>

#include "mpi-ext.h"
#include "ftwrap.h"
#include "util/status.h"

/* The MPI error class of an internal status (util/status.h): the one
 * place the lower layers' statuses become MPI's. */
int ftw_status_to_mpi(ftw_status_t st);

/* The text of one of ftwrap's error classes (ULFM's included), or NULL. */
const char *ftw_error_text(int code);

/* MPI_Error_string, answering for ftwrap's classes. */
int ftw_error_string(int code, char *string, int *resultlen);

/* Raise an ftwrap error on comm's error handler, as MPI would; returns
 * code for the caller to return (if the handler returns).  peer is the
 * failed rank in comm, or -1. */
int ftw_raise(MPI_Comm comm, int code, const char *name, int peer);

/* While nonzero, ftw_raise on this thread calls no handler: ftwrap's own
 * tests of requests it made for a call that already returned (the sends
 * of buffered messages). */
extern _Thread_local int ftw_raise_muted;

/* The same for a window (MPI_Win_call_errhandler; a window's default
 * handler is MPI_ERRORS_ARE_FATAL). */
int ftw_raise_win(MPI_Win win, int code, const char *name);

/* The same for a file (MPI_FILE_NULL's handler for MPI_FILE_NULL; a
 * file's default handler is MPI_ERRORS_RETURN). */
int ftw_raise_file(MPI_File fh, int code, const char *name);

/* MPI_Abort: the whole job ends, even under a launcher told to keep
 * survivors alive.  ftw_abort_status: the exit status for an error code. */
int ftw_abort(MPI_Comm comm, int errorcode);
int ftw_abort_status(int code);

/* Fill a status for an operation that ended in error. */
void ftw_status_fail(MPI_Status *status, int code, int source);

/* 1 if code is an error class ftwrap raises itself (ULFM's included). */
static inline int ftw_is_own_error(int code)
{
    return (code >= FTW_ERR_FIRST_ && code <= FTW_ERR_LAST_) ||
           code == MPIX_ERR_PROC_FAILED ||
           code == MPIX_ERR_PROC_FAILED_PENDING || code == MPIX_ERR_REVOKED;
}

#endif
