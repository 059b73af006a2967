/* ftw-test: np=3 mode=ftwrap timeout=90 link=ftwrap expect-failed=2 fate=2:signal:KILL */
/*
 * file_fail_during - a process of an open file dies while the others wait
 * for it inside collective file operations: they get errors, not hangs.
 *
 * Three ranks open a new file in the tests' temporary directory (TMPDIR,
 * else /tmp) over MPI_COMM_WORLD, set a view of ints, and write their
 * checksummed 16 KiB blocks with MPI_File_write_at_all.  Then rank 2
 * leaves MPI, computes for 200 ms and SIGKILLs itself, never entering the
 * next collective, while ranks 0 and 1 are already in:
 *   - MPI_File_write_at_all: fails with FTW_ERR_PROC_FAIL_STOP;
 *   - the split collective MPI_File_write_at_all_begin (and its _end) and
 *     the nonblocking MPI_File_iwrite_at_all (at the call or its wait)
 *     fail the same way, none hangs;
 * then FTW_File_validate gives both the failed group {2}, a collective
 * write of new blocks and a collective read back work (data checked),
 * MPI_File_close closes, and rank 0 finds in the file the survivors' new
 * blocks and rank 2's block from before its death; then deletes it.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftwrap.h"
#include "tap.h"

#define N 4096                  /* ints per block */
#define BLOCK ((MPI_Offset)N)   /* in etypes */

static int is_fail(int rc)
{
    return tap_class(rc) == FTW_ERR_PROC_FAIL_STOP;
}

int main(int argc, char **argv)
{
    MPI_File fh;
    MPI_Group failed;
    MPI_Comm v;
    MPI_Request req;
    char path[512];
    const char *dir = getenv("TMPDIR");
    int *blk = malloc(N * sizeof(int)), *back = malloc(N * sizeof(int));
    int rank, rc, ok, n = -1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &v);
    MPI_Comm_set_errhandler(v, MPI_ERRORS_RETURN);
    if (rank == 0)
        snprintf(path, sizeof(path), "%s/ftw_file_fail_during.%d",
                 dir != NULL && *dir ? dir : "/tmp", (int)getpid());
    MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, MPI_COMM_WORLD);
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR,
                       MPI_INFO_NULL, &fh);
    if (rc != MPI_SUCCESS) {
        tap_diag("MPI_File_open(%s): %d", path, rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL);
    tap_fill(blk, N * sizeof(int), 300 + rank);
    MPI_File_write_at_all(fh, rank * BLOCK, blk, N, MPI_INT,
                          MPI_STATUS_IGNORE);
    if (rank == 2) {
        tap_spin(0.2);
        raise(SIGKILL);
    }

    /* Ranks 0 and 1 are in the collective before rank 2 dies. */
    tap_fill(blk, N * sizeof(int), 350 + rank);
    rc = MPI_File_write_at_all(fh, rank * BLOCK, blk, N, MPI_INT,
                               MPI_STATUS_IGNORE);
    ok = is_fail(rc);
    rc = MPI_File_write_at_all_begin(fh, rank * BLOCK, blk, N, MPI_INT);
    if (rc == MPI_SUCCESS)
        rc = MPI_File_write_at_all_end(fh, blk, MPI_STATUS_IGNORE);
    ok &= is_fail(rc);
    rc = MPI_File_iwrite_at_all(fh, rank * BLOCK, blk, N, MPI_INT, &req);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    ok &= is_fail(rc);

    rc = FTW_Comm_validate(v, &failed);
    if (rc != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Group_free(&failed);
    tap_plan(5);
    tap_ok_comm(v, ok, "a collective write waiting for a rank that dies "
                "fails with FTW_ERR_PROC_FAIL_STOP, and so do the split "
                "collective and the nonblocking one");

    rc = FTW_File_validate(fh, &failed);
    if (rc == MPI_SUCCESS) {
        MPI_Group_size(failed, &n);
        MPI_Group_free(&failed);
    }
    tap_ok_comm(v, rc == MPI_SUCCESS && n == 1, "FTW_File_validate gives "
                "the failed group {2}");

    tap_fill(blk, N * sizeof(int), 500 + rank);
    rc = MPI_File_write_at_all(fh, rank * BLOCK, blk, N, MPI_INT,
                               MPI_STATUS_IGNORE);
    memset(back, 0, N * sizeof(int));
    if (rc == MPI_SUCCESS)
        rc = MPI_File_read_at_all(fh, (1 - rank) * BLOCK, back, N, MPI_INT,
                                  MPI_STATUS_IGNORE);
    ok = rc == MPI_SUCCESS && tap_check(back, N * sizeof(int), 500 + 1 - rank);
    rc = MPI_File_close(&fh);
    tap_ok_comm(v, ok && rc == MPI_SUCCESS && fh == MPI_FILE_NULL,
                "after validate a collective write and read work (data "
                "checked) and MPI_File_close closes");

    ok = 1;
    if (rank == 0) {
        static const int seeds[3] = { 500, 501, 302 };

        rc = MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY,
                           MPI_INFO_NULL, &fh);
        for (int b = 0; b < 3 && rc == MPI_SUCCESS; b++) {
            memset(back, 0, N * sizeof(int));
            rc = MPI_File_read_at(fh, (MPI_Offset)b * N * sizeof(int), back,
                                  N, MPI_INT, MPI_STATUS_IGNORE);
            if (!tap_check(back, N * sizeof(int), (uint64_t)seeds[b])) {
                tap_diag("block %d of the file is not as written", b);
                ok = 0;
            }
        }
        ok = ok && rc == MPI_SUCCESS;
        if (fh != MPI_FILE_NULL)
            MPI_File_close(&fh);
    }
    tap_ok_comm(v, ok, "the file holds the survivors' new blocks and the "
                "dead rank's from before");
    ok = rank != 0 || MPI_File_delete(path, MPI_INFO_NULL) == MPI_SUCCESS;
    tap_ok_comm(v, ok && (rank != 0 || access(path, F_OK) != 0),
                "the file is deleted");
    MPI_Comm_free(&v);
    free(blk);
    free(back);
    MPI_Finalize();
    return tap_status();
}
