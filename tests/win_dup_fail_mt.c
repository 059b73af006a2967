/* ftw-test: np=4 mode=ftwrap timeout=60 link=ftwrap expect-failed=2 fate=2:signal:KILL env=FTW_INJECT=rank=2,at=dup:1 */
/*
 * win_dup_fail_mt - win_dup_fail.c under MPI_THREAD_MULTIPLE: a process
 * dies before the duplicate ftwrap makes for a new window, while a second
 * thread on each survivor keeps duplicating MPI_COMM_SELF and messaging
 * itself on the duplicates.  The survivors give ftwrap's duplicate up
 * instead of waiting in it, and the second thread's work stays intact.
 */
#define SURVIVORS_THREADS 1
#include "win_dup_fail.c"
