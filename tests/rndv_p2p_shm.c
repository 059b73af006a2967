/* ftw-test: np=2 mode=ftwrap timeout=120 env=FTW_RNDV_THRESHOLD=64k env=FTW_RNDV_CHUNK=1m env=FTW_XPORT=shm */
/*
 * rndv_p2p_shm - rndv_p2p.c with FTW_XPORT=shm: the receiver
 * pulls through the pair's shared segment, the sender copies the
 * fragments in from its own MPI calls.
 */
#include "rndv_p2p.c"
