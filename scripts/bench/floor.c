/*
 * The least a PMPI interposer can cost on the message-rate windows of
 * scripts/bench/overhead: preloaded in place of libftwrap.so, it wraps
 * only MPI_Irecv, MPI_Isend and MPI_Waitall, the calls of those windows.
 * Built in four forms (scripts/bench/overhead --floor):
 *
 *   FLOOR_FORWARD  each wrapper calls its PMPI_ function and nothing else:
 *                  what the interposition itself costs;
 *   FLOOR_POLL     the same, but MPI_Waitall polls PMPI_Testall until the
 *                  set completes: a wait that a failure could leave
 *                  without the MPI's help, the least any wait that never
 *                  hangs costs where the MPI offers no hook inside its
 *                  own MPI_Waitall (MPICH);
 *   FLOOR_RECORD   FLOOR_POLL, and each posted request is recorded (its
 *                  handle, communicator, peer and buffer appended to a
 *                  per-thread log that each completed wait empties): what
 *                  knowing which peer each request waits for costs on top;
 *   FLOOR_STATUS   MPI_Waitall looks at the requests in array order with
 *                  PMPI_Request_get_status until each has finished, then
 *                  takes them all with one PMPI_Waitall, which can no
 *                  longer block: on MPICH the cheapest wait found that a
 *                  failure could leave (its MPI_Request_get_status runs
 *                  no progress pass on a finished request, and only its
 *                  MPI_Waitall has a fast path over finished ones).
 *
 * ftwrap's own figures in the same hour, over these, say how much of its
 * cost is its own and how much any interposer that never hangs would pay.
 * Nothing here survives a failure; it is an instrument, not a library.
 */
#include <mpi.h>
#include <stddef.h>

#if !defined(FLOOR_FORWARD) && !defined(FLOOR_POLL) && \
    !defined(FLOOR_RECORD) && !defined(FLOOR_STATUS)
#error "build with -DFLOOR_FORWARD, -DFLOOR_POLL, -DFLOOR_RECORD or -DFLOOR_STATUS"
#endif

#if defined(FLOOR_RECORD)
#define FLOOR_LOG 1024

typedef struct {
    MPI_Request req;
    MPI_Comm comm;
    int peer;
    const void *buf;
} floor_rec_t;

static __thread __attribute__((tls_model("initial-exec")))
floor_rec_t floor_log[FLOOR_LOG];
static __thread __attribute__((tls_model("initial-exec"))) int floor_n;

static inline void floor_add(MPI_Request req, MPI_Comm comm, int peer,
                             const void *buf)
{
    if (floor_n == FLOOR_LOG)
        floor_n = 0;
    floor_log[floor_n++] = (floor_rec_t){ .req = req, .comm = comm,
                                          .peer = peer, .buf = buf };
}
#else
static inline void floor_add(MPI_Request req, MPI_Comm comm, int peer,
                             const void *buf)
{
    (void)req; (void)comm; (void)peer; (void)buf;
}
#endif

int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int source, int tag,
              MPI_Comm comm, MPI_Request *req)
{
    int rc = PMPI_Irecv(buf, count, dt, source, tag, comm, req);

    if (rc == MPI_SUCCESS)
        floor_add(*req, comm, source, buf);
    return rc;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype dt, int dest,
              int tag, MPI_Comm comm, MPI_Request *req)
{
    int rc = PMPI_Isend(buf, count, dt, dest, tag, comm, req);

    if (rc == MPI_SUCCESS)
        floor_add(*req, comm, dest, buf);
    return rc;
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
#if defined(FLOOR_FORWARD)
    return PMPI_Waitall(n, reqs, sts);
#elif defined(FLOOR_STATUS)
    for (int next = 0; next < n;) {
        int flag = 0, rc;

        rc = PMPI_Request_get_status(reqs[next], &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return rc;
        next += flag;
    }
    return PMPI_Waitall(n, reqs, sts);
#else
    int flag = 0, rc;

    do
        rc = PMPI_Testall(n, reqs, &flag, sts);
    while (rc == MPI_SUCCESS && !flag);
#if defined(FLOOR_RECORD)
    floor_n = 0;        /* the windows wait for every request they post */
#endif
    return rc;
#endif
}
