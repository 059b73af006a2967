/* ftw-test: np=2 mode=both timeout=60 env=WAIT_MIXED_FILE_FIRST=1 */
/*
 * wait_mixed_file_first - wait_mixed.c with its nonblocking file requests
 * before anything else: a wait that finishes a whole set with one
 * MPI_Testall must not be used on the I/O library's requests (MPICH's
 * MPI_Testall asserts on them), and here no persistent collective has
 * turned that off yet.
 */
#include "wait_mixed.c"
