/* ftw-test: np=4 mode=ftwrap timeout=150 link=ftwrap expect-failed=1,3 fate=1:signal:KILL fate=3:signal:KILL */
/*
 * thread_stress_fast - thread_stress with a validate or a drain every
 * 10 ms instead of every 100 ms: ten times the drains cutting the
 * workers' receives, probes and rendezvous pulls.
 */
#define STEP_US 10000
#include "thread_stress.c"
