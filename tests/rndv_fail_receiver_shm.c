/* ftw-test: np=3 mode=ftwrap timeout=40 expect-failed=1 fate=1:signal:KILL env=FTW_RNDV_THRESHOLD=64k env=FTW_RNDV_CHUNK=1m env=FTW_INJECT=rank=1,at=pull:3 env=FTW_XPORT=shm */
/*
 * rndv_fail_receiver_shm - rndv_fail_receiver.c with FTW_XPORT=shm
 * (split pulls): the receiver dies while its sender may be writing
 * into it.
 */
#include "rndv_fail_receiver.c"
