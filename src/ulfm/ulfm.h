/*
 * The ULFM interface (MPIX_Comm_revoke, shrink, agree, ...) on top of
 * ftwrap's own failure semantics.  Revocation itself is core/revoke.h.
 *
 * Error classes.  ULFM's failure classes are ftwrap's own (ftwrap.h), so
 * both interfaces raise the same values; MPIX_ERR_REVOKED is raised for
 * revoked communicators.
 */
#ifndef FTW_FT_ULFM_H
#define FTW_FT_ULFM_H

#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>

#include "mpi-ext.h"
#include "detect/detect.h"
#include "core/comm.h"
#include "core/raise.h"
#include "core/revoke.h"
#include "util/compiler.h"

/* The ULFM calls as the generated wrappers reach them (the MPIs that
 * declare a call get a generated entry point, the others ulfm.c's). */
int ftw_comm_shrink(MPI_Comm comm, MPI_Comm *newcomm);
int ftw_comm_agree(MPI_Comm comm, int *flag);
int ftw_comm_failure_ack(MPI_Comm comm);
int ftw_comm_failure_get_acked(MPI_Comm comm, MPI_Group *failedgrp);

#endif
