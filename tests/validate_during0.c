/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=0 fate=0:signal:KILL */
/*
 * validate_during0 - validate_during.c with rank 0, the lowest rank,
 * as the process that dies during FTW_Comm_validate: its verdicts are
 * printed by the lowest survivor, rank 1.
 */
#define VICTIM 0
#define VICTIM_S "0"
#include "validate_during.c"
