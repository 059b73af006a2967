/* ftw-test: np=2 mode=ftwrap timeout=120 env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=shm */
/*
 * rndv_probe_shm - rndv_probe.c with FTW_XPORT=shm (split pulls): the
 * receiver and the sender share the copy.
 */
#include "rndv_probe.c"
