/*
 * win - what ftwrap's window synchronisations cost against the MPI's own,
 * in one job: epochs of one MPI_Put (8 B to 1 MiB) to the next rank,
 * closed by MPI_Win_fence (ftwrap: a watched barrier, then the MPI's
 * fence), by MPI_Win_lock/unlock, by MPI_Win_flush under one
 * MPI_Win_lock_all, and by post/start/complete/wait (each rank the
 * previous one's target; ftwrap: a note from post to start), in alternating blocks of PMPI_ (the MPI's own) and
 * MPI_ (ftwrap's) calls on the same window.  Prints "win <mode> <bytes>
 * <native_us> <ftwrap_us> <ftwrap/native>", medians; the ratio is the
 * median of each block's ratio to the native block next to it.
 */
#define _POSIX_C_SOURCE 200809L
#define BENCH_NAME "win"
#include "bench.h"

#include <string.h>

#define MAXB (1 << 20)
#define MAXREPS 100

enum { FENCE, LOCK, FLUSH, PSCW, NMODES };

static MPI_Group to_g, from_g;    /* PSCW: the target, the origin */

typedef int (*put_fn)(const void *, int, MPI_Datatype, int, MPI_Aint, int,
                      MPI_Datatype, MPI_Win);

/* Microseconds per epoch of iters epochs. */
static double block(int mode, int ftw, MPI_Win win, const char *src,
                    int bytes, int iters, int to)
{
    put_fn put = ftw ? MPI_Put : PMPI_Put;
    double t0;
    int rc = MPI_SUCCESS;

    PMPI_Barrier(MPI_COMM_WORLD);
    if (mode == FLUSH)
        rc = ftw ? MPI_Win_lock_all(0, win) : PMPI_Win_lock_all(0, win);
    t0 = PMPI_Wtime();
    for (int i = 0; i < iters && rc == MPI_SUCCESS; i++) {
        switch (mode) {
        case FENCE:
            rc = put(src, bytes, MPI_BYTE, to, 0, bytes, MPI_BYTE, win);
            rc |= ftw ? MPI_Win_fence(0, win) : PMPI_Win_fence(0, win);
            break;
        case LOCK:
            rc = ftw ? MPI_Win_lock(MPI_LOCK_SHARED, to, 0, win)
                     : PMPI_Win_lock(MPI_LOCK_SHARED, to, 0, win);
            rc |= put(src, bytes, MPI_BYTE, to, 0, bytes, MPI_BYTE, win);
            rc |= ftw ? MPI_Win_unlock(to, win) : PMPI_Win_unlock(to, win);
            break;
        case FLUSH:
            rc = put(src, bytes, MPI_BYTE, to, 0, bytes, MPI_BYTE, win);
            rc |= ftw ? MPI_Win_flush(to, win) : PMPI_Win_flush(to, win);
            break;
        case PSCW:
            rc = ftw ? MPI_Win_post(from_g, 0, win)
                     : PMPI_Win_post(from_g, 0, win);
            rc |= ftw ? MPI_Win_start(to_g, 0, win)
                      : PMPI_Win_start(to_g, 0, win);
            rc |= put(src, bytes, MPI_BYTE, to, 0, bytes, MPI_BYTE, win);
            rc |= ftw ? MPI_Win_complete(win) : PMPI_Win_complete(win);
            rc |= ftw ? MPI_Win_wait(win) : PMPI_Win_wait(win);
            break;
        }
    }
    t0 = (PMPI_Wtime() - t0) * 1e6 / iters;
    if (mode == FLUSH)
        rc |= ftw ? MPI_Win_unlock_all(win) : PMPI_Win_unlock_all(win);
    if (rc != MPI_SUCCESS)
        die("epoch failed: %d", rc);
    return t0;
}

int main(int argc, char **argv)
{
    static const char *const names[NMODES] = { "fence", "lock", "flush",
                                                 "pscw" };
    int reps = 11, size, to, from;
    MPI_Group world_g;
    char *src, *mem;
    MPI_Win win;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
    if (reps < 1 || reps > MAXREPS)
        die("--reps must be 1..%d", MAXREPS);
    src = malloc(MAXB);
    if (src == NULL)
        die("out of memory");
    memset(src, rank + 1, MAXB);
    MPI_Win_allocate(MAXB, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    to = (rank + 1) % size;
    from = (rank + size - 1) % size;
    MPI_Comm_group(MPI_COMM_WORLD, &world_g);
    MPI_Group_incl(world_g, 1, &to, &to_g);
    MPI_Group_incl(world_g, 1, &from, &from_g);
    MPI_Group_free(&world_g);
    MPI_Win_fence(0, win);
    for (int mode = 0; mode < NMODES; mode++)
        for (int bytes = 8; bytes <= MAXB; bytes *= 32) {
            double t[2][MAXREPS], r[MAXREPS];
            int iters = bytes <= 4096 ? 1000 : bytes <= (1 << 16) ? 200 : 20;

            block(mode, 1, win, src, bytes, iters / 4 + 1, to);
            for (int k = 0; k < reps; k++) {
                t[0][k] = block(mode, 0, win, src, bytes, iters, to);
                t[1][k] = block(mode, 1, win, src, bytes, iters, to);
                r[k] = t[1][k] / t[0][k];
            }
            if (rank == 0)
                printf("win %s %d %.2f %.2f %.3f\n", names[mode], bytes,
                       bench_median(t[0], reps), bench_median(t[1], reps),
                       bench_median(r, reps));
            fflush(stdout);
        }
    MPI_Win_fence(0, win);
    MPI_Win_free(&win);
    MPI_Group_free(&to_g);
    MPI_Group_free(&from_g);
    free(src);
    MPI_Finalize();
    return 0;
}
