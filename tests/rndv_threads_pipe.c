/* ftw-test: np=2 mode=ftwrap timeout=240 env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=shm env=FTW_SHM_PULL=pipe */
/*
 * rndv_threads_pipe - rndv_threads.c through the shm pipeline
 * (FTW_SHM_PULL=pipe): one thread at a time pulls from a sender through
 * the segment, the others read with cma meanwhile.
 */
#include "rndv_threads.c"
