/*
 * mpi-ext.h - the ULFM interface (User Level Failure Mitigation) as
 * ftwrap provides it on Open MPI 4.1 and MPICH 4.0.
 *
 * Put ftwrap's include directory before the MPI's own so that
 * `#include <mpi-ext.h>` finds this file; it includes the MPI's own
 * mpi-ext.h (Open MPI's extensions), if there is one, first:
 *
 *     mpicc prog.c $(pkg-config --cflags --libs ftwrap-openmpi)   (or -mpich)
 *
 * which also links -lftwrap: Open MPI's library has none of the calls
 * below and MPICH's only five of them.
 *
 * Error classes.  MPIX_ERR_PROC_FAILED is FTW_ERR_PROC_FAIL_STOP and
 * MPIX_ERR_PROC_FAILED_PENDING is FTW_ERR_ANY_SOURCE_DISABLED: one class
 * each, whichever interface the program uses (see ftwrap.h).  On MPICH
 * all three are MPICH's own values (101, 102, 103); on Open MPI they are
 * classes ftwrap registers at MPI_Init.  ULFM calls and FTW_ calls may be
 * mixed on one communicator.
 */
#ifndef FTWRAP_MPI_EXT_H
#define FTWRAP_MPI_EXT_H

#include <mpi.h>

#if defined(__has_include_next)
#if __has_include_next(<mpi-ext.h>)
#include_next <mpi-ext.h>
#endif
#elif defined(OPEN_MPI)
#include_next <mpi-ext.h>
#endif

#include "ftwrap.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * MPIX_FT - an attribute key: MPI_Comm_get_attr(comm, MPIX_FT, &v, &flag)
 * gives flag 1 and *(int *)v == 1 on every communicator while ftwrap runs
 * (failures are tolerated).  A constant that no MPI hands out as a key.
 */
#define MPIX_FT (-0x4654)
#define FTWRAP_ULFM 1

#ifndef MPIX_ERR_PROC_FAILED
#define MPIX_ERR_PROC_FAILED         FTW_ERR_PROC_FAIL_STOP
#define MPIX_ERR_PROC_FAILED_PENDING FTW_ERR_ANY_SOURCE_DISABLED
#define MPIX_ERR_REVOKED             FTW_ERR_REVOKED_
#endif
/* The classes' names without the X, as ULFM programs written for MPIs
 * that adopted them spell them. */
#ifndef MPI_ERR_PROC_FAILED
#define MPI_ERR_PROC_FAILED          MPIX_ERR_PROC_FAILED
#define MPI_ERR_PROC_FAILED_PENDING  MPIX_ERR_PROC_FAILED_PENDING
#define MPI_ERR_REVOKED              MPIX_ERR_REVOKED
#endif

/*
 * MPIX_Comm_revoke - revoke comm everywhere.
 *
 * Local (not collective): returns at once; the revocation reaches every
 * live process of comm, also when processes (the caller included) fail
 * meanwhile.  From then on non-local calls on comm (point-to-point,
 * collectives, communicator creation) fail with MPIX_ERR_REVOKED, and so
 * do pending requests on it, a blocked receive included; only
 * MPIX_Comm_agree, MPIX_Comm_iagree, MPIX_Comm_shrink and
 * MPIX_Comm_ishrink still work.  Revoking twice is no error.
 * Errors: MPI_ERR_COMM (MPI_COMM_NULL, an intercommunicator, or one
 * ftwrap did not see made).
 *
 * MPIX_Comm_is_revoked - local: *flag = 1 if this process knows comm is
 * revoked.  Errors: MPI_ERR_ARG, MPI_ERR_COMM.
 */
int MPIX_Comm_revoke(MPI_Comm comm);
int MPIX_Comm_is_revoked(MPI_Comm comm, int *flag);

/*
 * MPIX_Comm_shrink - a new communicator of comm's live processes.
 *
 * Collective over comm's live processes, fault tolerant; works on a
 * revoked comm and never raises MPIX_ERR_PROC_FAILED or MPIX_ERR_REVOKED.
 * The processes agree on the failed ones; *newcomm holds the others in
 * comm's rank order and has comm's error handler.  A process that fails
 * during the call may or may not be in it.
 * MPIX_Comm_ishrink - the same, nonblocking; *newcomm is written when
 * *request completes.  Nonblocking shrinks, agreements and validates
 * finish in the order they were started, which must be the same on every
 * process.
 * Errors: MPI_ERR_ARG, MPI_ERR_COMM (as revoke), MPI_ERR_NO_MEM.
 */
int MPIX_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm);
int MPIX_Comm_ishrink(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request);

/*
 * MPIX_Comm_agree - agree on the bitwise AND of *flag over comm's live
 * processes.
 *
 * Collective over comm's live processes, fault tolerant; works on a
 * revoked comm.  Every process gets the same *flag and the same return
 * code: MPIX_ERR_PROC_FAILED if a process of comm is known failed (by any
 * participant) and some participant had not acknowledged that failure
 * (MPIX_Comm_failure_ack, MPIX_Comm_ack_failed), else MPI_SUCCESS; *flag
 * is the agreed value in both cases.
 * MPIX_Comm_iagree - the same, nonblocking: *flag is written, and the
 * error returned by MPI_Wait/MPI_Test, when *request completes.
 * Errors besides: MPI_ERR_ARG, MPI_ERR_COMM (as revoke), MPI_ERR_NO_MEM.
 */
int MPIX_Comm_agree(MPI_Comm comm, int *flag);
int MPIX_Comm_iagree(MPI_Comm comm, int *flag, MPI_Request *request);

/*
 * Acknowledging failures; all local.
 *
 * MPIX_Comm_failure_ack - acknowledge every failure of comm this process
 * knows now; MPI_ANY_SOURCE receives work again on comm (until a new
 * failure), and MPIX_Comm_agree no longer raises for them.
 * MPIX_Comm_failure_get_acked - *failedgrp: the acknowledged failed
 * processes (a group of comm's processes; free it).
 * MPIX_Comm_get_failed - *failedgrp: every failed process of comm this
 * process knows, in the order it learned of them.
 * MPIX_Comm_ack_failed - acknowledge the first num_to_ack of those (no
 * fewer than already acknowledged); *num_acked: how many are
 * acknowledged now.  num_to_ack may exceed the number known.
 * Errors: MPI_ERR_ARG (a NULL output, num_to_ack < 0), MPI_ERR_COMM.
 */
int MPIX_Comm_failure_ack(MPI_Comm comm);
int MPIX_Comm_failure_get_acked(MPI_Comm comm, MPI_Group *failedgrp);
int MPIX_Comm_get_failed(MPI_Comm comm, MPI_Group *failedgrp);
int MPIX_Comm_ack_failed(MPI_Comm comm, int num_to_ack, int *num_acked);

#ifdef __cplusplus
}
#endif

#endif /* FTWRAP_MPI_EXT_H */
