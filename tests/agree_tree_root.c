/* ftw-test: np=16 mode=ftwrap timeout=120 link=ftwrap expect-failed=0 fate=0:signal:KILL env=FTW_IDLE=sleep env=FTW_INJECT=rank=0,at=agree_down:162 */
/*
 * agree_tree_root - agree_tree.c with the root, rank 0, killed in the
 * middle of agreement 41: its decision reached its first child (rank 1)
 * only; 2, 4 and 8 must take it from rank 1, the new root, and nobody may
 * decide otherwise.  FTW_INJECT counts its decision messages, four per
 * agreement over 16 processes.
 */
#define VICTIMS (1u << 0)
#include "agree_tree.c"
