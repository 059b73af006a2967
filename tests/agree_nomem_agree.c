/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap env=FTW_INJECT=rank=2,at=nomem:1 */
/*
 * agree_nomem_agree - agree_nomem.c with MPIX_Comm_agree: a member short of memory
 * for its agreement makes it fail with MPI_ERR_NO_MEM everywhere.
 */
#define OP 1
#include "agree_nomem.c"
