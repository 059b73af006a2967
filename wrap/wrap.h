/*
 * Everything the generated wrappers (build/<mpi>/wrap/wrap_*.c) see: the
 * MPI, the functions the installed MPI has, and the family cores in
 * src/.  Hand-written code lives in src/, never in generated files.
 */
#ifndef FTW_WRAP_H
#define FTW_WRAP_H

#include <limits.h>
#include <mpi.h>
#include <stddef.h>

#include "ftw_mpi_have.h"
#ifdef FTW_HAVE_MPI_EXT_H
#include <mpi-ext.h>
#endif
#include "coll/coll.h"
#include "winfile/file.h"
#include "p2p/bsend.h"
#include "p2p/complete.h"
#include "core/ft.h"
#include "op/op.h"
#include "rndv/p2p_rndv.h"
#include "p2p/probe.h"
#include "winfile/win.h"
#include "ulfm/ulfm.h"
#include "core/xjob.h"

/* The MPI_ERROR field of a single-completion call's status, kept: read
 * before the call, written back after it. */
static inline int ftw_status_error(const MPI_Status *status)
{
    return status != MPI_STATUS_IGNORE ? status->MPI_ERROR : 0;
}

static inline void ftw_status_error_keep(MPI_Status *status, int err)
{
    if (status != MPI_STATUS_IGNORE)
        status->MPI_ERROR = err;
}

#endif
