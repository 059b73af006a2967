/*
 * Files (MPI-IO) under failures.
 *
 * ftwrap keeps a record per file opened through it: a duplicate of the
 * communicator it was opened over (its members' failures, agreements),
 * the name and mode, and the native handle calls run on.  Local
 * operations (independent reads and writes, seeks, queries) are not
 * affected by a peer's failure.  Collective ones first run a watched
 * barrier over the members, so that a member that died is an error
 * (FTW_ERR_PROC_FAIL_STOP, raised on the file), never a hang; after a
 * failure they fail at once until FTW_File_validate, which agrees on the
 * failed (FTW_Comm_validate over the duplicate) and opens the file again
 * over the survivors (the same name and mode, the view set again, each
 * process's individual file pointer kept; the shared file pointer starts
 * at 0).  MPI_File_close after a failure does not close the file and
 * returns the error.  A member that dies after the barrier, inside the
 * MPI's collective, still hangs the others.
 */
#ifndef FTW_FT_FILE_H
#define FTW_FT_FILE_H

#include <mpi.h>
#include <stdatomic.h>

#include "coll/coll.h"
#include "util/compiler.h"

/* Files opened again over survivors: their calls need routing. */
extern _Atomic int ftw_file_moved;

MPI_File ftw_file_native_slow(MPI_File fh);

/* The native handle of fh (a local operation). */
static inline MPI_File ftw_file_native(MPI_File fh)
{
    if (ftw_likely(atomic_load_explicit(&ftw_file_moved,
                                        memory_order_relaxed) == 0))
        return fh;
    return ftw_file_native_slow(fh);
}

/* A collective operation on fh: 0 to go on with *native, nonzero when
 * refused (*rc raised on fh).  barrier: wait for every member first
 * (0 for the _end of a split collective, whose _begin did). */
int ftw_file_coll(const char *name, MPI_File fh, int barrier,
                  MPI_File *native, int *rc);

/* MPI_File_open: the gate refused (*fh is MPI_FILE_NULL); or after the
 * MPI's open returned rc, track the file. */
int ftw_file_refused(ftw_coll_t *co, MPI_File *fh);
int ftw_file_opened(ftw_coll_t *co, int rc, MPI_File *fh,
                    const char *filename, int amode);

/* MPI_File_set_view: the view is kept to be set again after a validate
 * that opened the file again. */
int ftw_file_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype,
                      MPI_Datatype filetype, const char *datarep,
                      MPI_Info info);

int ftw_file_close(MPI_File *fh);

void ftw_file_table_clear(void);

#endif
