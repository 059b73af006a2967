/* ftw-test: np=2 mode=ftwrap timeout=120 env=FTW_SHM_PUSH=0 */
/*
 * rndv_auto_hot_nopush - rndv_auto_hot.c without push slots: a blocking
 * send below 768 KiB, and the same bytes sent again below 512 KiB (one
 * buffer's window, a nonblocking or persistent ping-pong), are pulled by
 * cma.
 */
#include "rndv_auto_hot.c"
