/* ftw-test: np=2 mode=both timeout=60 */
/*
 * p2p_type_lifetime - derived datatypes freed while operations use them,
 * and short messages that end inside a derived element.
 *
 * MPI lets a program free a datatype as soon as the operations using it
 * are posted; they complete as if it were alive.  For three sizes (below
 * ftwrap's rendezvous header, a few KiB, 1 MiB) rank 0 posts MPI_Isend
 * and rank 1 MPI_Irecv with a strided vector type, both free the type
 * before MPI_Waitall, and rank 1 asserts that every strided element holds
 * the sender's pattern and every gap its canary.  Persistent receives
 * (MPI_Recv_init, type freed before MPI_Start) likewise.
 *
 * Then messages of whole basic elements that fill a derived receive type
 * only partly (sparse hindexed type, zero-length block, blocks out of
 * order): the bytes land where the type's map puts them, in map order,
 * the rest of the element stays as it was, MPI_Get_count says
 * MPI_UNDEFINED and MPI_Get_elements the number of ints, for a short
 * message and for one of 1 MiB.
 *
 * A message to itself of 16-byte elements (MPI_C_DOUBLE_COMPLEX) into a
 * strided receive type, whose buffer also takes ftwrap's rendezvous
 * header.  (MPICH 4.0 truncates MPI_C_LONG_DOUBLE_COMPLEX received so
 * natively: not tested.)
 *
 * tests/rndv_type_lifetime runs this file with ftwrap's rendezvous
 * forced on.
 */
#include "tap.h"

#define CANARY 0x5au

static int rank;

/* Vector of n blocks of 3 doubles, stride 5 doubles. */
static MPI_Datatype vec_type(int n)
{
    MPI_Datatype t;

    MPI_Type_vector(n, 3, 5, MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    return t;
}

/* The doubles of element slot i of a vector buffer hold the pattern's
 * bytes; gaps hold the canary. */
static int vec_check(const unsigned char *buf, size_t blocks, uint64_t seed)
{
    size_t k = 0;

    for (size_t b = 0; b < blocks; b++) {
        for (size_t j = 0; j < 5 * sizeof(double); j++) {
            unsigned char want = j < 3 * sizeof(double)
                                 ? tap_pattern_byte(seed, k)
                                 : (unsigned char)CANARY;
            if (buf[b * 5 * sizeof(double) + j] != want)
                return 0;
            if (j < 3 * sizeof(double))
                k++;
        }
    }
    return 1;
}

/* Pack the pattern into the vector's slots. */
static void vec_fill(unsigned char *buf, size_t blocks, uint64_t seed)
{
    size_t k = 0;

    memset(buf, CANARY, blocks * 5 * sizeof(double));
    for (size_t b = 0; b < blocks; b++)
        for (size_t j = 0; j < 3 * sizeof(double); j++)
            buf[b * 5 * sizeof(double) + j] = tap_pattern_byte(seed, k++);
}

/* n blocks, window of w operations, the type freed after posting. */
static int freed_while_pending(int blocks, int w, int persistent)
{
    size_t bytes = (size_t)blocks * 5 * sizeof(double);
    unsigned char *buf = malloc(bytes * (size_t)w);
    MPI_Request req[8];
    MPI_Status sts[8];
    MPI_Datatype t = vec_type(blocks);
    int ok = 1;

    for (int i = 0; i < w; i++) {
        unsigned char *b = buf + (size_t)i * bytes;
        uint64_t seed = ((uint64_t)blocks << 8) | (uint64_t)i;

        if (rank == 0) {
            vec_fill(b, (size_t)blocks, seed);
            ok &= MPI_Isend(b, 1, t, 1, i, MPI_COMM_WORLD, &req[i]) ==
                  MPI_SUCCESS;
        } else {
            memset(b, CANARY, bytes);
            ok &= (persistent
                   ? MPI_Recv_init(b, 1, t, 0, i, MPI_COMM_WORLD, &req[i])
                   : MPI_Irecv(b, 1, t, 0, i, MPI_COMM_WORLD, &req[i])) ==
                  MPI_SUCCESS;
        }
    }
    MPI_Type_free(&t);
    ok &= t == MPI_DATATYPE_NULL;
    if (rank == 1 && persistent)
        ok &= MPI_Startall(w, req) == MPI_SUCCESS;
    ok &= MPI_Waitall(w, req, sts) == MPI_SUCCESS;
    if (rank == 1) {
        for (int i = 0; i < w; i++)
            if (!vec_check(buf + (size_t)i * bytes, (size_t)blocks,
                           ((uint64_t)blocks << 8) | (uint64_t)i)) {
                tap_diag("%d blocks, message %d: wrong bytes", blocks, i);
                ok = 0;
            }
        if (persistent)
            for (int i = 0; i < w; i++)
                MPI_Request_free(&req[i]);
    }
    free(buf);
    return ok;
}

/* A type of 4 ints in the map order 0, 4, 5, 2 (a zero block between),
 * extent 6 ints; nint ints sent into count such elements. */
static int partial(int count, int nint)
{
    int blks[] = { 1, 0, 2, 1 };
    MPI_Aint disps[] = { 0, sizeof(int), 4 * sizeof(int), 2 * sizeof(int) };
    size_t slots = (size_t)count * 6;
    int *buf = malloc(slots * sizeof(int));
    int *want = malloc(slots * sizeof(int));
    MPI_Datatype t;
    MPI_Status st;
    int ok = 1, n = -1, elems = -1;

    MPI_Type_create_hindexed(4, blks, disps, MPI_INT, &t);
    MPI_Type_commit(&t);
    if (rank == 0) {
        for (int i = 0; i < nint; i++)
            buf[i] = 1000 + i;
        ok &= MPI_Send(buf, nint, MPI_INT, 1, 7, MPI_COMM_WORLD) ==
              MPI_SUCCESS;
    } else {
        static const int map[] = { 0, 4, 5, 2 };
        MPI_Request req;

        for (size_t i = 0; i < slots; i++)
            buf[i] = want[i] = -(int)i - 1;
        for (int i = 0; i < nint; i++)
            want[(i / 4) * 6 + map[i % 4]] = 1000 + i;
        ok &= MPI_Irecv(buf, count, t, 0, 7, MPI_COMM_WORLD, &req) ==
              MPI_SUCCESS;
        MPI_Type_free(&t);
        ok &= MPI_Wait(&req, &st) == MPI_SUCCESS;
        MPI_Type_create_hindexed(4, blks, disps, MPI_INT, &t);
        MPI_Type_commit(&t);
        MPI_Get_count(&st, t, &n);
        MPI_Get_elements(&st, t, &elems);
        if (n != MPI_UNDEFINED || elems != nint) {
            tap_diag("count %d (want MPI_UNDEFINED), elements %d (want %d)",
                     n, elems, nint);
            ok = 0;
        }
        for (size_t i = 0; i < slots; i++)
            if (buf[i] != want[i]) {
                tap_diag("%d ints: slot %zu holds %d, want %d", nint, i,
                         buf[i], want[i]);
                ok = 0;
                break;
            }
    }
    if (t != MPI_DATATYPE_NULL)
        MPI_Type_free(&t);
    free(buf);
    free(want);
    return ok;
}

/* A message to itself of n elements of a wide basic type, received into every other element of a strided vector:
 * MPI_Irecv posted, then MPI_Send; the elements land in the even slots,
 * the odd ones stay zero. */
static int self_wide(MPI_Datatype t, int n)
{
    int size = 0, ok = 1;
    char *out, *in, *zero;
    MPI_Datatype vec;
    MPI_Request req;
    MPI_Status st;

    MPI_Type_size(t, &size);
    MPI_Type_vector(n, 1, 2, t, &vec);
    MPI_Type_commit(&vec);
    out = malloc((size_t)size * (size_t)n);
    in = calloc(2 * (size_t)n, (size_t)size);
    zero = calloc(1, (size_t)size);
    tap_fill(out, (size_t)size * (size_t)n, (uint64_t)size);
    ok &= MPI_Irecv(in, 1, vec, rank, 11, MPI_COMM_WORLD, &req) ==
          MPI_SUCCESS;
    ok &= MPI_Send(out, n, t, rank, 11, MPI_COMM_WORLD) == MPI_SUCCESS;
    ok &= MPI_Wait(&req, &st) == MPI_SUCCESS;
    for (int i = 0; i < n && ok; i++)
        ok &= !memcmp(in + 2 * (size_t)i * (size_t)size,
                      out + (size_t)i * (size_t)size, (size_t)size) &&
              !memcmp(in + (2 * (size_t)i + 1) * (size_t)size, zero,
                      (size_t)size);
    MPI_Type_free(&vec);
    free(out);
    free(in);
    free(zero);
    return ok;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    tap_plan(9);
    tap_ok(freed_while_pending(1, 8, 0),
           "24-byte vector messages, type freed before MPI_Waitall: "
           "elements and gaps right");
    tap_ok(freed_while_pending(200, 8, 0),
           "4.8 KB vector messages, type freed before MPI_Waitall");
    tap_ok(freed_while_pending(43691, 4, 0),
           "1 MiB vector messages, type freed before MPI_Waitall");
    tap_ok(freed_while_pending(43691, 2, 1),
           "1 MiB persistent receives, type freed before MPI_Startall");
    tap_ok(partial(2, 6), "6 ints into 2 sparse elements: the map's first "
           "6 places, count MPI_UNDEFINED, elements 6");
    tap_ok(partial(2, 3), "3 ints into 2 sparse elements (less than one)");
    tap_ok(partial(20000, 4 * 19999 + 3),
           "a 320 KB message ending 3 ints into the last element");
    tap_ok(self_wide(MPI_C_DOUBLE_COMPLEX, 256),
           "256 MPI_C_DOUBLE_COMPLEX (16 B) to itself into a strided vector: "
           "elements and gaps right");
    tap_ok(freed_while_pending(5, 8, 0), "traffic after all of it");

    MPI_Finalize();
    return tap_status();
}
