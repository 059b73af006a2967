/* ftw-test: np=3 mode=ftwrap timeout=90 link=ftwrap expect-failed=2 fate=2:signal:KILL */
/*
 * file_fail - a process of an open file dies: collective file operations
 * fail instead of hanging, local ones go on, and FTW_File_validate opens
 * the file again over the survivors, whose data the file then holds.
 *
 * Three ranks open a new file in the tests' temporary directory (TMPDIR,
 * else /tmp) over MPI_COMM_WORLD, set a view of ints, and write their
 * checksummed 16 KiB blocks with MPI_File_write_at_all.  Rank 2 is
 * SIGKILLed.  Ranks 0 and 1:
 *   - MPI_File_write_at_all fails with FTW_ERR_PROC_FAIL_STOP (no hang),
 *     and so do MPI_File_sync and MPI_File_close (which leaves the file
 *     open);
 *   - an independent MPI_File_write_at by rank 0 still works;
 *   - FTW_File_group_failed names rank 2, and the failure handler
 *     registered on the file (FTW_File_set_failhandler) was called;
 *   - FTW_File_validate gives both the failed group {2}; then a collective
 *     write of new blocks and a collective read back work, data checked,
 *     and MPI_File_close closes;
 *   - rank 0 opens the file alone and finds every block: the survivors'
 *     new ones, rank 0's independent one and rank 2's from before its
 *     death; then deletes it.
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

/* The file's failure handler: counts its calls. */
static MPI_File handled_file = MPI_FILE_NULL;
static int handled, handled_code;

static void on_failure(MPI_File *fh, int *code, ...)
{
    if (*fh == handled_file) {
        handled++;
        handled_code = *code;
    }
}

static int is_fail(int rc)
{
    return tap_class(rc) == FTW_ERR_PROC_FAIL_STOP;
}

int main(int argc, char **argv)
{
    MPI_File fh;
    MPI_Group failed, g;
    MPI_Comm v;
    char path[512];
    const char *dir = getenv("TMPDIR");
    int *blk = malloc(N * sizeof(int)), *back = malloc(N * sizeof(int));
    int rank, rc, ok, n = -1, r0 = 0, r = -1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &v);
    MPI_Comm_set_errhandler(v, MPI_ERRORS_RETURN);
    if (rank == 0)
        snprintf(path, sizeof(path), "%s/ftw_file_fail.%d",
                 dir != NULL && *dir ? dir : "/tmp", (int)getpid());
    MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, MPI_COMM_WORLD);
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR,
                       MPI_INFO_NULL, &fh);
    if (rc != MPI_SUCCESS) {
        tap_diag("MPI_File_open(%s): %d", path, rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL);
    {
        MPI_Errhandler eh, got = MPI_ERRHANDLER_NULL;

        MPI_File_create_errhandler(on_failure, &eh);
        handled_file = fh;
        if (FTW_File_set_failhandler(fh, eh) != MPI_SUCCESS ||
            FTW_File_get_failhandler(fh, &got) != MPI_SUCCESS || got != eh)
            tap_diag("FTW_File_set_failhandler did not register");
        MPI_Errhandler_free(&eh);
    }
    tap_fill(blk, N * sizeof(int), 300 + rank);
    MPI_File_write_at_all(fh, rank * BLOCK, blk, N, MPI_INT,
                          MPI_STATUS_IGNORE);
    /* On v (errors return): the victim may die before a slower rank's
     * barrier saw it complete, which then fails. */
    MPI_Barrier(v);
    if (rank == 2)
        raise(SIGKILL);

    rc = FTW_Comm_validate(v, &failed);
    if (rc != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Group_free(&failed);
    tap_plan(7);
    rc = MPI_File_write_at_all(fh, rank * BLOCK, blk, N, MPI_INT,
                               MPI_STATUS_IGNORE);
    ok = is_fail(rc) && is_fail(MPI_File_sync(fh));
    rc = MPI_File_close(&fh);
    ok = ok && is_fail(rc) && fh != MPI_FILE_NULL;
    tap_ok_comm(v, ok, "after a death MPI_File_write_at_all, MPI_File_sync "
                "and MPI_File_close fail with FTW_ERR_PROC_FAIL_STOP; the "
                "file stays open");

    ok = 1;
    if (rank == 0) {
        tap_fill(blk, N * sizeof(int), 400);
        ok = MPI_File_write_at(fh, 3 * BLOCK, blk, N, MPI_INT,
                               MPI_STATUS_IGNORE) == MPI_SUCCESS;
    }
    tap_ok_comm(v, ok, "an independent MPI_File_write_at still works");

    rc = FTW_File_group_failed(fh, &failed);
    if (rc == MPI_SUCCESS) {
        MPI_Group_size(failed, &n);
        MPI_File_get_group(fh, &g);
        MPI_Group_translate_ranks(failed, 1, &r0, g, &r);
        MPI_Group_free(&g);
        MPI_Group_free(&failed);
    }
    tap_ok_comm(v, rc == MPI_SUCCESS && n == 1 && r == 2 && handled >= 1 &&
                handled_code == FTW_ERR_PROC_FAIL_STOP,
                "FTW_File_group_failed names the dead rank, and the file's "
                "failure handler (FTW_File_set_failhandler) was called");

    rc = FTW_File_validate(fh, &failed);
    n = -1;
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
        static const int seeds[4] = { 500, 501, 302, 400 };

        rc = MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY,
                           MPI_INFO_NULL, &fh);
        for (int b = 0; b < 4 && rc == MPI_SUCCESS; b++) {
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
    tap_ok_comm(v, ok, "the file holds the survivors' blocks, rank 0's "
                "independent one and the dead rank's from before");
    ok = rank != 0 || MPI_File_delete(path, MPI_INFO_NULL) == MPI_SUCCESS;
    tap_ok_comm(v, ok && (rank != 0 || access(path, F_OK) != 0),
                "the file is deleted");
    MPI_Comm_free(&v);
    free(blk);
    free(back);
    MPI_Finalize();
    return tap_status();
}
