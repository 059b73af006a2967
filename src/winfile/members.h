/*
 * The processes of a window or a file (win.c, file.c): a duplicate of the
 * communicator the object was made over, tracked like any communicator
 * (its failures, its agreements), that ftwrap's own barriers and
 * validates run on.
 */
#ifndef FTW_FT_MEMBERS_H
#define FTW_FT_MEMBERS_H

#include <mpi.h>
#include <stdint.h>

#include "coll/coll.h"

/* Make the duplicate of co->native (collective over it: every member
 * calls it, even one that will not keep a record), tracked with the
 * creation's child id; MPI_COMM_NULL if it could not be made, with *lost
 * set when that is because a member failed meanwhile (the duplicate was
 * given up instead of waiting for it). */
MPI_Comm ftw_members_dup(ftw_coll_t *co, int *lost);

/* 1 if a member still in the object failed (surv_of: NULL, or -1 for the
 * members a validate excluded); computed again only when the failure
 * epoch moved since *epoch_checked. */
int ftw_members_invalid(MPI_Comm members, const int *surv_of,
                        uint32_t *epoch_checked, int *invalid);

/* FTW_Comm_validate over the members.  *remake is set when it excluded
 * processes that nsurv (the object's members now) still counts: then
 * *surv_of_p gets a copy of the survivor map and *survivors the
 * survivors' communicator to make the object again over. */
int ftw_members_validate(MPI_Comm members, int nsurv,
                         MPI_Group *failed_group, int *remake,
                         int **surv_of_p, int *nsurv_p,
                         MPI_Comm *survivors);

/* The second half of that, after a validate of the members that
 * succeeded (blocking or not): *remake and the rest as above; nonzero
 * only when out of memory. */
int ftw_members_moved(MPI_Comm members, int nsurv, int *remake,
                      int **surv_of_p, int *nsurv_p, MPI_Comm *survivors);

#endif
