/* ftw-test: np=2 mode=ftwrap timeout=240 env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=auto */
/*
 * rndv_threads_auto - rndv_threads.c with FTW_XPORT=auto: cma below 256
 * KiB, shm above, chosen per message while threads send at once.
 */
#include "rndv_threads.c"
