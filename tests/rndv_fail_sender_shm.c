/* ftw-test: np=3 mode=ftwrap timeout=40 expect-failed=1 fate=1:signal:KILL env=FTW_RNDV_THRESHOLD=64k env=FTW_RNDV_CHUNK=1m env=FTW_INJECT=rank=1,at=pulled:3 env=FTW_XPORT=shm */
/*
 * rndv_fail_sender_shm - rndv_fail_sender.c with FTW_XPORT=shm: the receiver
 * pulls through the pair's shared segment, the sender copies the
 * fragments in from its own MPI calls.
 */
#include "rndv_fail_sender.c"
