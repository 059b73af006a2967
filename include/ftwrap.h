/*
 * ftwrap.h - public interface of ftwrap, process-failure semantics for
 * unmodified MPI programs on stock Open MPI and MPICH.
 *
 * Include after (or instead of) <mpi.h>.  Programs that only need the error
 * classes may use this header without linking -lftwrap: the classes are
 * constants, registered by the library inside MPI_Init in this order, and
 * MPI_Init fails loudly if the MPI hands out other values.
 */
#ifndef FTWRAP_H
#define FTWRAP_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FTWRAP_VERSION_MAJOR 0
#define FTWRAP_VERSION_MINOR 1

/* The first class MPI_Add_error_class returns in a fresh process. */
#if defined(OPEN_MPI)
#define FTW_ERR_FIRST_ (MPI_ERR_LASTCODE + 1)
#elif defined(MPICH)
#define FTW_ERR_FIRST_ 0x40000001
#else
#error "ftwrap supports Open MPI and MPICH"
#endif

/*
 * Error classes.  MPI_Error_class() and MPI_Error_string() work on them.
 *
 * FTW_ERR_PROC_FAIL_STOP       a process this operation depends on failed
 * FTW_ERR_ANY_SOURCE_DISABLED  MPI_ANY_SOURCE receives are disabled on this
 *                              communicator after a failure; the request
 *                              stays pending (re-enable, cancel or wait)
 * FTW_ERR_DRAINED              the request was cancelled by a drain
 * FTW_ERR_BUFFER_UNUSABLE      a failed transfer might still write the
 *                              receive buffer; it is quarantined
 * FTW_ERR_INTERRUPTED          interrupt mode: a new failure was seen
 *                              while the call blocked
 */
#define FTW_ERR_PROC_FAIL_STOP      (FTW_ERR_FIRST_ + 0)
#define FTW_ERR_ANY_SOURCE_DISABLED (FTW_ERR_FIRST_ + 1)
#define FTW_ERR_DRAINED             (FTW_ERR_FIRST_ + 2)
#define FTW_ERR_BUFFER_UNUSABLE     (FTW_ERR_FIRST_ + 3)
#define FTW_ERR_INTERRUPTED         (FTW_ERR_FIRST_ + 4)
#define FTW_ERR_LAST_               FTW_ERR_INTERRUPTED

/*
 * FTW_Initialized - whether ftwrap is active in this process.
 *
 * Local.  Sets *flag to 1 once MPI_Init has run under ftwrap.  Always
 * returns MPI_SUCCESS.  Needs -lftwrap at link time.
 */
int FTW_Initialized(int *flag);

#ifdef __cplusplus
}
#endif

#endif /* FTWRAP_H */
