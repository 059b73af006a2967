/*
 * Cut reads: cross-memory copies the MPI makes from (or to) a process that
 * has died.
 *
 * On one host the MPIs move large messages with process_vm_readv (UCX's
 * cma transport, Open MPI's vader single-copy) or process_vm_writev.  When
 * the other process has died the call fails with ESRCH, or copies part
 * and stops; UCX 1.13 then aborts the reader, and a short copy it takes
 * for the whole.  ftwrap interposes both calls.  A copy that fails because
 * the peer is gone is reported to the MPI as done, the peer is published
 * as failed (the kernel has just proved it), and the local bytes that were
 * not copied are recorded as a cut range.  The MPI then completes the
 * transfer with those bytes missing; ftwrap fails every receive that
 * completes over a cut range, and every collective that completes after a
 * cut by one of its members, with FTW_ERR_PROC_FAIL_STOP.  Nothing can
 * write a cut range later: the transfer has ended.
 */
#ifndef FTW_FT_CUT_H
#define FTW_FT_CUT_H

#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/comm.h"

/* Gates (core/lock.h), read without cut_lock. */
extern _Atomic int ftw_cut_count;       /* 0: every check is one branch */
extern _Atomic uint32_t ftw_cut_seq;    /* cuts recorded so far */

/* 1 if the span count elements of dt at buf may touch overlaps a cut
 * range; the ranges it overlaps are forgotten (their transfer is over). */
int ftw_cut_hit(const void *buf, MPI_Count count, MPI_Datatype dt);

/* Forget the cut ranges inside [lo, hi) (a quarantined receive ended). */
void ftw_cut_forget(const char *lo, const char *hi);

/* 1 if a process of c was cut off after cut number seq0. */
int ftw_cut_since(uint32_t seq0, const ftw_comm_t *c);

#endif
