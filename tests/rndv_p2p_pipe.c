/* ftw-test: np=2 mode=ftwrap timeout=120 env=FTW_RNDV_THRESHOLD=64k env=FTW_RNDV_CHUNK=1m env=FTW_XPORT=shm env=FTW_SHM_PULL=pipe */
/*
 * rndv_p2p_pipe - rndv_p2p.c through the shm pipeline (FTW_SHM_PULL=pipe):
 * the sender copies fragments into the pair's segment from its own MPI
 * calls, the receiver copies them out.
 */
#include "rndv_p2p.c"
