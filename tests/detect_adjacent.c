/* ftw-test: np=16 mode=ftwrap timeout=90 link=ftwrap expect-failed=6,7 fate=6:signal:KILL fate=7:signal:KILL env=FTW_DETECT=heartbeat env=FTW_HB_PERIOD=0.1 env=FTW_HB_TIMEOUT=1.0 */
/*
 * detect_adjacent - detect_notice.c with two ring neighbours killed at
 * once: rank 7 watched rank 6, so rank 6's watcher is dead too.  Rank 8
 * finds rank 7 silent after the timeout, then watches rank 6 (its new
 * ring predecessor), pings it and finds it silent for half a timeout:
 * both failures are known everywhere within 1.5 timeouts + 1 s (without
 * the ping, rank 6 would be found a whole timeout after rank 7).
 */
#define VICTIM_A 6
#define VICTIM_B 7
#define DELAY_B_US 0
#define LEARN_BOUND 2.5         /* 1.5 hb_timeout + 1 s */
#include "detect_notice.c"
