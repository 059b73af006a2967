/* Errors ftwrap decides: their texts and their raising on the object's
 * error handler (core/raise.h). */
#include "core/raise.h"

#include <stdio.h>
#include <string.h>

#include "ftwrap.h"
#include "core/comm.h"
#include "detect/detect.h"
#include "util/log.h"
#include "util/stats.h"

const char *ftw_error_text(int code)
{
    switch (code) {
    case FTW_ERR_PROC_FAIL_STOP:
        return "MPIX_ERR_PROC_FAILED (FTW_ERR_PROC_FAIL_STOP): a process "
               "the operation depends on failed";
    case FTW_ERR_ANY_SOURCE_DISABLED:
        return "MPIX_ERR_PROC_FAILED_PENDING (FTW_ERR_ANY_SOURCE_DISABLED): "
               "an unacknowledged process failure keeps this MPI_ANY_SOURCE "
               "receive from completing; it is still pending";
    case MPIX_ERR_REVOKED:
        return "MPIX_ERR_REVOKED: the communicator was revoked";
    case FTW_ERR_DRAINED:
        return "FTW_ERR_DRAINED: the request was cancelled by a drain";
    case FTW_ERR_BUFFER_UNUSABLE:
        return "FTW_ERR_BUFFER_UNUSABLE: a failed transfer may still write "
               "the receive buffer; it is quarantined";
    case FTW_ERR_INTERRUPTED:
        return "FTW_ERR_INTERRUPTED: the call was interrupted by a new "
               "process failure";
    default:
        return NULL;
    }
}

int ftw_error_string(int code, char *string, int *resultlen)
{
    const char *text = ftw_error_text(code);

    if (text == NULL || string == NULL || resultlen == NULL)
        return PMPI_Error_string(code, string, resultlen);
    strncpy(string, text, MPI_MAX_ERROR_STRING - 1);
    string[MPI_MAX_ERROR_STRING - 1] = '\0';
    *resultlen = (int)strlen(string);
    return MPI_SUCCESS;
}

int ftw_status_to_mpi(ftw_status_t st)
{
    switch (st) {
    case FTW_OK:               return MPI_SUCCESS;
    case FTW_INPROGRESS:       return MPI_ERR_PENDING;
    case FTW_ST_NO_MEMORY:     return MPI_ERR_NO_MEM;
    case FTW_ST_INVALID_PARAM: return MPI_ERR_ARG;
    case FTW_ST_UNSUPPORTED:   return MPI_ERR_UNSUPPORTED_OPERATION;
    case FTW_ST_TRUNCATED:     return MPI_ERR_TRUNCATE;
    case FTW_ST_IO_ERROR:      return MPI_ERR_IO;
    case FTW_ST_MPI_ERROR:     return MPI_ERR_INTERN;
    case FTW_ST_PEER_FAILED:   return FTW_ERR_PROC_FAIL_STOP;
    case FTW_ST_FATAL:         return MPI_ERR_INTERN;
    }
    return MPI_ERR_OTHER;
}

/* ---- raising ------------------------------------------------------------ */

void ftw_status_fail(MPI_Status *status, int code, int source)
{
    if (status == MPI_STATUS_IGNORE)
        return;
    status->MPI_SOURCE = source;
    status->MPI_TAG = MPI_ANY_TAG;
    status->MPI_ERROR = code;
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
}

static int is_predefined(MPI_Errhandler eh)
{
#ifdef MPI_ERRORS_ABORT
    if (eh == MPI_ERRORS_ABORT)
        return 1;
#endif
    return eh == MPI_ERRORS_ARE_FATAL || eh == MPI_ERRORS_RETURN;
}

static int is_fatal(MPI_Errhandler eh)
{
#ifdef MPI_ERRORS_ABORT
    if (eh == MPI_ERRORS_ABORT)
        return 1;
#endif
    return eh == MPI_ERRORS_ARE_FATAL;
}

int ftw_abort_status(int code)
{
    return (code & 0xff) ? (code & 0xff) : 1;
}

int ftw_abort(MPI_Comm comm, int errorcode)
{
    ftw_detect_abort_job(ftw_abort_status(errorcode));
    return PMPI_Abort(comm, errorcode);
}

/* The end of every raise: eh is the object's handler (a reference the
 * MPI gave, freed here), call calls it on the object.  A fatal handler
 * ends the job with what (and the error) said. */
static int raise_with(MPI_Errhandler eh, int code, const char *what,
                      int (*call)(const void *obj, int code), const void *obj)
{
    char text[MPI_MAX_ERROR_STRING];
    int len;

    if (eh == MPI_ERRORS_RETURN)
        return code;
    if (is_fatal(eh)) {
        ftw_error_string(code, text, &len);
        ftw_error("%s: %s; the error handler is MPI_ERRORS_ARE_FATAL, "
                  "aborting", what, text);
        ftw_detect_abort_job(ftw_abort_status(code));
    } else if (!is_predefined(eh)) {
        ftw_stat_add(FTW_STAT_ERRHANDLER_CALLS, 1);
    }
    call(obj, code);
    if (!is_predefined(eh))
        PMPI_Errhandler_free(&eh);
    return code;
}

static int call_comm(const void *obj, int code)
{
    return PMPI_Comm_call_errhandler(*(const MPI_Comm *)obj, code);
}

static int call_win(const void *obj, int code)
{
    return PMPI_Win_call_errhandler(*(const MPI_Win *)obj, code);
}

static int call_file(const void *obj, int code)
{
    return PMPI_File_call_errhandler(*(const MPI_File *)obj, code);
}

_Thread_local int ftw_raise_muted;

int ftw_raise(MPI_Comm comm, int code, const char *name, int peer)
{
    MPI_Errhandler eh;
    ftw_comm_t *c;
    char what[256];

    ftw_stat_add(FTW_STAT_OPS_FAILED, 1);
    if (ftw_raise_muted || comm == MPI_COMM_NULL ||
        PMPI_Comm_get_errhandler(comm, &eh) != MPI_SUCCESS)
        return code;
    /* A fatal handler's message names the failed rank. */
    c = peer >= 0 && is_fatal(eh) ? ftw_comm_get(comm) : NULL;
    if (c == NULL || peer >= c->size)
        return raise_with(eh, code, name, call_comm, &comm);
    snprintf(what, sizeof(what), "%s: rank %d of the communicator (world "
             "rank %d) failed", name, peer, c->peer_world[peer]);
    return raise_with(eh, code, what, call_comm, &comm);
}

int ftw_raise_win(MPI_Win win, int code, const char *name)
{
    MPI_Errhandler eh;

    ftw_stat_add(FTW_STAT_OPS_FAILED, 1);
    if (win == MPI_WIN_NULL ||
        PMPI_Win_get_errhandler(win, &eh) != MPI_SUCCESS)
        return code;
    return raise_with(eh, code, name, call_win, &win);
}

int ftw_raise_file(MPI_File fh, int code, const char *name)
{
    MPI_Errhandler eh;

    ftw_stat_add(FTW_STAT_OPS_FAILED, 1);
    if (PMPI_File_get_errhandler(fh, &eh) != MPI_SUCCESS)
        return code;
    return raise_with(eh, code, name, call_file, &fh);
}
