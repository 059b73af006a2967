/* Descriptions of internal status codes. */
#include "util/status.h"

const char *ftw_status_string(ftw_status_t status)
{
    switch (status) {
    case FTW_OK:                     return "success";
    case FTW_INPROGRESS:             return "operation in progress";
    case FTW_ST_NO_MEMORY:           return "out of memory";
    case FTW_ST_INVALID_PARAM:       return "invalid parameter";
    case FTW_ST_UNSUPPORTED:         return "operation not supported";
    case FTW_ST_TRUNCATED:           return "message truncated";
    case FTW_ST_IO_ERROR:            return "input/output error";
    case FTW_ST_MPI_ERROR:           return "native MPI call failed";
    case FTW_ST_PEER_FAILED:         return "peer process failed";
    case FTW_ST_FATAL:               return "fatal error";
    }
    return "unknown status";
}
