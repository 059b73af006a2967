/* ftw-test: np=2 mode=ftwrap timeout=180 link=ftwrap env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=verbs env=FTW_VERBS_DEBUG=1 */
/*
 * rndv_verbs_push - over ftwrap's verbs transport, a persistent send
 * started while its QP is being reconnected and the receiver is outside
 * MPI (so the QP cannot come back within the send's 1 s) is pushed whole
 * after its RTS instead of being refused; once the receiver's MPI calls
 * answer the reconnection, the next round is pulled by RDMA READ again.
 * Skipped (1..0) where verbs is not in use (no RDMA device: run it in the
 * soft-RoCE lab, scripts/check-verbs).
 *
 * Rank 1 sends rank 0 1 MiB + 17 (pulled by READ), then stays outside MPI
 * until a file rank 0 makes exists.  Rank 0 READs that message again
 * (FTW_Verbs_reread: refused, so its QP to 1 goes to the error state and
 * it starts the reconnection), starts a persistent MPI_Send_init of
 * 1 MiB + 5 to rank 1, then makes the file and waits.  Asserts:
 *  - the reread is refused and the start succeeds (before the push it
 *    failed with MPI_ERR_OTHER after 1 s);
 *  - rank 1 gets the round intact, pushed (rndv_pushed 1, rndv_verbs
 *    unchanged);
 *  - a second round, with new data, is pulled by RDMA READ (rndv_verbs
 *    + 1) and intact;
 *  - each rank reconnected its QP exactly once (verbs_reconnects 1).
 */
#include "tap.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BACK (((size_t)1 << 20) + 17)
#define LEN (((size_t)1 << 20) + 5)
#define TAG_BACK 1
#define TAG_SMALL 2
#define TAG_ROUND 3

static int rank;
static unsigned char *buf;

/* Whether verbs pulls here at all: one message from 1 to 0, counted on
 * rank 0, which can then READ it again. */
static int verbs_in_use(void)
{
    long long v0 = tap_ftw_stat("rndv_verbs");
    int here = 1, all = 0, x = 0;

    if (rank == 1) {
        tap_fill(buf, BACK, 7);
        here = MPI_Send(buf, (int)BACK, MPI_BYTE, 0, TAG_BACK,
                        MPI_COMM_WORLD) == MPI_SUCCESS;
        MPI_Send(&x, 1, MPI_INT, 0, TAG_SMALL, MPI_COMM_WORLD);
    } else {
        here = MPI_Recv(buf, (int)BACK, MPI_BYTE, 1, TAG_BACK, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE) == MPI_SUCCESS &&
               tap_check(buf, BACK, 7) &&
               tap_ftw_stat("rndv_verbs") == v0 + 1;
        /* Rank 1's MPI_Send has returned: its window is gone. */
        MPI_Recv(&x, 1, MPI_INT, 1, TAG_SMALL, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    }
    MPI_Allreduce(&here, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all;
}

/* Rank 1: wait outside MPI until path exists (at most 120 s), remove it. */
static int wait_file(const char *path)
{
    for (int i = 0; i < 120000; i++) {
        if (access(path, F_OK) == 0)
            return unlink(path) == 0;
        usleep(1000);
    }
    tap_diag("rank 1: %s never came", path);
    return 0;
}

int main(int argc, char **argv)
{
    int ok_start = 1, ok_push = 1, ok_pull = 1, refused = -1, pid = 0;
    long long v0, p0;
    MPI_Request req = MPI_REQUEST_NULL;
    char path[64];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (!tap_need_size(2))
        return 0;
    buf = malloc(BACK);
    if (tap_skip_unless_verbs(buf != NULL && verbs_in_use())) {
        free(buf);
        MPI_Finalize();
        return 0;
    }
    tap_plan(5);
    pid = (int)getpid();
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    snprintf(path, sizeof(path), "/tmp/ftw-rndv-verbs-push.%d", pid);
    MPI_Barrier(MPI_COMM_WORLD);
    v0 = tap_ftw_stat("rndv_verbs");
    p0 = tap_ftw_stat("rndv_pushed");
    if (rank == 0) {
        int fd, rc;

        rc = FTW_Verbs_reread(1, &refused);
        ok_start = rc == MPI_SUCCESS && refused == 1;
        if (!ok_start)
            tap_diag("FTW_Verbs_reread: rc %d, refused %d", rc, refused);
        tap_fill(buf, LEN, 11);
        ok_start &= mpi_ok(MPI_Send_init(buf, (int)LEN, MPI_BYTE, 1,
                                         TAG_ROUND, MPI_COMM_WORLD, &req),
                           "MPI_Send_init");
        ok_start &= mpi_ok(MPI_Start(&req), "MPI_Start (QP down)");
        fd = open(path, O_CREAT | O_WRONLY, 0600);
        if (fd >= 0)
            close(fd);
        ok_start &= fd >= 0;
        ok_start &= mpi_ok(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait");
        tap_fill(buf, LEN, 12);
        ok_start &= mpi_ok(MPI_Start(&req), "MPI_Start (QP back)");
        ok_start &= mpi_ok(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait");
        ok_start &= mpi_ok(MPI_Request_free(&req), "MPI_Request_free");
    } else {
        ok_push = wait_file(path);
        memset(buf, 0, LEN);
        ok_push &= mpi_ok(MPI_Recv(buf, (int)LEN, MPI_BYTE, 0, TAG_ROUND,
                                   MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                          "MPI_Recv (pushed)") &&
                   tap_check(buf, LEN, 11);
        ok_push &= tap_ftw_stat("rndv_pushed") == p0 + 1 &&
                   tap_ftw_stat("rndv_verbs") == v0;
        if (!ok_push)
            tap_diag("the pushed round: rndv_pushed %lld -> %lld, "
                     "rndv_verbs %lld -> %lld", p0,
                     tap_ftw_stat("rndv_pushed"), v0,
                     tap_ftw_stat("rndv_verbs"));
        memset(buf, 0, LEN);
        ok_pull = mpi_ok(MPI_Recv(buf, (int)LEN, MPI_BYTE, 0, TAG_ROUND,
                                  MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                         "MPI_Recv (pulled)") &&
                  tap_check(buf, LEN, 12) &&
                  tap_ftw_stat("rndv_verbs") == v0 + 1;
    }
    tap_ok(ok_start, "rank 0: the reread is refused, and both starts of "
           "the persistent send succeed, the first with the QP down");
    tap_ok(ok_push, "the first round reaches rank 1 intact, pushed whole "
           "with its RTS");
    tap_ok(ok_pull, "the second round is pulled by RDMA READ, intact");
    tap_ok(tap_ftw_stat("verbs_reconnects") == 1, "each rank reconnected "
           "its QP once (rank %d: verbs_reconnects %lld)", rank,
           tap_ftw_stat("verbs_reconnects"));
    tap_ok(access(path, F_OK) != 0, "the rendezvous file is gone");
    free(buf);
    MPI_Finalize();
    return tap_status();
}
