/* ftw-test: np=16 mode=ftwrap timeout=120 link=ftwrap expect-failed=4,8 fate=4:signal:KILL fate=8:signal:KILL env=FTW_IDLE=sleep env=FTW_INJECT=rank=4+8,at=agree_up:41 */
/*
 * agree_tree_two - agree_tree.c with two inner nodes, ranks 4 (children
 * 5 and 6) and 8 (children 9, 10 and 12), killed at once in agreement 41,
 * each with its children's contributions in hand, before it sends its own
 * up: their subtrees must reach the root around both.
 */
#define VICTIMS ((1u << 4) | (1u << 8))
#include "agree_tree.c"
