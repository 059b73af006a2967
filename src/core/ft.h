/*
 * The entry points the generated wrappers call: one core per family.
 */
#ifndef FTW_FT_FT_H
#define FTW_FT_FT_H

#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>

#include "detect/detect.h"
#include "util/compiler.h"

/* Epoch of the last failure the application side has handled. */
extern _Atomic uint32_t ftw_seen_epoch;

/* Catch up with failures the detector published since ftw_seen_epoch. */
void ftw_failure_catch_up(void);

/* The fast path of every wrapped call: one relaxed atomic load. */
static inline void ftw_wrap_check(void)
{
    if (ftw_unlikely(atomic_load_explicit(&ftw_fail_epoch,
                                          memory_order_relaxed) !=
                     atomic_load_explicit(&ftw_seen_epoch,
                                          memory_order_relaxed)))
        ftw_failure_catch_up();
}

/* MPI_Init, MPI_Init_thread: around the native call. */
void ftw_init_before(void);
int ftw_init_after(int rc);

/* 1 between MPI_Init and MPI_Finalize (a program of MPI sessions alone
 * never starts ftwrap: it has no MPI_COMM_WORLD); the wrappers are the
 * MPI's own calls while it is 0. */
extern _Atomic int ftw_running;
int ftw_initialized(void);

/* MPI_Finalize, MPI_Finalized. */
int ftw_finalize(void);
int ftw_finalize_run(MPI_Comm ctl, int world_rank);
int ftw_finalized(int *flag);

/* MPI_Error_class: Open MPI 4.1 answers MPI_ERR_UNKNOWN for classes made
 * by MPI_Add_error_class, so ftwrap answers for its own. */
int ftw_error_class(int code, int *cls);
int ftw_comm_get_attr(MPI_Comm comm, int keyval, void *value, int *flag);

/* Communicator release: after the native free. */
void ftw_comm_released(MPI_Comm comm);

/* Failure handlers (failhandler.c). */
void ftw_failhandlers_run(void);
void ftw_failhandler_forget(MPI_Comm comm);
void ftw_errhandler_note(MPI_Errhandler eh, MPI_Comm_errhandler_function *fn);
int ftw_comm_create_errhandler(MPI_Comm_errhandler_function *fn,
                               MPI_Errhandler *eh);
int ftw_win_create_errhandler(MPI_Win_errhandler_function *fn,
                              MPI_Errhandler *eh);
int ftw_file_create_errhandler(MPI_File_errhandler_function *fn,
                               MPI_Errhandler *eh);
/* Register errhandler (FTW_FAILHANDLER_NULL: remove the handler) for the
 * failures of members: a communicator's own (win and file NULL), called
 * as fn(&comm, &code); or a window's or a file's, kept under its members'
 * communicator (members.c's duplicate, whose release forgets it), called
 * as fn(win, &code) or fn(file, &code).  MPI_ERR_ARG for a handler not
 * made by the matching MPI_*_create_errhandler. */
int ftw_obj_failhandler_set(const MPI_Win *win, const MPI_File *file,
                            MPI_Comm members, MPI_Errhandler errhandler);
MPI_Errhandler ftw_obj_failhandler_get(MPI_Comm members);

#endif
