/* ftw-test: np=2 mode=both timeout=60 */
/*
 * wait_mixed - MPI_Waitall over requests of every kind completes as the
 * MPI's own does.
 *
 * - Persistent collectives (MPI-4: MPI_Bcast_init, MPI_Barrier_init)
 *   started in a different order on each rank, 20 rounds: every MPI_Waitall
 *   returns, the broadcast value arrives each round.  (MPI-4 libraries
 *   only; Open MPI 4.1 has no MPI_Bcast_init, and the checks pass
 *   vacuously there, saying so.)
 * - Nonblocking file writes (MPI_File_iwrite_at: the I/O library's own
 *   requests) together with point-to-point requests in one MPI_Waitall,
 *   then nonblocking reads back: the file holds exactly what was written
 *   (checksums), the messages arrived, and the file is deleted.
 * - With WAIT_MIXED_FILE_FIRST set (wait_mixed_file_first.c) the file
 *   requests come first, before any persistent collective: the process's
 *   first MPI_Waitall holds the I/O library's own requests.
 * - MPI_Waitall with null handles and an inactive persistent request
 *   among active ones: statuses of the null and inactive ones are empty
 *   (source MPI_ANY_SOURCE, tag MPI_ANY_TAG, count 0), the others' name
 *   their message.
 */
#include "tap.h"

#include <unistd.h>

#define ROUNDS 20
#define NIO 4
#define IOLEN 65536

static int rank, nprocs;

static int persistent_colls(void)
{
#if MPI_VERSION >= 4
    MPI_Request r[2];
    MPI_Status st[2];
    int ok = 1;

    for (int k = 0; k < ROUNDS; k++) {
        int a = rank == 0 ? 1000 + k : -1;

        MPI_Bcast_init(&a, 1, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL,
                       &r[0]);
        MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &r[1]);
        if (rank % 2 == 0) {
            MPI_Start(&r[0]);
            MPI_Start(&r[1]);
        } else {
            MPI_Start(&r[1]);
            MPI_Start(&r[0]);
        }
        ok &= MPI_Waitall(2, r, st) == MPI_SUCCESS;
        ok &= a == 1000 + k;
        MPI_Request_free(&r[0]);
        MPI_Request_free(&r[1]);
    }
    return ok;
#else
    if (rank == 0)
        printf("# no MPI-4 persistent collectives in this MPI\n");
    return 1;
#endif
}

static int file_and_messages(const char *dir)
{
    char path[512];
    MPI_File fh;
    MPI_Request r[NIO + 2];
    MPI_Status st[NIO + 2];
    unsigned char *wbuf = malloc((size_t)NIO * IOLEN);
    unsigned char *rbuf = malloc((size_t)NIO * IOLEN);
    uint64_t sendv = 0xC0FFEE00u + (uint64_t)rank, recvv = 0;
    int peer = (rank + 1) % nprocs, from = (rank + nprocs - 1) % nprocs;
    int ok = 1, n = 0;

    snprintf(path, sizeof(path), "%s/wait_mixed.%d.dat", dir, (int)getpid());
    for (int i = 0; i < NIO; i++)
        tap_fill(wbuf + (size_t)i * IOLEN, IOLEN, (uint64_t)(rank * 16 + i));
    ok &= MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_RDWR,
                        MPI_INFO_NULL, &fh) == MPI_SUCCESS;
    if (!ok) {
        tap_diag("cannot open %s", path);
        free(wbuf);
        free(rbuf);
        return 0;
    }
    for (int i = 0; i < NIO; i++)
        MPI_File_iwrite_at(fh, (MPI_Offset)i * IOLEN, wbuf + (size_t)i * IOLEN,
                           IOLEN, MPI_BYTE, &r[n++]);
    MPI_Irecv(&recvv, 1, MPI_UINT64_T, from, 5, MPI_COMM_WORLD, &r[n++]);
    MPI_Isend(&sendv, 1, MPI_UINT64_T, peer, 5, MPI_COMM_WORLD, &r[n++]);
    ok &= MPI_Waitall(n, r, st) == MPI_SUCCESS;
    ok &= recvv == 0xC0FFEE00u + (uint64_t)from;
    n = 0;
    for (int i = 0; i < NIO; i++)
        MPI_File_iread_at(fh, (MPI_Offset)i * IOLEN, rbuf + (size_t)i * IOLEN,
                          IOLEN, MPI_BYTE, &r[n++]);
    ok &= MPI_Waitall(n, r, st) == MPI_SUCCESS;
    for (int i = 0; i < NIO; i++)
        if (!tap_check(rbuf + (size_t)i * IOLEN, IOLEN,
                       (uint64_t)(rank * 16 + i))) {
            tap_diag("block %d of the file differs from what was written", i);
            ok = 0;
        }
    MPI_File_close(&fh);
    ok &= MPI_File_delete(path, MPI_INFO_NULL) == MPI_SUCCESS;
    ok &= access(path, F_OK) != 0;
    free(wbuf);
    free(rbuf);
    return ok;
}

static int nulls_and_inactive(void)
{
    int peer = (rank + 1) % nprocs, from = (rank + nprocs - 1) % nprocs;
    int sv = rank, rv = -1, idle = 0, ok = 1, c = -1;
    MPI_Request r[5];
    MPI_Status st[5];

    MPI_Recv_init(&idle, 1, MPI_INT, from, 99, MPI_COMM_WORLD, &r[0]);
    r[1] = MPI_REQUEST_NULL;
    MPI_Irecv(&rv, 1, MPI_INT, from, 6, MPI_COMM_WORLD, &r[2]);
    r[3] = MPI_REQUEST_NULL;
    MPI_Isend(&sv, 1, MPI_INT, peer, 6, MPI_COMM_WORLD, &r[4]);
    for (int i = 0; i < 5; i++)
        st[i].MPI_SOURCE = st[i].MPI_TAG = -77;
    ok &= MPI_Waitall(5, r, st) == MPI_SUCCESS;
    ok &= tap_status_empty(&st[0]) && tap_status_empty(&st[1]) &&
          tap_status_empty(&st[3]);
    MPI_Get_count(&st[2], MPI_INT, &c);
    ok &= st[2].MPI_SOURCE == from && st[2].MPI_TAG == 6 && c == 1 &&
          rv == from;
    ok &= r[1] == MPI_REQUEST_NULL && r[2] == MPI_REQUEST_NULL &&
          r[4] == MPI_REQUEST_NULL && r[0] != MPI_REQUEST_NULL;
    MPI_Request_free(&r[0]);
    return ok;
}

int main(int argc, char **argv)
{
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    tap_plan(3);
    if (getenv("WAIT_MIXED_FILE_FIRST") != NULL)
        tap_ok(file_and_messages(dir), "first: MPI_File_iwrite_at/iread_at "
               "requests and messages in one MPI_Waitall: file bytes and "
               "message right, file deleted");
    tap_ok(persistent_colls(), "persistent bcast and barrier started in "
           "different orders: %d rounds of MPI_Waitall, value delivered",
           ROUNDS);
    if (getenv("WAIT_MIXED_FILE_FIRST") == NULL)
        tap_ok(file_and_messages(dir), "MPI_File_iwrite_at/iread_at "
               "requests and messages in one MPI_Waitall: file bytes and "
               "message right, file deleted");
    tap_ok(nulls_and_inactive(), "null and inactive requests among active "
           "ones: empty statuses for them, the message's for the receive");

    MPI_Finalize();
    return tap_status();
}
