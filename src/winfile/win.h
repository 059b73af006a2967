/*
 * Windows (MPI one-sided communication) under failures.
 *
 * ftwrap keeps a record per window made through it: a duplicate of the
 * communicator it was made over (the window's members, in window rank
 * order, tracked like any communicator: its failures, its agreements),
 * and the native window traffic runs on.  A failure of any member
 * invalidates the window: every RMA call and every synchronisation on it
 * fails with FTW_ERR_PROC_FAIL_STOP, raised on the window, until
 * FTW_Win_validate.  Synchronisations that wait for other members are
 * watched:
 *
 *   MPI_Win_fence      a watched barrier over the members first, then the
 *                      MPI's fence
 *   MPI_Win_wait       MPI_Win_test in ftwrap's polling loop
 *   MPI_Win_start      waits, watched, for a note each target's
 *                      MPI_Win_post sends on the control channel
 *   MPI_Win_free       a watched barrier first; after a failure the handle
 *                      is released here without the MPI's (collective)
 *                      free, which would wait for the dead
 *   the others         refused at once when the window is invalid or the
 *                      target failed
 *
 * A member that dies after the others passed the barrier, or while the
 * MPI waits inside a synchronisation for it (MPICH's lock, flush,
 * unlock), still hangs them: the MPIs have no call ftwrap could abandon
 * there.
 *
 * FTW_Win_validate agrees on the failed members (FTW_Comm_validate over
 * the duplicate) and, when some were excluded, makes a new native window
 * over the survivors on the same memory (MPI_Win_create; for
 * MPI_Win_allocate[_shared] on the memory the MPI gave): the user's handle
 * stays, calls on it run on the new window with target ranks translated.
 * A window made with MPI_Win_create_dynamic cannot be re-made (its
 * attachments are the MPI's), and one of MPI_Win_allocate_shared loses
 * shared-memory queries when re-made.
 */
#ifndef FTW_FT_WIN_H
#define FTW_FT_WIN_H

#include <mpi.h>
#include <stdatomic.h>

#include "coll/coll.h"
#include "op/op.h"
#include "util/compiler.h"

typedef struct ftw_win ftw_win_t;

/* Windows re-made over survivors (their calls need routing); 0 keeps the
 * RMA calls on their fast path. */
extern _Atomic int ftw_win_moved;

/* Where an RMA call goes: the native window, the target's rank in it. */
typedef struct {
    MPI_Win native;
    int target;
    int rc;                 /* the error, when refused (raised) */
    ftw_win_t *w;           /* NULL on the fast path */
} ftw_win_route_t;

int ftw_win_rma_slow(ftw_win_route_t *rt, const char *name, MPI_Win win,
                     int target);

/* Route an RMA call to target on win: 0 to go on with rt's native window
 * and target, nonzero when refused (rt->rc raised on win). */
static inline int ftw_win_rma(ftw_win_route_t *rt, const char *name,
                              MPI_Win win, int target)
{
    if (ftw_likely(ftw_quiet() &&
                   atomic_load_explicit(&ftw_win_moved,
                                        memory_order_relaxed) == 0)) {
        rt->native = win;
        rt->target = target;
        rt->w = NULL;
        return 0;
    }
    return ftw_win_rma_slow(rt, name, win, target);
}

/* After a request-based RMA call (MPI_Rput...) that returned rc: record
 * the request so that waits fail instead of hanging when the target dies.
 * rbuf: the buffer it writes here (MPI_Rget, MPI_Rget_accumulate), NULL
 * for none. */
int ftw_win_req(MPI_Win win, int target, int rc, MPI_Request *req,
                void *rbuf, MPI_Count count, MPI_Datatype dt);

/* Window creation: the gate refused (co->rc raised on the communicator);
 * *win is MPI_WIN_NULL. */
int ftw_win_refused(ftw_coll_t *co, MPI_Win *win);

/* After the MPI's creation returned rc over co->native: track the window.
 * base: its memory (base_is_ptr: base is the MPI_Win_allocate baseptr
 * argument, a pointer to it), NULL for MPI_Win_create_dynamic. */
int ftw_win_made(ftw_coll_t *co, int rc, MPI_Win *win, void *base,
                 int base_is_ptr, MPI_Aint size, MPI_Aint disp_unit,
                 MPI_Info info);

/* The synchronisations, with the MPI's signatures (generated wrappers call
 * them: rules.py). */
int ftw_win_fence(int assert_, MPI_Win win);
int ftw_win_start(MPI_Group group, int assert_, MPI_Win win);
int ftw_win_complete(MPI_Win win);
int ftw_win_post(MPI_Group group, int assert_, MPI_Win win);
int ftw_win_wait(MPI_Win win);
int ftw_win_test(MPI_Win win, int *flag);
int ftw_win_lock(int lock_type, int rank, int assert_, MPI_Win win);
int ftw_win_unlock(int rank, MPI_Win win);
int ftw_win_lock_all(int assert_, MPI_Win win);
int ftw_win_unlock_all(MPI_Win win);
int ftw_win_flush(int rank, MPI_Win win);
int ftw_win_flush_all(MPI_Win win);
int ftw_win_flush_local(int rank, MPI_Win win);
int ftw_win_flush_local_all(MPI_Win win);
int ftw_win_sync(MPI_Win win);
int ftw_win_free(MPI_Win *win);

/* Drop every record (at finalize). */
void ftw_win_table_clear(void);

#endif
