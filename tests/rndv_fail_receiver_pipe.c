/* ftw-test: np=3 mode=ftwrap timeout=40 expect-failed=1 fate=1:signal:KILL env=FTW_RNDV_THRESHOLD=64k env=FTW_RNDV_CHUNK=1m env=FTW_INJECT=rank=1,at=pull:3 env=FTW_XPORT=shm env=FTW_SHM_PULL=pipe */
/*
 * rndv_fail_receiver_pipe - rndv_fail_receiver.c through the shm pipeline
 * (FTW_SHM_PULL=pipe): the receiver dies with fragments asked for.
 */
#include "rndv_fail_receiver.c"
