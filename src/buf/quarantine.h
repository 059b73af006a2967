/*
 * Receive-buffer quarantine: byte ranges that a native transfer ftwrap
 * gave up on (a receive from a failed peer that the MPI would not let
 * cancel) may still write.  A new receive into an overlapping range fails
 * with FTW_ERR_BUFFER_UNUSABLE (or, FTW_QUARANTINE=bounce, goes through a
 * bounce buffer: buf/bounce.h); a range is released when nothing can write
 * it any more (the graveyard decides: request.c).
 */
#ifndef FTW_FT_QUARANTINE_H
#define FTW_FT_QUARANTINE_H

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>

/* Entries; 0: every check is one branch (a gate, core/lock.h). */
extern _Atomic int ftw_quarantine_count;

/* Quarantine the span count elements of dt at buf may touch; returns an
 * id for ftw_quarantine_release (0 if nothing was recorded). */
unsigned ftw_quarantine_add(const void *buf, MPI_Count count,
                            MPI_Datatype dt);
void ftw_quarantine_release(unsigned id);

/* 1 if [buf, buf+len) overlaps a quarantined range. */
int ftw_quarantine_overlaps(const void *buf, size_t len);

/* 1 if it overlaps a range quarantined before the one with this id. */
int ftw_quarantine_overlaps_before(const void *buf, size_t len,
                                   unsigned id);

/* The span count elements of dt at buf may touch: [*lo_p, *hi_p). */
int ftw_buffer_span(const void *buf, MPI_Count count, MPI_Datatype dt,
                    const char **lo_p, const char **hi_p);

#endif
