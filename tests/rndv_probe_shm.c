/* ftw-test: np=2 mode=ftwrap timeout=120 env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=shm */
/*
 * rndv_probe_shm - rndv_probe.c with FTW_XPORT=shm: the receiver
 * pulls through the pair's shared segment, the sender copies the
 * fragments in from its own MPI calls.
 */
#include "rndv_probe.c"
