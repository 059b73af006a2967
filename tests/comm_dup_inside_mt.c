/* ftw-test: np=4 mode=ftwrap timeout=60 link=ftwrap expect-failed=3 fate=3:signal:KILL env=FTW_INJECT=rank=3,at=dup:1 */
/*
 * comm_dup_inside_mt - comm_dup_inside.c under MPI_THREAD_MULTIPLE: a
 * member dies right before the MPI's duplicate in MPI_Comm_dup while a
 * second thread on each survivor keeps duplicating MPI_COMM_SELF and
 * messaging itself on the duplicates.  The survivors give the duplicate
 * up within 5 s instead of waiting in the MPI's blocking one, and the
 * second thread's duplicates and messages stay intact throughout.
 */
#define SURVIVORS_THREADS 1
#include "comm_dup_inside.c"
