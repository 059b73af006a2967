/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * comm_dup_race_mt - comm_dup_race.c under MPI_THREAD_MULTIPLE: a member
 * dies while MPI_Comm_dup is under way and a second thread on each
 * survivor keeps duplicating MPI_COMM_SELF and messaging itself on the
 * duplicates; the duplicate is given up as without threads.
 */
#define SURVIVORS_THREADS 1
#include "comm_dup_race.c"
