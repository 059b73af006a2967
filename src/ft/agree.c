/* Flooding Consensus over a communicator's control communicator. */
#include "ft/agree.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "detect/detect.h"
#include "ft/ctl.h"
#include "ft/lock.h"
#include "ft/op.h"
#include "util/log.h"

enum { MSG_PROPOSAL = 1, MSG_DECIDED = 2 };

/* A broadcast's message, kept until its sends complete; one allocation
 * (bcast_new). */
typedef struct bcast {
    struct bcast *next;
    MPI_Request *reqs;      /* [n] */
    int *peer;              /* [n] world ranks */
    int nreq;
    int own;                /* in the agreement's allocation (its first) */
    unsigned char *msg;     /* ftw_ctl_hdr_t, then the value */
} bcast_t;

/* Bytes of a broadcast to npeers with a value of vlen bytes, and where
 * its parts start. */
static size_t bcast_layout(int npeers, size_t vlen, size_t *reqs_off,
                           size_t *peer_off, size_t *msg_off)
{
    *reqs_off = (sizeof(bcast_t) + 15) & ~(size_t)15;
    *peer_off = *reqs_off + sizeof(MPI_Request) * (size_t)npeers;
    *msg_off = (*peer_off + sizeof(int) * (size_t)npeers + 15) & ~(size_t)15;
    return *msg_off + sizeof(ftw_ctl_hdr_t) + vlen;
}

struct ftw_agree {
    struct ftw_agree *next; /* on the finishing list */
    uint64_t id;            /* the communicator's id */
    uint32_t seq;           /* the agreement's number on c */
    int n, me;
    int round;
    int nrounds;            /* rows of prop and recvd */
    size_t vlen;            /* value: n failed bytes + 4 flag bytes */
    uint8_t *prop;          /* [nrounds][vlen]: aggregate of proposals */
    uint8_t *recvd;         /* [nrounds][n]: received-from sets */
    int decided;
    int superseded;         /* a later agreement on id decided here */
    int blocking;           /* ftw_agree's: no other on id overlaps it */
    int lazy;               /* decided in round 1 hearing every member:
                             * DECIDED is sent only to who asks (below) */
    uint8_t *decision;      /* [vlen] */
    uint8_t *decided_from;  /* [n]: DECIDED received from */
    uint8_t *answered;      /* [n]: lazy: DECIDED sent to */
    int *world;             /* [n]: world rank of each member (or the id
                             * of a process of another job) */
    ftw_ctl_chan_t *chan;   /* the communicator's own channel, or NULL:
                             * the job's (ctl.h) */
    struct member {
        int world, rank;
    } *by_world;            /* [n]: the members sorted by world rank */
    bcast_t *sent;
    uint8_t *scratch;       /* [vlen]: the first proposal */
    unsigned char *first;   /* room for the first broadcast (to n) */
};

/* An agreement over n members, zeroed, with its arrays in the same
 * allocation (one malloc per agreement: one runs per communicator
 * creation). */
static ftw_agree_t *agree_alloc(int n)
{
    size_t nr = (size_t)n + 2, vlen = (size_t)n + 4;
    size_t off_world = (sizeof(ftw_agree_t) + 15) & ~(size_t)15;
    size_t off_by = off_world + sizeof(int) * (size_t)n;
    size_t off_bytes = (off_by + sizeof(struct member) * (size_t)n + 15) &
                       ~(size_t)15;
    size_t nbytes = nr * vlen + nr * (size_t)n + vlen + 2 * (size_t)n + vlen;
    size_t off_first = (off_bytes + nbytes + 15) & ~(size_t)15, r, q, m;
    unsigned char *mem = calloc(1, off_first +
                                bcast_layout(n, vlen, &r, &q, &m)), *p;
    ftw_agree_t *a = (ftw_agree_t *)mem;

    if (mem == NULL)
        return NULL;
    a->first = mem + off_first;
    a->n = n;
    a->nrounds = (int)nr;
    a->vlen = vlen;
    a->world = (int *)(mem + off_world);
    a->by_world = (struct member *)(mem + off_by);
    p = mem + off_bytes;
    a->prop = p;
    p += nr * vlen;
    a->recvd = p;
    p += nr * (size_t)n;
    a->decision = p;
    p += vlen;
    a->decided_from = p;
    p += n;
    a->answered = p;
    p += n;
    a->scratch = p;
    return a;
}

/* Agreements decided here whose last messages (other processes' DECIDED)
 * have not all been taken yet: finished in the background, so a caller
 * has its decision one message latency earlier.
 *
 * Without failures no DECIDED is sent at all.  A process that decides in
 * round 1 having heard every member (a clean decision) knows every
 * member's proposal, so any process that needs more (one that saw a
 * member die before that member's proposal reached it goes on to round 2)
 * can be answered: the agreement stays here, lazy, and answers a round-2
 * proposal with a DECIDED to its sender.  It is released when a later
 * agreement on the same communicator decides here (every live member
 * took part in that one, so none is still in this one: blocking
 * agreements on one communicator never overlap), or when the
 * communicator is freed or MPI_Finalize comes: then every member sends
 * its DECIDED to all, as a non-clean decision does at once.  A failure
 * this process learns of makes it send its DECIDED at once too, so a
 * process that went on to round 2 because of that failure is answered
 * even if no message of it is read here.  Only blocking agreements
 * (ftw_agree) are lazy: a nonblocking one may overlap the next. */
static ftw_agree_t *finishing;
static pthread_mutex_t finishing_lock = PTHREAD_MUTEX_INITIALIZER;

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

static int is_failed(const ftw_agree_t *a, int r)
{
    return ftw_detect_is_failed(a->world[r]);
}

/* A broadcast of (type, round, v) to at most npeers processes, in one
 * allocation, listed on a->sent; NULL if out of memory (said). */
static bcast_t *bcast_new(ftw_agree_t *a, int type, int round,
                          const uint8_t *v, int npeers)
{
    size_t reqs_off, peer_off, msg_off;
    size_t size = bcast_layout(npeers, a->vlen, &reqs_off, &peer_off,
                               &msg_off);
    ftw_ctl_hdr_t hdr = { .id = a->id, .seq = a->seq, .type = type,
                          .round = round };
    int own = a->first != NULL && npeers <= a->n;
    unsigned char *mem = own ? a->first : malloc(size);
    bcast_t *b = (bcast_t *)mem;

    if (mem == NULL) {
        ftw_error("out of memory for an agreement message");
        return NULL;
    }
    a->first = own ? NULL : a->first;
    b->own = own;
    b->reqs = (MPI_Request *)(mem + reqs_off);
    b->peer = (int *)(mem + peer_off);
    b->msg = mem + msg_off;
    b->nreq = 0;
    memcpy(b->msg, &hdr, sizeof(hdr));
    memcpy(b->msg + sizeof(hdr), v, a->vlen);
    b->next = a->sent;
    a->sent = b;
    return b;
}

/* Send b's message to member q. */
static void bcast_to(ftw_agree_t *a, bcast_t *b, int q)
{
    ftw_ctl_isend(a->chan, q, a->world[q], b->msg,
                  (int)(sizeof(ftw_ctl_hdr_t) + a->vlen), FTW_CTL_TAG_AGREE,
                  &b->reqs[b->nreq]);
    b->peer[b->nreq++] = a->world[q];
}

/* Send (type, round, value) to every process not known dead; deliver it
 * to this process as well. */
static int broadcast(ftw_agree_t *a, int type, int round, const uint8_t *v)
{
    bcast_t *b = bcast_new(a, type, round, v, a->n);

    if (b == NULL)
        return MPI_ERR_NO_MEM;
    for (int q = 0; q < a->n; q++)
        if (q != a->me && !is_failed(a, q))
            bcast_to(a, b, q);
    return MPI_SUCCESS;
}

/* Send (type, round, value) to member q alone. */
static int send_one(ftw_agree_t *a, int type, int round, const uint8_t *v,
                    int q)
{
    bcast_t *b = bcast_new(a, type, round, v, 1);

    if (b == NULL)
        return MPI_ERR_NO_MEM;
    bcast_to(a, b, q);
    return MPI_SUCCESS;
}

/* Heard from every member in round 1. */
static int clean_round1(const ftw_agree_t *a)
{
    const uint8_t *got = a->recvd + (size_t)a->n;

    if (a->round != 1)
        return 0;
    for (int q = 0; q < a->n; q++)
        if (!got[q])
            return 0;
    return 1;
}

/* A member is known failed: a process that saw it die before its
 * proposal came in goes on to round 2. */
static int member_failed(const ftw_agree_t *a)
{
    for (int q = 0; q < a->n; q++)
        if (is_failed(a, q))
            return 1;
    return 0;
}

/* Lazy only while no member is known failed: a failure learned before the
 * agreement is finishing (during it, or between the decision and
 * ftw_agree_free) unlazies nothing, and a process in round 2 because of
 * it would wait for an answer that never comes. */
static void decide(ftw_agree_t *a, const uint8_t *v)
{
    memcpy(a->decision, v, a->vlen);
    a->decided = 1;
    if (a->blocking && clean_round1(a) && !member_failed(a))
        a->lazy = 1;
    else
        broadcast(a, MSG_DECIDED, 0, v);
}

/* A lazy agreement goes the usual way: DECIDED to every live member. */
static void unlazy(ftw_agree_t *a)
{
    if (!a->lazy)
        return;
    a->lazy = 0;
    broadcast(a, MSG_DECIDED, 0, a->decision);
}

static int member_cmp(const void *x, const void *y)
{
    int wx = ((const struct member *)x)->world;
    int wy = ((const struct member *)y)->world;

    return (wx > wy) - (wx < wy);
}

/* The rank in the agreement of world rank w, or -1: a binary search, so
 * the cost depends on the communicator's size, not the job's. */
static int member_of(const ftw_agree_t *a, int w)
{
    struct member key = { .world = w };
    const struct member *m = bsearch(&key, a->by_world, (size_t)a->n,
                                     sizeof(key), member_cmp);

    return m != NULL ? m->rank : -1;
}

static void deliver(ftw_agree_t *a, const ftw_ctl_msg_t *m)
{
    const ftw_ctl_hdr_t *hdr = &m->u.hdr;
    const uint8_t *v = m->u.data + sizeof(*hdr);
    int from = member_of(a, m->from);

    if (from < 0 || m->len != (int)(sizeof(*hdr) + a->vlen)) {
        ftw_warn_sparse("agreement message of %d bytes from world rank %d "
                        "dropped", m->len, m->from);
        return;
    }
    if (hdr->type == MSG_DECIDED) {
        a->decided_from[from] = 1;
        if (!a->decided && !is_failed(a, from))
            decide(a, v);
        return;
    }
    if (hdr->type != MSG_PROPOSAL || hdr->round < 1 ||
        hdr->round >= a->nrounds)
        return;
    /* A process still at it after this one decided cleanly: the answer. */
    if (a->decided && a->lazy && hdr->round >= 2 && !a->answered[from]) {
        a->answered[from] = 1;
        send_one(a, MSG_DECIDED, 0, a->decision, from);
    }
    recvd_row(a, hdr->round)[from] = 1;
    value_merge(a, prop_row(a, hdr->round), v);
}

static int agree_match(const ftw_ctl_hdr_t *hdr, void *arg)
{
    const ftw_agree_t *a = arg;

    return hdr->id == a->id && hdr->seq == a->seq;
}

/* Decided, and every other live process said so too: every message of
 * this agreement sent to this process has been taken off the channel
 * (a process's DECIDED is its last), so none is left to pile up. */
static int all_done(ftw_agree_t *a)
{
    if (!a->decided || a->lazy)
        return 0;
    for (int q = 0; q < a->n; q++)
        if (q != a->me && !a->decided_from[q] && !is_failed(a, q))
            return 0;
    return 1;
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

/* Take what came for a; 1 if anything did.  probe: look at the MPI's
 * queue too, not only at what other agreements' takes parked. */
static int take_messages(ftw_agree_t *a, int probe)
{
    ftw_ctl_msg_t *m;
    int got = 0;

    while ((m = probe ? ftw_ctl_take(FTW_CTL_TAG_AGREE, agree_match, a) :
                ftw_ctl_take_parked(FTW_CTL_TAG_AGREE, agree_match, a)) !=
           NULL) {
        deliver(a, m);
        free(m);
        got = 1;
    }
    return got;
}

static void agree_release(ftw_agree_t *a);
static int ftw_agree_test_(ftw_agree_t *a);

/* Progress the finishing agreements; release those done.  probe: see
 * take_messages; without it, a finishing agreement is fed by the takes of
 * the running ones (each reads the channel's queue to the end) or, at
 * MPI_Finalize, by ftw_agree_fini. */
static void reap(int probe)
{
    ftw_agree_t *done = NULL;

    if (finishing == NULL || ftw_mt_trylock(&finishing_lock) != 0)
        return;
    for (ftw_agree_t **pp = &finishing; *pp != NULL;) {
        ftw_agree_t *a = *pp;

        take_messages(a, probe);
        if (!all_done(a) && !a->superseded) {
            pp = &a->next;
            continue;
        }
        *pp = a->next;
        a->next = done;
        done = a;
    }
    ftw_mt_unlock(&finishing_lock);
    while (done != NULL) {
        ftw_agree_t *a = done;

        done = a->next;
        agree_release(a);
    }
}

/* a decided: the older agreements on its communicator are over
 * everywhere (see finishing). */
static void supersede_older(const ftw_agree_t *a)
{
    ftw_mt_lock(&finishing_lock);
    for (ftw_agree_t *e = finishing; e != NULL; e = e->next)
        if (e->id == a->id && e->lazy && (int32_t)(a->seq - e->seq) > 0)
            e->superseded = 1;
    ftw_mt_unlock(&finishing_lock);
}

int ftw_agree_test(ftw_agree_t *a)
{
    if (a->decided)
        return 1;
    if (ftw_agree_test_(a)) {
        /* The agreements this one supersedes go at the next start
         * (reap), in the shadow of its proposal. */
        if (a->blocking)
            supersede_older(a);
        return 1;
    }
    return 0;
}

static int ftw_agree_test_(ftw_agree_t *a)
{
    while (!a->decided) {
        if (take_messages(a, 1))
            continue;
        if (!round_complete(a))
            return 0;
        if (!memcmp(recvd_row(a, a->round), recvd_row(a, a->round - 1),
                    (size_t)a->n)) {
            decide(a, prop_row(a, a->round));
        } else if (a->round + 1 < a->nrounds) {
            /* A member failed during the round: what is known failed now
             * goes into the value, so the decision names every process
             * whose failure held the agreement up (and the survivors'
             * communicator a validate makes does not wait for one). */
            a->round++;
            for (int q = 0; q < a->n; q++)
                if (is_failed(a, q))
                    prop_row(a, a->round - 1)[q] |= 1;
            propose(a, a->round, prop_row(a, a->round - 1));
        } else {
            /* Cannot happen: a round is added only for a new failure. */
            ftw_fatal("agreement ran out of rounds (%d)", a->nrounds);
        }
    }
    return 1;
}

int ftw_agree_members(const ftw_comm_t *c)
{
    return c->is_inter ? c->nlocal + c->size : c->size;
}

/* The lowest world rank of n members. */
static int lowest(const int *world, int n)
{
    int low = world[0];

    for (int i = 1; i < n; i++)
        low = world[i] < low ? world[i] : low;
    return low;
}

/* The group holding the lowest world rank goes first: this process's? */
static int local_first(const ftw_comm_t *c)
{
    return c->nlocal > 0 && c->size > 0 &&
           lowest(c->local_world, c->nlocal) < lowest(c->peer_world, c->size);
}

int ftw_agree_member_list(const ftw_comm_t *c, int *world)
{
    int first;

    if (!c->is_inter) {
        memcpy(world, c->peer_world, sizeof(int) * (size_t)c->size);
        return c->rank;
    }
    first = local_first(c);
    memcpy(world + (first ? 0 : c->size), c->local_world,
           sizeof(int) * (size_t)c->nlocal);
    memcpy(world + (first ? c->nlocal : 0), c->peer_world,
           sizeof(int) * (size_t)c->size);
    return c->rank + (first ? 0 : c->size);
}

int ftw_agree_start(ftw_comm_t *c, const uint8_t *failed, int flag,
                    ftw_agree_t **agree_p)
{
    ftw_agree_t *a;
    uint8_t *v;
    int sorted = 1;

    if (c->id == 0 || (c->is_inter && c->chan != NULL)) {
        ftw_error("no agreement possible on this communicator (one "
                  "ftwrap did not see made, or an intercommunicator "
                  "between two jobs)");
        return MPI_ERR_COMM;
    }
    a = agree_alloc(ftw_agree_members(c));
    if (a == NULL)
        goto err;
    a->id = c->id;
    a->seq = c->agree_seq++;
    a->chan = c->chan;
    if (a->chan != NULL)
        ftw_ctl_chan_hold(a->chan);
    v = a->scratch;
    /* The members are copied: a finishing agreement may outlive c. */
    a->me = ftw_agree_member_list(c, a->world);
    for (int r = 0; r < a->nrounds; r++)
        memset(prop_row(a, r) + a->n, 0xff, 4); /* neutral element of AND */
    memset(recvd_row(a, 0), 1, (size_t)a->n);
    for (int q = 0; q < a->n; q++)
        v[q] = failed ? failed[q] : (uint8_t)is_failed(a, q);
    memcpy(v + a->n, &flag, 4);
    a->round = 1;
    propose(a, 1, v);
    /* While the proposal travels: the index messages are read with, and
     * the older agreements' turn. */
    for (int q = 0; q < a->n; q++) {
        a->by_world[q] = (struct member){ a->world[q], q };
        sorted &= q == 0 || a->world[q - 1] < a->world[q];
    }
    if (!sorted)
        qsort(a->by_world, (size_t)a->n, sizeof(*a->by_world), member_cmp);
    reap(0);
    *agree_p = a;
    return MPI_SUCCESS;

err:
    ftw_error("out of memory for an agreement over %d processes",
              ftw_agree_members(c));
    return MPI_ERR_NO_MEM;
}

void ftw_agree_result(const ftw_agree_t *a, uint8_t *failed, int *flag)
{
    if (failed != NULL)
        memcpy(failed, a->decision, (size_t)a->n);
    memcpy(flag, a->decision + a->n, 4);
}

/* Finish a broadcast's sends: they are small and go eagerly; one to a
 * process that died meanwhile is given up. */
static void bcast_finish(bcast_t *b)
{
    for (int i = 0; i < b->nreq; i++)
        ftw_ctl_send_finish(&b->reqs[i], b->peer[i]);
    if (!b->own)
        free(b);
}

static void agree_release(ftw_agree_t *a)
{
    while (a->sent != NULL) {
        bcast_t *b = a->sent;

        a->sent = b->next;
        bcast_finish(b);
    }
    ftw_ctl_chan_put(a->chan);
    free(a);
}

void ftw_agree_free(ftw_agree_t *a)
{
    if (a == NULL)
        return;
    take_messages(a, !a->decided);
    if (!a->decided || all_done(a) || a->superseded) {
        agree_release(a);
        return;
    }
    ftw_mt_lock(&finishing_lock);
    a->next = finishing;
    finishing = a;
    /* Checked with a on the list: a failure learned from now on unlazies
     * it (ftw_agree_failure_seen). */
    if (member_failed(a))
        unlazy(a);
    ftw_mt_unlock(&finishing_lock);
}

void ftw_agree_comm_freed(uint64_t id)
{
    if (id == 0 || finishing == NULL)
        return;
    ftw_mt_lock(&finishing_lock);
    for (ftw_agree_t *e = finishing; e != NULL; e = e->next)
        if (e->id == id && !e->superseded)
            unlazy(e);
    ftw_mt_unlock(&finishing_lock);
}

void ftw_agree_failure_seen(void)
{
    if (finishing == NULL)
        return;
    ftw_mt_lock(&finishing_lock);
    for (ftw_agree_t *e = finishing; e != NULL; e = e->next)
        if (!e->superseded)
            unlazy(e);
    ftw_mt_unlock(&finishing_lock);
}

void ftw_agree_fini(void)
{
    double until = PMPI_Wtime() + 1.0;

    ftw_mt_lock(&finishing_lock);
    for (ftw_agree_t *e = finishing; e != NULL; e = e->next)
        if (!e->superseded)
            unlazy(e);
    ftw_mt_unlock(&finishing_lock);

    /* Every live process sent its DECIDED when it decided: take them (a
     * process that lags that much is not waited for). */
    while (finishing != NULL && PMPI_Wtime() < until)
        reap(1);
    ftw_mt_lock(&finishing_lock);
    while (finishing != NULL) {
        ftw_agree_t *a = finishing;

        finishing = a->next;
        agree_release(a);
    }
    ftw_mt_unlock(&finishing_lock);
}

int ftw_agree_post(ftw_comm_t *c, const uint8_t *failed_in, int flag_in,
                   ftw_agree_t **agree_p)
{
    int rc = ftw_agree_start(c, failed_in, flag_in, agree_p);

    if (rc == MPI_SUCCESS)
        (*agree_p)->blocking = 1;
    return rc;
}

void ftw_agree_wait(ftw_agree_t *a, uint8_t *failed_out, int *flag_out)
{
    ftw_poll_t p;

    ftw_poll_init(&p);
    while (!ftw_agree_test(a)) {
        ftw_poll_changed(&p);
        ftw_poll_idle(&p);
    }
    ftw_agree_result(a, failed_out, flag_out);
    ftw_agree_free(a);
}

int ftw_agree(ftw_comm_t *c, const uint8_t *failed_in, int flag_in,
              uint8_t *failed_out, int *flag_out)
{
    ftw_agree_t *a;
    int rc = ftw_agree_post(c, failed_in, flag_in, &a);

    if (rc != MPI_SUCCESS)
        return rc;
    ftw_agree_wait(a, failed_out, flag_out);
    return MPI_SUCCESS;
}
