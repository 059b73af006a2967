/* ftw-test: np=5 mode=ftwrap timeout=60 link=ftwrap expect-failed=2,4 fate=2:signal:KILL fate=4:signal:KILL env=FTW_INJECT=rank=2,at=settled:1 */
/*
 * settle_kill_drain - settle_kill.c with FTW_Comm_drain_all: a process dies between
 * its first agreement and the confirming one; the survivors finish.
 */
#define OP 1
#include "settle_kill.c"
