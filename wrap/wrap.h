/*
 * Everything the generated wrappers (build/<mpi>/wrap/wrap_*.c) see: the
 * MPI, the functions the installed MPI has, and the family cores of
 * src/ft.  Hand-written code lives in src/, never in generated files.
 */
#ifndef FTW_WRAP_H
#define FTW_WRAP_H

#include <mpi.h>
#include <stddef.h>

#include "ftw_mpi_have.h"
#ifdef FTW_HAVE_MPI_EXT_H
#include <mpi-ext.h>
#endif
#include "ft/coll.h"
#include "ft/file.h"
#include "ft/complete.h"
#include "ft/ft.h"
#include "ft/op.h"
#include "ft/p2p_rndv.h"
#include "ft/probe.h"
#include "ft/win.h"
#include "ft/ulfm.h"
#include "ft/xjob.h"

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
