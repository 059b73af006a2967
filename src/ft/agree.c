/* Flooding Consensus over a communicator's control communicator. */
#include "ft/agree.h"

#include <stdlib.h>
#include <string.h>

#include "detect/detect.h"
#include "ft/op.h"
#include "util/log.h"

#define AGREE_TAG_BASE 1000
#define AGREE_TAG_SPAN 20000

enum { MSG_PROPOSAL = 1, MSG_DECIDED = 2 };

typedef struct {
    int32_t type;
    int32_t round;
} msg_hdr_t;

/* A broadcast's message, kept until its sends complete. */
typedef struct bcast {
    struct bcast *next;
    MPI_Request *reqs;      /* [n] */
    int *peer;              /* [n] */
    int nreq;
    unsigned char msg[];
} bcast_t;

struct ftw_agree {
    ftw_comm_t *c;
    int n, me, tag;
    int round;
    int nrounds;            /* rows of prop and recvd */
    size_t vlen;            /* value: n failed bytes + 4 flag bytes */
    uint8_t *prop;          /* [nrounds][vlen]: aggregate of proposals */
    uint8_t *recvd;         /* [nrounds][n]: received-from sets */
    int decided;
    uint8_t *decision;      /* [vlen] */
    unsigned char *inbuf;   /* one incoming message */
    bcast_t *sent;
};

static uint8_t *prop_row(ftw_agree_t *a, int r)
{
    return a->prop + (size_t)r * a->vlen;
}

static uint8_t *recvd_row(ftw_agree_t *a, int r)
{
    return a->recvd + (size_t)r * (size_t)a->n;
}

/* Fold value v into the aggregate dst: bitwise OR of the failed bytes,
 * bitwise AND of the flag. */
static void value_merge(const ftw_agree_t *a, uint8_t *dst, const uint8_t *v)
{
    for (int i = 0; i < a->n; i++)
        dst[i] |= v[i];
    for (int i = a->n; i < a->n + 4; i++)
        dst[i] &= v[i];
}

static int is_failed(ftw_agree_t *a, int r)
{
    return ftw_comm_peer_failed(a->c, r);
}

/* Send (type, round, value) to every process not known dead; deliver it
 * to this process as well. */
static int broadcast(ftw_agree_t *a, int type, int round, const uint8_t *v)
{
    size_t len = sizeof(msg_hdr_t) + a->vlen;
    bcast_t *b = malloc(sizeof(*b) + len);
    msg_hdr_t hdr = { type, round };

    if (b == NULL)
        goto err;
    b->reqs = malloc(sizeof(*b->reqs) * (size_t)a->n);
    b->peer = malloc(sizeof(*b->peer) * (size_t)a->n);
    if (b->reqs == NULL || b->peer == NULL)
        goto err_free;
    memcpy(b->msg, &hdr, sizeof(hdr));
    memcpy(b->msg + sizeof(hdr), v, a->vlen);
    b->nreq = 0;
    for (int q = 0; q < a->n; q++) {
        if (q == a->me || is_failed(a, q))
            continue;
        PMPI_Isend(b->msg, (int)len, MPI_BYTE, q, a->tag, a->c->ctl,
                   &b->reqs[b->nreq]);
        b->peer[b->nreq++] = q;
    }
    b->next = a->sent;
    a->sent = b;
    return MPI_SUCCESS;

err_free:
    free(b->reqs);
    free(b->peer);
    free(b);
err:
    ftw_error("out of memory for an agreement message");
    return MPI_ERR_NO_MEM;
}

static void decide(ftw_agree_t *a, const uint8_t *v)
{
    memcpy(a->decision, v, a->vlen);
    a->decided = 1;
    broadcast(a, MSG_DECIDED, 0, v);
}

static void deliver(ftw_agree_t *a, int from, const unsigned char *msg)
{
    msg_hdr_t hdr;
    const uint8_t *v = msg + sizeof(hdr);

    memcpy(&hdr, msg, sizeof(hdr));
    if (hdr.type == MSG_DECIDED) {
        if (!a->decided && !is_failed(a, from))
            decide(a, v);
        return;
    }
    if (hdr.type != MSG_PROPOSAL || hdr.round < 1 || hdr.round >= a->nrounds)
        return;
    recvd_row(a, hdr.round)[from] = 1;
    value_merge(a, prop_row(a, hdr.round), v);
}

/* Send the proposal of round r (the aggregate of round r-1). */
static void propose(ftw_agree_t *a, int r, const uint8_t *v)
{
    value_merge(a, prop_row(a, r), v);
    recvd_row(a, r)[a->me] = 1;
    broadcast(a, MSG_PROPOSAL, r, v);
}

/* Every process not known dead has been heard from in this round. */
static int round_complete(ftw_agree_t *a)
{
    const uint8_t *got = recvd_row(a, a->round);

    for (int q = 0; q < a->n; q++)
        if (!got[q] && !is_failed(a, q))
            return 0;
    return 1;
}

int ftw_agree_test(ftw_agree_t *a)
{
    size_t len = sizeof(msg_hdr_t) + a->vlen;

    while (!a->decided) {
        MPI_Status st;
        int flag = 0;

        PMPI_Iprobe(MPI_ANY_SOURCE, a->tag, a->c->ctl, &flag, &st);
        if (flag) {
            PMPI_Recv(a->inbuf, (int)len, MPI_BYTE, st.MPI_SOURCE, a->tag,
                      a->c->ctl, MPI_STATUS_IGNORE);
            deliver(a, st.MPI_SOURCE, a->inbuf);
            continue;
        }
        if (!round_complete(a))
            return 0;
        if (!memcmp(recvd_row(a, a->round), recvd_row(a, a->round - 1),
                    (size_t)a->n)) {
            decide(a, prop_row(a, a->round));
        } else if (a->round + 1 < a->nrounds) {
            a->round++;
            propose(a, a->round, prop_row(a, a->round - 1));
        } else {
            /* Cannot happen: a round is added only for a new failure. */
            ftw_fatal("agreement ran out of rounds (%d)", a->nrounds);
        }
    }
    return 1;
}

int ftw_agree_start(ftw_comm_t *c, const uint8_t *failed, int flag,
                    ftw_agree_t **agree_p)
{
    ftw_agree_t *a;
    uint8_t *v = NULL;

    if (c->ctl == MPI_COMM_NULL) {
        ftw_error("no agreement possible on this communicator (an "
                  "intercommunicator, or one made by MPI_Comm_idup)");
        return MPI_ERR_COMM;
    }
    a = calloc(1, sizeof(*a));
    if (a == NULL)
        goto err;
    a->c = c;
    a->n = c->size;
    a->me = c->rank;
    a->tag = AGREE_TAG_BASE + (int)(c->agree_seq++ % AGREE_TAG_SPAN);
    a->nrounds = a->n + 2;
    a->vlen = (size_t)a->n + 4;
    a->prop = calloc((size_t)a->nrounds, a->vlen);
    a->recvd = calloc((size_t)a->nrounds, (size_t)a->n);
    a->decision = malloc(a->vlen);
    a->inbuf = malloc(sizeof(msg_hdr_t) + a->vlen);
    v = malloc(a->vlen);
    if (!a->prop || !a->recvd || !a->decision || !a->inbuf || !v)
        goto err_free;
    for (int r = 0; r < a->nrounds; r++)
        memset(prop_row(a, r) + a->n, 0xff, 4); /* neutral element of AND */
    memset(recvd_row(a, 0), 1, (size_t)a->n);
    for (int q = 0; q < a->n; q++)
        v[q] = failed ? failed[q] : (uint8_t)is_failed(a, q);
    memcpy(v + a->n, &flag, 4);
    a->round = 1;
    propose(a, 1, v);
    free(v);
    *agree_p = a;
    return MPI_SUCCESS;

err_free:
    free(v);
    ftw_agree_free(a);
err:
    ftw_error("out of memory for an agreement over %d processes", c->size);
    return MPI_ERR_NO_MEM;
}

void ftw_agree_result(const ftw_agree_t *a, uint8_t *failed, int *flag)
{
    memcpy(failed, a->decision, (size_t)a->n);
    memcpy(flag, a->decision + a->n, 4);
}

/* Finish a broadcast's sends: they are small and go eagerly; one to a
 * process that died meanwhile is given up. */
static void bcast_finish(ftw_agree_t *a, bcast_t *b)
{
    for (int i = 0; i < b->nreq; i++) {
        ftw_reqinfo_t info = { .comm = a->c->ctl, .peer = b->peer[i],
                               .peer2 = FTW_NO_PEER, .kind = FTW_OP_SEND };

        ftw_req_wait(&info, &b->reqs[i], MPI_STATUS_IGNORE, 1);
    }
    free(b->reqs);
    free(b->peer);
    free(b);
}

void ftw_agree_free(ftw_agree_t *a)
{
    if (a == NULL)
        return;
    while (a->sent != NULL) {
        bcast_t *b = a->sent;

        a->sent = b->next;
        bcast_finish(a, b);
    }
    free(a->prop);
    free(a->recvd);
    free(a->decision);
    free(a->inbuf);
    free(a);
}

int ftw_agree(ftw_comm_t *c, const uint8_t *failed_in, int flag_in,
              uint8_t *failed_out, int *flag_out)
{
    ftw_agree_t *a;
    ftw_poll_t p;
    int rc = ftw_agree_start(c, failed_in, flag_in, &a);

    if (rc != MPI_SUCCESS)
        return rc;
    ftw_poll_init(&p);
    while (!ftw_agree_test(a)) {
        ftw_poll_changed(&p);
        ftw_poll_idle(&p);
    }
    ftw_agree_result(a, failed_out, flag_out);
    ftw_agree_free(a);
    return MPI_SUCCESS;
}
