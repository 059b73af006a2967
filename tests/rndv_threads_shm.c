/* ftw-test: np=2 mode=ftwrap timeout=240 env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=shm */
/*
 * rndv_threads_shm - rndv_threads.c with FTW_XPORT=shm (split pulls):
 * threads pull through the pair's shared segment (one at a time per
 * sender; the others read with cma meanwhile) while the sender's threads
 * write their chunks.
 */
#include "rndv_threads.c"
