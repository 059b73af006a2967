/* ftw-test: np=2 mode=ftwrap timeout=120 env=FTW_RNDV_THRESHOLD=64k env=FTW_RNDV_CHUNK=1m env=FTW_XPORT=auto */
/*
 * rndv_p2p_auto - rndv_p2p.c with FTW_XPORT=auto: each message takes cma
 * or shm by its size, so both transports share one pair of processes.
 */
#include "rndv_p2p.c"
