/* ftw-test: np=4 mode=ftwrap timeout=90 link=ftwrap expect-failed=3 fate=3:signal:KILL mpi=openmpi */
/*
 * spawn_fail - MPI_Comm_spawn over a communicator that just lost a
 * process returns an error on every survivor instead of hanging them (the
 * MPI's spawn is one blocking collective over all of the parent's
 * members), and a spawn over the survivors' communicator then works; the
 * spawned copies find what they need in MPI_INFO_ENV.
 *
 * Four ranks.  1: under ftwrun the MPI started ftwrap's supervisor, yet
 * MPI_INFO_ENV's "command" and "argv" name this program and its
 * arguments (ULFM programs spawn copies of themselves from them).  2: a
 * spawn whose root names an empty command (Open MPI 4.1 waits for ever to
 * start it) fails with MPI_ERR_SPAWN on every member.  Rank 3
 * SIGKILLs itself right after a barrier; the others call MPI_Comm_spawn
 * over the communicator at once, before or after they learn of the
 * death.  3: it fails with MPIX_ERR_PROC_FAILED everywhere, within the
 * test's time limit.  4: a second spawn, the failure now known, fails
 * the same way.  5: after MPIX_Comm_shrink, a spawn of one copy over the
 * survivors works; the parents' rank 0 sends it 256 KiB of checksummed
 * bytes, and the child answers with the checksum it computed.
 * (mpi=openmpi: Debian's MPICH 4.0.2 fails MPI_Comm_spawn without ftwrap
 * too.)
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "tap.h"

#define LEN (256 * 1024)
#define SEED 4242

static void child(MPI_Comm parent)
{
    char *big = malloc(LEN);
    uint64_t sum = 0;

    MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
    if (big != NULL &&
        MPI_Recv(big, LEN, MPI_BYTE, 0, 1, parent, MPI_STATUS_IGNORE) ==
            MPI_SUCCESS)
        sum = tap_fnv1a(big, LEN);
    MPI_Send(&sum, 1, MPI_UINT64_T, 0, 2, parent);
    free(big);
    MPI_Comm_disconnect(&parent);
}

/* MPI_INFO_ENV's "command" and "argv" as an MPI that started this
 * program itself gives them: argv[0]'s base name, the rest joined. */
static int info_env_names_program(int argc, char **argv)
{
    char cmd[MPI_MAX_INFO_VAL + 1] = "", args[MPI_MAX_INFO_VAL + 1] = "";
    char want[MPI_MAX_INFO_VAL + 1] = "";
    const char *base = strrchr(argv[0], '/');
    int flag = 0, aflag = 0;

    MPI_Info_get(MPI_INFO_ENV, "command", MPI_MAX_INFO_VAL, cmd, &flag);
    MPI_Info_get(MPI_INFO_ENV, "argv", MPI_MAX_INFO_VAL, args, &aflag);
    for (int i = 1; i < argc; i++) {
        strncat(want, argv[i], MPI_MAX_INFO_VAL - strlen(want));
        if (i + 1 < argc)
            strncat(want, " ", MPI_MAX_INFO_VAL - strlen(want));
    }
    if (!flag || strcmp(cmd, base ? base + 1 : argv[0]) != 0 ||
        strcmp(aflag ? args : "", want) != 0) {
        tap_diag("MPI_INFO_ENV: command '%s', argv '%s'", cmd, args);
        return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    MPI_Comm parent, w, s = MPI_COMM_NULL, ic = MPI_COMM_NULL;
    int rank, rc, cls, ok;
    char *big;
    uint64_t sum = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        tap_rank_ = 1;      /* the parents print the verdicts */
        child(parent);
        MPI_Finalize();
        return 0;
    }
    if (!tap_need_size(4))
        return 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    tap_plan(5);
    tap_ok(info_env_names_program(argc, argv),
           "MPI_INFO_ENV's command and argv name this program, not "
           "ftwrap's supervisor");
    MPI_Comm_dup(MPI_COMM_WORLD, &w);
    MPI_Comm_set_errhandler(w, MPI_ERRORS_RETURN);
    {
        int codes[2] = { MPI_SUCCESS, MPI_SUCCESS };

        rc = MPI_Comm_spawn(rank == 0 ? "" : argv[0], MPI_ARGV_NULL, 2,
                            MPI_INFO_NULL, 0, w, &ic, codes);
        ok = tap_class(rc) == MPI_ERR_SPAWN && ic == MPI_COMM_NULL &&
             (rank != 0 || (tap_class(codes[0]) == MPI_ERR_SPAWN &&
                            tap_class(codes[1]) == MPI_ERR_SPAWN));
        tap_ok(ok, "MPI_Comm_spawn of an empty command fails with "
               "MPI_ERR_SPAWN on every member, the root's error codes "
               "too");
    }
    MPI_Barrier(w);
    if (rank == 3)
        raise(SIGKILL);

    rc = MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, w, &ic,
                        MPI_ERRCODES_IGNORE);
    cls = tap_class(rc);
    ok = cls == MPIX_ERR_PROC_FAILED && ic == MPI_COMM_NULL;
    if (!ok)
        tap_diag("spawn racing the death: class %d", cls);
    MPIX_Comm_shrink(w, &s);
    tap_ok_comm(s, ok, "MPI_Comm_spawn racing a member's death fails with "
                "MPIX_ERR_PROC_FAILED on every survivor");

    rc = MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, w, &ic,
                        MPI_ERRCODES_IGNORE);
    cls = tap_class(rc);
    tap_ok_comm(s, cls == MPIX_ERR_PROC_FAILED && ic == MPI_COMM_NULL,
                "MPI_Comm_spawn with the failure known fails the same way");

    rc = MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, s, &ic,
                        MPI_ERRCODES_IGNORE);
    ok = rc == MPI_SUCCESS && ic != MPI_COMM_NULL;
    if (ok && rank == 0) {
        big = malloc(LEN);
        tap_fill(big, LEN, SEED);
        MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN);
        ok = MPI_Send(big, LEN, MPI_BYTE, 0, 1, ic) == MPI_SUCCESS &&
             MPI_Recv(&sum, 1, MPI_UINT64_T, 0, 2, ic, MPI_STATUS_IGNORE) ==
                 MPI_SUCCESS &&
             sum == tap_fnv1a(big, LEN);
        free(big);
    }
    if (ic != MPI_COMM_NULL)
        MPI_Comm_disconnect(&ic);
    tap_ok_comm(s, ok, "after MPIX_Comm_shrink a spawn over the survivors "
                "works and 256 KiB reach the child intact");
    MPI_Comm_free(&s);
    MPI_Comm_free(&w);
    MPI_Finalize();
    return tap_status();
}
