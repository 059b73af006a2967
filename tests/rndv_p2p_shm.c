/* ftw-test: np=2 mode=ftwrap timeout=120 env=FTW_RNDV_THRESHOLD=64k env=FTW_RNDV_CHUNK=1m env=FTW_XPORT=shm */
/*
 * rndv_p2p_shm - rndv_p2p.c with FTW_XPORT=shm (split pulls): the
 * receiver reads chunks with cma while the sender, from its own MPI
 * calls, writes others into the receiver's buffer.
 */
#include "rndv_p2p.c"
