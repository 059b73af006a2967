/* ftw-test: np=3 mode=ftwrap timeout=40 expect-failed=1 fate=1:signal:KILL env=FTW_RNDV_THRESHOLD=64k env=FTW_RNDV_CHUNK=1m env=FTW_INJECT=rank=1,at=pulled:3 env=FTW_XPORT=shm */
/*
 * rndv_fail_sender_shm - rndv_fail_sender.c with FTW_XPORT=shm (split
 * pulls): the sender dies while it may be writing a chunk of its own
 * into the receiver.
 */
#include "rndv_fail_sender.c"
