/* ftw-test: np=2 mode=ftwrap timeout=60 env=FTW_RNDV_THRESHOLD=1k */
/*
 * rndv_type_lifetime - tests/p2p_type_lifetime.c with ftwrap's own
 * rendezvous taking every message of 1 KiB and more: the receiver pulls
 * and unpacks after the program freed the type, and messages too short
 * for a rendezvous header land in ftwrap's scratch space first.
 */
#include "p2p_type_lifetime.c"
