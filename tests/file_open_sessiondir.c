/* ftw-test: np=3 mode=ftwrap timeout=60 link=ftwrap mpi=openmpi expect-failed=2 fate=2:signal:KILL */
/*
 * file_open_sessiondir - after a death, collective file opens over the
 * survivors do not hang on Open MPI's job session directory.
 *
 * Open MPI's mpirun removes the job's session directory when one of its
 * processes dies, at a moment of its own.  The sm shared-file-pointer
 * component keeps a file there: a collective MPI_File_open during which
 * one process finds the directory and another does not leaves the first
 * waiting in the component's barrier for good.  ftwrap leaves that
 * component out unless the user names the components (OMPI_MCA_sharedfp).
 *
 * Three ranks; rank 2 is SIGKILLed; ranks 0 and 1 validate and make the
 * communicator of the two.  Then 60 rounds: rank 0 makes the directory
 * again (as it was before the death), and while a thread of rank 1
 * removes it once it is empty, from a random moment in the round's first
 * 4 ms on, as the launcher's cleanup may, both open a new file over the two, write a checksummed block
 * with MPI_File_write_at_all and close it.  Asserted: every open, write
 * and close succeeds on both, within the test's bound; rank 0 finds both
 * blocks of every round's file intact; every file is deleted.
 */
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ftwrap.h"
#include "tap.h"

#define N 1024          /* ints per block */
#define ROUNDS 60

static char sessdir[512];
static atomic_int round_no = -1, stop;

/* The launcher's cleanup, once per round at a moment of its own: from a
 * random point in the round's first milliseconds, rmdir for a while
 * (it succeeds once the directory is empty). */
static void *remover(void *arg)
{
    int seen = -1;

    (void)arg;
    while (!atomic_load(&stop)) {
        int r = atomic_load(&round_no);
        struct timespec t0, t;

        if (r == seen) {
            sched_yield();
            continue;
        }
        seen = r;
        usleep((useconds_t)(rand() % 4000));
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            if (rmdir(sessdir) == 0)
                break;
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while ((t.tv_sec - t0.tv_sec) * 1000000000L +
                 (t.tv_nsec - t0.tv_nsec) < 5000000L);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *dir = getenv("TMPDIR");
    const char *fam = getenv("OMPI_MCA_orte_jobfam_session_dir");
    const char *jobid = getenv("OMPI_MCA_ess_base_jobid");
    int *blk = malloc(N * sizeof(int)), *back = malloc(N * sizeof(int));
    int rank, ok = 1, opened = 0, intact = 1, deleted = 1;
    int two[2] = { 0, 1 };
    char path[512];
    MPI_Comm v, s = MPI_COMM_NULL;
    MPI_Group wg, g, failed;
    pthread_t th;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &v);
    MPI_Comm_set_errhandler(v, MPI_ERRORS_RETURN);
    if (fam == NULL || jobid == NULL) {
        tap_diag("no OMPI_MCA_orte_jobfam_session_dir or "
                 "OMPI_MCA_ess_base_jobid in the environment");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    snprintf(sessdir, sizeof(sessdir), "%s/%lu", fam,
             strtoul(jobid, NULL, 10) & 0xffff);
    MPI_Barrier(v);
    if (rank == 2)
        raise(SIGKILL);
    if (FTW_Comm_validate(v, &failed) != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Group_free(&failed);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_incl(wg, 2, two, &g);
    if (MPI_Comm_create_group(v, g, 7, &s) != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    MPI_Comm_set_errhandler(s, MPI_ERRORS_RETURN);
    tap_plan(3);

    if (rank == 1)
        pthread_create(&th, NULL, remover, NULL);
    for (int r = 0; r < ROUNDS && ok; r++) {
        MPI_File fh;
        int rc;

        if (rank == 0) {
            mkdir(sessdir, 0700);
            snprintf(path, sizeof(path), "%s/ftw_sessdir.%d.%d",
                     dir != NULL && *dir ? dir : "/tmp", (int)getpid(), r);
        }
        MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, s);
        atomic_store(&round_no, r);
        rc = MPI_File_open(s, path, MPI_MODE_CREATE | MPI_MODE_RDWR,
                           MPI_INFO_NULL, &fh);
        if (rc != MPI_SUCCESS) {
            tap_diag("round %d: MPI_File_open: %d", r, rc);
            ok = 0;
            break;
        }
        opened++;
        tap_fill(blk, N * sizeof(int), (uint64_t)(1000 * r + rank));
        rc = MPI_File_write_at_all(fh, (MPI_Offset)rank * N * sizeof(int),
                                   blk, N, MPI_INT, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            tap_diag("round %d: MPI_File_write_at_all: %d", r, rc);
        if (MPI_File_close(&fh) != MPI_SUCCESS || rc != MPI_SUCCESS)
            ok = 0;
    }
    if (rank == 1) {
        atomic_store(&stop, 1);
        pthread_join(th, NULL);
    }
    tap_ok_comm(s, ok && opened == ROUNDS, "60 collective opens, writes and "
                "closes over the survivors while the job's session "
                "directory comes and goes: all succeed, none hangs");

    if (rank == 0) {
        for (int r = 0; r < opened; r++) {
            MPI_File fh;

            snprintf(path, sizeof(path), "%s/ftw_sessdir.%d.%d",
                     dir != NULL && *dir ? dir : "/tmp", (int)getpid(), r);
            if (MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY,
                              MPI_INFO_NULL, &fh) != MPI_SUCCESS) {
                intact = 0;
                continue;
            }
            for (int b = 0; b < 2; b++) {
                memset(back, 0, N * sizeof(int));
                if (MPI_File_read_at(fh, (MPI_Offset)b * N * sizeof(int),
                                     back, N, MPI_INT, MPI_STATUS_IGNORE) !=
                        MPI_SUCCESS ||
                    !tap_check(back, N * sizeof(int),
                               (uint64_t)(1000 * r + b))) {
                    tap_diag("round %d: block %d is not as written", r, b);
                    intact = 0;
                }
            }
            MPI_File_close(&fh);
            if (MPI_File_delete(path, MPI_INFO_NULL) != MPI_SUCCESS ||
                access(path, F_OK) == 0)
                deleted = 0;
        }
    }
    tap_ok_comm(s, intact, "every round's file holds both blocks intact");
    tap_ok_comm(s, deleted, "every round's file is deleted");
    MPI_Comm_free(&s);
    MPI_Comm_free(&v);
    free(blk);
    free(back);
    MPI_Finalize();
    return tap_status();
}
