/* ftw-test: np=16 mode=ftwrap timeout=90 link=ftwrap expect-failed=5,9 fate=5:signal:KILL fate=9:signal:KILL env=FTW_DETECT=heartbeat env=FTW_HB_PERIOD=0.1 env=FTW_HB_TIMEOUT=1.0 */
/*
 * detect_relay - detect_notice.c with a dead relay.  Rank 5 is killed,
 * and rank 9 0.3 s later.  Rank 6 finds rank 5 silent and starts its
 * notice: in rank 5's tree rank 9 (position 4) is one of the root's
 * children, with ranks 10, 11 and 12 below it.  Rank 9 is dead by then,
 * but not yet known dead: its notice goes unacknowledged until rank 10
 * finds rank 9 silent and tells everyone; rank 6 then gives rank 5's
 * notice to rank 9's children.  Every survivor must know of rank 5 within
 * 2 timeouts + 1 s of its death and of rank 9 within 1 timeout + 1 s of
 * its own.
 */
#define VICTIM_A 5
#define VICTIM_B 9
#define DELAY_B_US 300000
#define LEARN_BOUND 3.0
#include "detect_notice.c"
