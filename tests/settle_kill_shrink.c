/* ftw-test: np=5 mode=ftwrap timeout=60 link=ftwrap expect-failed=2,4 fate=2:signal:KILL fate=4:signal:KILL env=FTW_INJECT=rank=2,at=settled:1 */
/*
 * settle_kill_shrink - settle_kill.c with MPIX_Comm_shrink: a process dies between
 * its first agreement and the confirming one; the survivors finish.
 */
#define OP 2
#include "settle_kill.c"
