/* ftw-test: np=4 mode=ftwrap timeout=60 link=ftwrap expect-failed=2 fate=2:signal:KILL */
/*
 * inter_shrink_even - inter_shrink.c with world rank 2 killed: the failure
 * is in the group whose lowest world rank is lower, which goes first in
 * the agreement's member list.
 */
#define VICTIM 2
#include "inter_shrink.c"
