/*
 * Reconnecting a peer's QP.  A QP that went to the error state (a READ
 * refused by the peer, a remote access error, a stall) while its peer is
 * alive is brought back: both ends go RESET -> INIT, each draws a new
 * first PSN and sends it to the other in a HELLO on this transport's own
 * duplicate of MPI_COMM_WORLD, and each moves to RTR and RTS once it has
 * the other's.  Either end may start (the one that saw the error; the
 * other's QP is often in error too, by the same event); a HELLO names an
 * epoch, one per reconnection of the pair, and each end sends exactly one
 * HELLO per epoch, so two ends that start at once meet in the same epoch
 * and a late HELLO is told from a new one:
 *
 *   UP --lost--> PENDING (epoch+1: reset, HELLO sent) --peer's HELLO--> UP
 *   UP --peer's HELLO (newer epoch)--> reset, HELLO sent, connected: UP
 *
 * Nothing here blocks: HELLOs are answered from every wait loop's
 * transport progress (ftw_verbs_conn_serve) and when the QP is about to
 * be used; a process that needs the QP now waits a bounded time
 * (ftw_verbs_conn_wait), watching the failure detector, and a QP whose
 * peer died is never reconnected.  All of it runs under the verbs lock.
 */
#define _GNU_SOURCE
#include "xport/verbs_int.h"

#include <mpi.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

#include "detect/detect.h"
#include "util/log.h"
#include "util/stats.h"

#define HELLO_TAG 1

enum { CONN_UP, CONN_LOST, CONN_PENDING };

typedef struct {
    uint32_t epoch;
    uint32_t psn;
} hello_t;

typedef struct {
    struct ibv_qp *qp;          /* NULL: not connected at MPI_Init */
    ftw_verbs_addr_t addr;      /* the peer's, from MPI_Init */
    uint32_t qpn;               /* the peer's QP for this process */
    uint32_t epoch;
    uint32_t psn;               /* this side's first PSN in epoch */
    int state;                  /* CONN_* */
    hello_t *out;               /* the last HELLO sent, and its send */
    MPI_Request out_req;
} conn_t;

static conn_t *conns;
static int nconns;
static MPI_Comm conn_comm = MPI_COMM_NULL;

ftw_status_t ftw_verbs_conn_init(int n)
{
    conns = calloc((size_t)n, sizeof(*conns));
    if (PMPI_Comm_dup(MPI_COMM_WORLD, &conn_comm) != MPI_SUCCESS) {
        ftw_error("verbs: MPI_Comm_dup for QP reconnection failed");
        conn_comm = MPI_COMM_NULL;
    }
    if (conns == NULL || conn_comm == MPI_COMM_NULL)
        return FTW_ST_NO_MEMORY;
    nconns = n;
    for (int i = 0; i < n; i++)
        conns[i].out_req = MPI_REQUEST_NULL;
    return FTW_OK;
}

void ftw_verbs_conn_peer(int peer, struct ibv_qp *qp,
                         const ftw_verbs_addr_t *a, uint32_t qpn)
{
    conn_t *c = &conns[peer];

    c->qp = qp;
    c->addr = *a;
    c->qpn = qpn;
    c->psn = ftw_verbs.psn;
    c->state = CONN_UP;
}

/* Send this side's HELLO for c's epoch (the last one is complete: eager;
 * if not, its peer is gone or going: let the MPI have it). */
static void hello_send(int peer, conn_t *c)
{
    int done = 1;

    if (c->out_req != MPI_REQUEST_NULL) {
        PMPI_Test(&c->out_req, &done, MPI_STATUS_IGNORE);
        if (!done) {
            PMPI_Request_free(&c->out_req);
            c->out = NULL;      /* the MPI may still read it: not freed */
        }
    }
    if (c->out == NULL && (c->out = malloc(sizeof(*c->out))) == NULL)
        return;                 /* the peer waits; its wait is bounded */
    *c->out = (hello_t){ .epoch = c->epoch, .psn = c->psn };
    if (PMPI_Isend(c->out, (int)sizeof(*c->out), MPI_BYTE, peer, HELLO_TAG,
                   conn_comm, &c->out_req) != MPI_SUCCESS)
        ftw_warn_sparse("verbs: the reconnection HELLO to world rank %d "
                        "could not be sent", peer);
}

/* c's QP back to INIT with a new first PSN, and this side's HELLO. */
static int conn_restart(int peer, conn_t *c)
{
    if (ftw_verbs_qp_reset(c->qp) != FTW_OK) {
        c->state = CONN_LOST;
        return -1;
    }
    if (getrandom(&c->psn, sizeof(c->psn), 0) != (ssize_t)sizeof(c->psn))
        c->psn = c->psn * 1103515245u + 12345u;
    c->psn &= 0xffffff;
    c->state = CONN_PENDING;
    hello_send(peer, c);
    return 0;
}

/* The peer's HELLO (its first PSN rpsn) arrived for c's epoch. */
static void conn_finish(int peer, conn_t *c, uint32_t rpsn)
{
    ftw_verbs_addr_t a = c->addr;

    a.psn = rpsn;
    if (ftw_verbs_qp_connect(c->qp, &a, c->qpn, c->psn) != FTW_OK) {
        c->state = CONN_LOST;
        return;
    }
    c->state = CONN_UP;
    ftw_stat_add(FTW_STAT_VERBS_RECONNECTS, 1);
    ftw_info("verbs: the QP to world rank %d is reconnected (epoch %u)",
             peer, c->epoch);
}

static void hello_take(int peer, const hello_t *h)
{
    conn_t *c = &conns[peer];

    if (c->qp == NULL || h->epoch < c->epoch ||
        (h->epoch == c->epoch && c->state != CONN_PENDING))
        return;                 /* stale, or this side is past it */
    if (h->epoch > c->epoch) {  /* the peer started it: answer */
        c->epoch = h->epoch;
        if (conn_restart(peer, c) != 0)
            return;
    }
    conn_finish(peer, c, h->psn);
}

void ftw_verbs_conn_serve(void)
{
    MPI_Status st;
    hello_t h;
    int flag = 1;

    while (conn_comm != MPI_COMM_NULL && flag) {
        if (PMPI_Iprobe(MPI_ANY_SOURCE, HELLO_TAG, conn_comm, &flag,
                        &st) != MPI_SUCCESS || !flag)
            return;
        if (PMPI_Recv(&h, (int)sizeof(h), MPI_BYTE, st.MPI_SOURCE,
                      HELLO_TAG, conn_comm, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
            return;
        if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < nconns)
            hello_take(st.MPI_SOURCE, &h);
    }
}

void ftw_verbs_conn_lost(int peer, const char *why)
{
    conn_t *c = &conns[peer];

    if (c->qp == NULL || c->state == CONN_PENDING ||
        ftw_detect_is_failed(peer))
        return;
    ftw_info("verbs: the QP to world rank %d needs reconnecting: %s (%s)",
             peer, why, ibv_wc_status_str(ftw_verbs.last_wc_status));
    c->epoch++;
    conn_restart(peer, c);
}

int ftw_verbs_conn_ready(int peer)
{
    if (conns == NULL || conns[peer].qp == NULL)
        return 0;
    if (conns[peer].state != CONN_UP)
        ftw_verbs_conn_serve();
    return conns[peer].state == CONN_UP;
}

ftw_status_t ftw_verbs_conn_wait(int peer, double secs)
{
    static const struct timespec nap = { .tv_nsec = 50000 };
    struct timespec t0, t;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (ftw_verbs_conn_ready(peer))
            return FTW_OK;
        ftw_detect_peek();
        if (conns == NULL || conns[peer].qp == NULL ||
            ftw_detect_is_failed(peer))
            return FTW_ST_PEER_FAILED;
        if (conns[peer].state == CONN_LOST)
            ftw_verbs_conn_lost(peer, "its last reconnection failed");
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) +
            (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 >= secs)
            break;
        nanosleep(&nap, NULL);
    }
    ftw_warn_sparse("verbs: the QP to world rank %d is not reconnected "
                    "after %.0f s (the peer answers from its MPI calls); "
                    "trying again on its next message", peer, secs);
    return FTW_ST_IO_ERROR;
}

void ftw_verbs_conn_fini(void)
{
    for (int i = 0; i < nconns; i++) {
        int done = 1;

        if (conns[i].out_req != MPI_REQUEST_NULL) {
            PMPI_Test(&conns[i].out_req, &done, MPI_STATUS_IGNORE);
            if (!done)
                PMPI_Request_free(&conns[i].out_req);
        }
        if (done)
            free(conns[i].out);
    }
    free(conns);
    conns = NULL;
    nconns = 0;
    if (conn_comm != MPI_COMM_NULL)
        PMPI_Comm_free(&conn_comm);
}
