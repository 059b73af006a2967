/* ftw-test: np=3 mode=ftwrap timeout=40 expect-failed=1 fate=1:signal:KILL env=FTW_RNDV_THRESHOLD=2k env=FTW_EAGER_MAX=1k env=FTW_RNDV_FIRST=4k env=FTW_INJECT=rank=1,at=frag:1 env=FTW_XPORT=cma */
/*
 * rndv_first_frag_kill_pull - rndv_first_frag_kill.c with a 4 MiB
 * message: its receiver, whose fragment never comes, fails the pull of
 * the rest from the dead sender and cancels the fragment's receive.
 */
#define LEN ((size_t)4 << 20)
#include "rndv_first_frag_kill.c"
