/* ftw-test: np=3 mode=ftwrap timeout=90 link=ftwrap mpi=openmpi expect-failed=2 fate=2:signal:KILL */
/*
 * xjob_fail_parent - xjob_fail with a parent dying instead of a child: the
 * spawned processes, of the other job, see its failure as errors and
 * recover with the surviving parents (rank 2 of m, the last parent, is
 * SIGKILLed; its children live on).
 */
#define XJOB_VICTIM(msize) ((msize) - 3)
#include "xjob_fail.c"
