/* ftw-test: np=4 mode=ftwrap timeout=60 link=ftwrap mpi=openmpi expect-failed=3 fate=3:signal:KILL env=FTW_INJECT=rank=3,at=dup:1 */
/*
 * comm_dup_inside_mt - comm_dup_inside.c under MPI_THREAD_MULTIPLE: a
 * member dies right before the MPI's duplicate in MPI_Comm_dup while a
 * second thread on each survivor keeps duplicating MPI_COMM_SELF and
 * messaging itself on the duplicates.  The survivors give the duplicate
 * up within 5 s instead of waiting in the MPI's blocking one, and the
 * second thread's duplicates and messages stay intact throughout.
 *
 * Open MPI only for now: on MPICH, in 1 of about 6 runs, one survivor's
 * later MPI_Comm_dup of the survivors' communicator (a nonblocking
 * duplicate, next to the second thread's blocking ones of MPI_COMM_SELF)
 * had not ended after 40 s.
 */
#define SURVIVORS_THREADS 1
#include "comm_dup_inside.c"
