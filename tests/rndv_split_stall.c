/* ftw-test: np=2 mode=ftwrap timeout=60 env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=shm env=FTW_SHM_PULL=split */
/*
 * rndv_split_stall - rndv_shm_stall.c with split pulls: a sender out of
 * MPI calls takes no chunk, so the receiver reads them all itself at once.
 */
#define SPLIT_PULLS 1
#include "rndv_shm_stall.c"
