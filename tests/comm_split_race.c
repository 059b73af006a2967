/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * comm_split_race - a member dies while MPI_Comm_split is under way: the
 * checks of comm_dup_race.c for MPI_Comm_split(WORLD, rank % 2, 4 - rank)
 * (ranks 0 and 1 inside it when rank 3 dies, rank 2 calling it knowing of
 * the failure), on both MPIs: ftwrap gathers the colors and keys through
 * the MPI's nonblocking allgather, which it abandons when a member fails.
 */
#define RACE_SPLIT 1
#include "comm_dup_race.c"
