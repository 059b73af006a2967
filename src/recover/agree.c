/* A tree agreement with early return over the control channel (agree.h). */
#include "recover/agree.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "detect/detect.h"
#include "core/ctl.h"
#include "core/lock.h"
#include "op/op.h"
#include "util/log.h"
#include "util/stats.h"

/* Message types (ftw_ctl_hdr_t.type); an UP's round is 1 when it carries
 * a decision. */
enum { MSG_UP = 1, MSG_DOWN = 2 };

/* Agreements of the failure handlers (SUBSET mode) are numbered apart
 * from the others on the same communicator: this bit is set in theirs. */
#define SEQ_HANDLER (UINT64_C(1) << 63)

/* How long an agreement of a freed communicator stays to answer members
 * that learn of a failure late, in seconds. */
#define FREED_LINGER 30.0

/* What a message carries after its header: the lowest agreement number
 * still undecided at the senders (see floor below), then the value. */
typedef struct {
    uint64_t floor;
} body_t;

/* A message in flight; freed once its send completed. */
typedef struct sendrec {
    struct sendrec *next;
    MPI_Request req;
    int peer;                   /* world rank (or id) */
    unsigned char msg[];        /* header, body, value */
} sendrec_t;

struct ftw_agree {
    struct ftw_agree *next;     /* on the registry (all) */
    uint64_t id;                /* the communicator's id */
    uint64_t seq;               /* the agreement's number on it */
    int n, me;
    size_t vlen;                /* value: n failed bytes, 4 flag bytes,
                                 * 1 out-of-memory byte (NOMEM_AT) */
    int owned;                  /* the caller has not freed it */
    int decided;
    int superseded;             /* every live member decided it */
    double freed_at;            /* its communicator was freed then, or 0 */

    /* The tree, as this process sees it with the failures it knows. */
    uint32_t epoch;             /* ftw_fail_epoch it was computed at */
    int topo_done;
    int parent;                 /* -1: this process is the root */
    int nkids;
    int *kids;                  /* [n] */
    uint8_t *dead;              /* [n] known failed at epoch */

    uint8_t *acc;               /* [vlen] own proposal and subtree's */
    uint64_t acc_floor;
    uint8_t *got;               /* [n] an UP came from */
    uint8_t *told;              /* [n] the decision was sent to */
    int up_to;                  /* the member the last UP went to; -1
                                 * none, -2 the decision must go up */
    uint8_t *decision;          /* [vlen] */
    uint64_t floor;             /* the decision's */
    int stash_from;             /* a DOWN from a member not (yet) the
                                 * parent, kept in stash; -1 none */
    uint8_t *stash;             /* [vlen] */
    uint64_t stash_floor;

    int *world;                 /* [n] world rank (or id) of each member */
    struct member {
        int world, rank;
    } *by_world;                /* [n] sorted by world rank */
    ftw_ctl_chan_t *chan;       /* the communicator's own channel, or
                                 * NULL: the job's (ctl.h) */
    sendrec_t *sends;
};

/* Every agreement of this process not released yet, running (owned) or
 * kept to answer, under agree_lock with all their state. */
static ftw_agree_t *all;
static pthread_mutex_t agree_lock = PTHREAD_MUTEX_INITIALIZER;

/* The agreements started here per communicator id: a message for one
 * already started and released is stale and dropped. */
struct started {
    uint64_t id;
    uint64_t next[2];           /* per numbering (SEQ_HANDLER or not) */
    UT_hash_handle hh;
};
static struct started *started_table;

/* ---- memory -------------------------------------------------------------
 * A member that cannot allocate what an agreement needs must still take
 * part (the others wait for its contribution): a reserve is kept, given
 * back to the allocator when an allocation fails, and the process then
 * proposes "out of memory" in the agreement it starts next on this
 * thread (the caller's allocations come before the agreement), which every
 * member then returns as MPI_ERR_NO_MEM.  The reserve is taken again at
 * the next agreement that finds memory for it. */

#define RESERVE_MIN (64 * 1024)

static void *_Atomic reserve;
static FTW_TLS int nomem_mark;

/* The byte of the value that says a member ran short of memory. */
#define NOMEM_AT(a) ((size_t)(a)->n + 4)

static void reserve_release(void)
{
    free(atomic_exchange(&reserve, NULL));
}

static void reserve_take(size_t want)
{
    void *r;

    if (atomic_load_explicit(&reserve, memory_order_relaxed) != NULL)
        return;
    want = want < RESERVE_MIN ? RESERVE_MIN : want;
    r = malloc(want);
    if (r == NULL)
        return;
    memset(r, 0, want);         /* resident, so that giving it back helps */
    r = atomic_exchange(&reserve, r);
    free(r);
}

/* malloc(len), or after a failure (FTW_INJECT at nomem counts one) the
 * same once the reserve is given back; mark: remember the shortage for
 * the next agreement started here. */
static void *mem_get(size_t len, int mark)
{
    void *p = ftw_inject_nomem() ? NULL : malloc(len ? len : 1);

    if (p != NULL)
        return p;
    if (mark)
        nomem_mark = 1;
    ftw_error("out of memory for %zu bytes of an agreement: ftwrap gives "
              "back its reserve%s", len,
              mark ? "; the agreement ends in MPI_ERR_NO_MEM everywhere" : "");
    reserve_release();
    return malloc(len ? len : 1);
}

void *ftw_agree_malloc(size_t len)
{
    return mem_get(len, 1);
}

void *ftw_agree_malloc_after(size_t len)
{
    return mem_get(len, 0);
}

static int space_of(uint64_t seq)
{
    return (seq & SEQ_HANDLER) != 0;
}

static ftw_agree_t *agree_alloc(int n)
{
    size_t vlen = (size_t)n + 5;
    size_t off_kids = (sizeof(ftw_agree_t) + 15) & ~(size_t)15;
    size_t off_world = off_kids + sizeof(int) * (size_t)n;
    size_t off_by = (off_world + sizeof(int) * (size_t)n + 7) & ~(size_t)7;
    size_t off_bytes = off_by + sizeof(struct member) * (size_t)n;
    size_t size = off_bytes + 4 * (size_t)n + 3 * vlen;
    unsigned char *mem, *p;
    ftw_agree_t *a;

    /* Room for this agreement and a few of its messages, kept aside. */
    reserve_take(8 * size);
    mem = mem_get(size, 1);
    a = (ftw_agree_t *)mem;
    if (mem == NULL)
        return NULL;
    memset(mem, 0, size);
    a->n = n;
    a->vlen = vlen;
    a->kids = (int *)(mem + off_kids);
    a->world = (int *)(mem + off_world);
    a->by_world = (struct member *)(mem + off_by);
    p = mem + off_bytes;
    a->dead = p;
    p += n;
    a->got = p;
    p += n;
    a->told = p;
    p += n;
    p += n;                     /* spare */
    a->acc = p;
    p += vlen;
    a->decision = p;
    p += vlen;
    a->stash = p;
    a->up_to = -1;
    a->stash_from = -1;
    return a;
}

/* ---- the tree ----------------------------------------------------------
 * A binomial tree over the member indices: the parent of i is i with its
 * lowest set bit cleared, so every ancestor of i is below i.  A member
 * known failed is skipped: its children hang from its nearest live
 * ancestor; a member whose ancestors all failed hangs from the lowest
 * live member, the root (whose ancestors, all below it, failed). */

static int lowest_live(const ftw_agree_t *a)
{
    for (int i = 0; i < a->n; i++)
        if (!a->dead[i])
            return i;
    return -1;
}

static int parent_of(const ftw_agree_t *a, int i, int low)
{
    for (int p = i; p != 0;) {
        p &= p - 1;
        if (!a->dead[p])
            return p;
    }
    return low == i ? -1 : low;
}

/* Recompute the tree if a failure was learned since. */
static void topo(ftw_agree_t *a)
{
    uint32_t e = atomic_load_explicit(&ftw_fail_epoch, memory_order_acquire);
    int ndead = 0, low;

    if (a->topo_done && e == a->epoch)
        return;
    a->epoch = e;
    a->topo_done = 1;
    for (int i = 0; i < a->n; i++) {
        a->dead[i] = e != 0 && i != a->me &&
                     (uint8_t)ftw_detect_is_failed(a->world[i]);
        ndead += a->dead[i];
    }
    a->nkids = 0;
    if (ndead == 0) {
        /* The binomial children: me + 2^k for 2^k below me's lowest bit. */
        a->parent = a->me == 0 ? -1 : (a->me & (a->me - 1));
        for (int k = 1; a->me + k < a->n && (a->me == 0 || k < (a->me & -a->me));
             k <<= 1)
            a->kids[a->nkids++] = a->me + k;
        return;
    }
    low = lowest_live(a);
    a->parent = parent_of(a, a->me, low);
    for (int i = 0; i < a->n; i++)
        if (i != a->me && !a->dead[i] && parent_of(a, i, low) == a->me)
            a->kids[a->nkids++] = i;
}

/* ---- messages ---------------------------------------------------------- */

/* Fold value v into dst: OR of the failed bytes, AND of the flag, OR of
 * the out-of-memory byte. */
static void value_merge(const ftw_agree_t *a, uint8_t *dst, const uint8_t *v)
{
    for (int i = 0; i < a->n; i++)
        dst[i] |= v[i];
    for (int i = a->n; i < a->n + 4; i++)
        dst[i] &= v[i];
    dst[NOMEM_AT(a)] |= v[NOMEM_AT(a)];
}

static size_t msg_len(const ftw_agree_t *a)
{
    return sizeof(ftw_ctl_hdr_t) + sizeof(body_t) + a->vlen;
}

/* Finish the sends that are done; all of them (those to the dead given
 * up) when wait. */
static void sends_reap(ftw_agree_t *a, int wait)
{
    for (sendrec_t **pp = &a->sends; *pp != NULL;) {
        sendrec_t *s = *pp;
        int flag = 0;

        if (wait)
            ftw_ctl_send_finish(&s->req, s->peer);
        else
            PMPI_Test(&s->req, &flag, MPI_STATUS_IGNORE);
        if (s->req != MPI_REQUEST_NULL) {
            pp = &s->next;
            continue;
        }
        *pp = s->next;
        free(s);
    }
}

static void send_msg(ftw_agree_t *a, int q, int type, int decided,
                     const uint8_t *v, uint64_t floor)
{
    ftw_ctl_hdr_t hdr = { .id = a->id, .seq = a->seq, .type = type,
                          .round = decided };
    body_t body = { .floor = floor };
    /* Not marked: this process's contribution may be out already. */
    sendrec_t *s = mem_get(sizeof(*s) + msg_len(a), 0);

    if (s == NULL) {
        ftw_error("out of memory for an agreement message");
        return;
    }
    ftw_inject(type == MSG_UP ? FTW_INJECT_AGREE_UP : FTW_INJECT_AGREE_DOWN);
    memcpy(s->msg, &hdr, sizeof(hdr));
    memcpy(s->msg + sizeof(hdr), &body, sizeof(body));
    memcpy(s->msg + sizeof(hdr) + sizeof(body), v, a->vlen);
    s->peer = a->world[q];
    ftw_ctl_isend(a->chan, q, a->world[q], s->msg, (int)msg_len(a),
                  FTW_CTL_TAG_AGREE, &s->req);
    s->next = a->sends;
    a->sends = s;
    ftw_stat_add(FTW_STAT_AGREE_MSGS, 1);
}

static void send_down(ftw_agree_t *a, int q)
{
    a->told[q] = 1;
    send_msg(a, q, MSG_DOWN, 1, a->decision, a->floor);
}

/* ---- deciding ---------------------------------------------------------- */

/* A later agreement on the same communicator decided with floor f: every
 * live member has decided the ones below f, so none will ask about them
 * again. */
static void supersede_below(const ftw_agree_t *a, uint64_t f)
{
    for (ftw_agree_t *e = all; e != NULL; e = e->next)
        if (e != a && e->id == a->id && space_of(e->seq) == space_of(a->seq)
            && e->seq < f && e->decided)
            e->superseded = 1;
}

static void decide(ftw_agree_t *a, const uint8_t *v, uint64_t floor)
{
    memcpy(a->decision, v, a->vlen);
    a->floor = floor;
    /* Its owner reads it without agree_lock (ftw_agree_test): the
     * decision is written before. */
    __atomic_store_n(&a->decided, 1, __ATOMIC_RELEASE);
    supersede_below(a, floor);
}

/* Mark the members known failed into v (bit 0). */
static void mark_failed(ftw_agree_t *a, uint8_t *v)
{
    for (int i = 0; i < a->n; i++)
        if (a->dead[i])
            v[i] |= 1;
}

static int kids_reported(const ftw_agree_t *a)
{
    for (int k = 0; k < a->nkids; k++)
        if (!a->got[a->kids[k]])
            return 0;
    return 1;
}

/* Move a on as far as it goes now. */
static void step(ftw_agree_t *a)
{
    topo(a);
    if (!a->decided && a->stash_from >= 0 && a->stash_from == a->parent) {
        decide(a, a->stash, a->stash_floor);
        a->up_to = a->parent;
    }
    if (!a->decided && (a->parent < 0 || a->up_to != a->parent) &&
        kids_reported(a)) {
        /* What held the subtree up goes into the value: the decision
         * names every process whose failure was waited out. */
        mark_failed(a, a->acc);
        if (a->parent < 0) {
            decide(a, a->acc, a->acc_floor);
        } else {
            a->up_to = a->parent;
            send_msg(a, a->parent, MSG_UP, 0, a->acc, a->acc_floor);
        }
    }
    if (!a->decided)
        return;
    /* Down the tree first: the children wait for it. */
    for (int k = 0; k < a->nkids; k++)
        if (!a->told[a->kids[k]])
            send_down(a, a->kids[k]);
    /* A new parent (the old one failed), or one that has not seen the
     * decision: it goes up, so that no other is taken. */
    if (a->parent >= 0 && a->up_to != a->parent) {
        a->up_to = a->parent;
        send_msg(a, a->parent, MSG_UP, 1, a->decision, a->floor);
    }
}

static int member_cmp(const void *x, const void *y)
{
    int wx = ((const struct member *)x)->world;
    int wy = ((const struct member *)y)->world;

    return (wx > wy) - (wx < wy);
}

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
    body_t body;
    const uint8_t *v = m->u.data + sizeof(*hdr) + sizeof(body);
    int from = member_of(a, m->from);

    if (from < 0 || from == a->me || m->len != (int)msg_len(a)) {
        ftw_warn_sparse("agreement message of %d bytes from world rank %d "
                        "dropped", m->len, m->from);
        return;
    }
    memcpy(&body, m->u.data + sizeof(*hdr), sizeof(body));
    topo(a);
    if (hdr->type == MSG_UP) {
        /* from takes this process for its parent. */
        a->got[from] = 1;
        if (hdr->round) {
            a->told[from] = 1;
            if (!a->decided) {
                /* A decision taken by a root that failed since: this
                 * one and every other goes by it. */
                decide(a, v, body.floor);
                a->up_to = -2;
            }
            return;
        }
        if (a->decided) {
            send_down(a, from);     /* one asking late */
            return;
        }
        value_merge(a, a->acc, v);
        if (body.floor < a->acc_floor)
            a->acc_floor = body.floor;
        return;
    }
    if (hdr->type != MSG_DOWN || a->decided)
        return;
    /* Only the parent's decision is taken: this process's contribution
     * went to it, and any other root's is not final. */
    if (from == a->parent) {
        decide(a, v, body.floor);
        a->up_to = a->parent;
    } else {
        memcpy(a->stash, v, a->vlen);
        a->stash_floor = body.floor;
        a->stash_from = from;
    }
}

/* ---- the registry, the channel ----------------------------------------- */

static ftw_agree_t *find(uint64_t id, uint64_t seq)
{
    for (ftw_agree_t *e = all; e != NULL; e = e->next)
        if (e->id == id && e->seq == seq)
            return e;
    return NULL;
}

/* Take a message: one of an agreement here, or one of an agreement this
 * process started and released (dropped).  Others (agreements not
 * started here yet) are parked by the channel. */
static int pump_match(const ftw_ctl_hdr_t *hdr, void *arg)
{
    struct started *s;

    (void)arg;
    if (find(hdr->id, hdr->seq) != NULL)
        return 1;
    HASH_FIND(hh, started_table, &hdr->id, sizeof(hdr->id), s);
    return s != NULL && hdr->seq < s->next[space_of(hdr->seq)];
}

static void release(ftw_agree_t *a)
{
    sends_reap(a, 1);
    ftw_ctl_chan_put(a->chan);
    free(a);
}

/* Read the channel, move every agreement on, release those done.  Under
 * agree_lock. */
static void pump_locked(int probe)
{
    ftw_ctl_msg_t *m;
    ftw_agree_t *done = NULL;
    double now = 0;

    while ((m = probe ? ftw_ctl_take(FTW_CTL_TAG_AGREE, pump_match, NULL) :
                ftw_ctl_take_parked(FTW_CTL_TAG_AGREE, pump_match, NULL)) !=
           NULL) {
        ftw_agree_t *a = find(m->u.hdr.id, m->u.hdr.seq);

        if (a != NULL)
            deliver(a, m);
        free(m);
    }
    for (ftw_agree_t **pp = &all; *pp != NULL;) {
        ftw_agree_t *a = *pp;

        step(a);
        sends_reap(a, 0);
        if (!a->owned && a->freed_at > 0 && now == 0)
            now = PMPI_Wtime();
        if (a->owned || (!a->superseded &&
                         (a->freed_at == 0 || now - a->freed_at < FREED_LINGER))) {
            pp = &a->next;
            continue;
        }
        *pp = a->next;
        a->next = done;
        done = a;
    }
    while (done != NULL) {
        ftw_agree_t *a = done;

        done = a->next;
        release(a);
    }
}

/* ---- the interface ----------------------------------------------------- */

int ftw_agree_members(const ftw_comm_t *c)
{
    return c->is_inter ? c->nlocal + c->size : c->size;
}

static int lowest(const int *world, int n)
{
    int low = world[0];

    for (int i = 1; i < n; i++)
        low = world[i] < low ? world[i] : low;
    return low;
}

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

/* The lowest agreement number of a's numbering on its communicator not
 * decided here (a's own at most). */
static uint64_t floor_here(const ftw_agree_t *a)
{
    uint64_t f = a->seq;

    for (ftw_agree_t *e = all; e != NULL; e = e->next)
        if (e->id == a->id && space_of(e->seq) == space_of(a->seq) &&
            !e->decided && e->seq < f)
            f = e->seq;
    return f;
}

static int agree_start(ftw_comm_t *c, const uint8_t *failed, int flag,
                       uint64_t handler, ftw_agree_t **agree_p)
{
    ftw_agree_t *a;
    struct started *s;
    int sorted = 1;

    if (c->id == 0 || (c->is_inter && c->chan != NULL)) {
        ftw_error("no agreement possible on this communicator (one "
                  "ftwrap did not see made, or an intercommunicator "
                  "between two jobs)");
        return MPI_ERR_COMM;
    }
    a = agree_alloc(ftw_agree_members(c));
    if (a == NULL) {
        /* Even with the reserve given back: the others will wait. */
        ftw_error("out of memory for an agreement over %d processes",
                  ftw_agree_members(c));
        nomem_mark = 0;
        return MPI_ERR_NO_MEM;
    }
    a->id = c->id;
    a->seq = handler ? SEQ_HANDLER | handler : c->agree_seq++;
    a->owned = 1;
    a->chan = c->chan;
    if (a->chan != NULL)
        ftw_ctl_chan_hold(a->chan);
    /* The members are copied: a kept agreement may outlive c. */
    a->me = ftw_agree_member_list(c, a->world);
    for (int q = 0; q < a->n; q++)
        a->acc[q] = failed ? failed[q]
                           : (uint8_t)ftw_detect_is_failed(a->world[q]);
    memcpy(a->acc + a->n, &flag, 4);
    /* A shortage of the caller's (before this) or of a->'s own. */
    a->acc[NOMEM_AT(a)] = (uint8_t)nomem_mark;
    nomem_mark = 0;
    for (int q = 0; q < a->n; q++) {
        a->by_world[q] = (struct member){ a->world[q], q };
        sorted &= q == 0 || a->world[q - 1] < a->world[q];
    }
    if (!sorted)
        qsort(a->by_world, (size_t)a->n, sizeof(*a->by_world), member_cmp);
    ftw_stat_add(FTW_STAT_AGREEMENTS, 1);

    ftw_mt_lock(&agree_lock);
    HASH_FIND(hh, started_table, &a->id, sizeof(a->id), s);
    if (s == NULL && (s = calloc(1, sizeof(*s))) != NULL) {
        s->id = a->id;
        HASH_ADD(hh, started_table, id, sizeof(s->id), s);
    }
    if (s != NULL && s->next[space_of(a->seq)] <= a->seq)
        s->next[space_of(a->seq)] = a->seq + 1;
    a->acc_floor = floor_here(a);
    a->next = all;
    all = a;
    /* The parked messages of this one (faster members), its first
     * step (a leaf sends its proposal up now). */
    pump_locked(0);
    ftw_mt_unlock(&agree_lock);
    *agree_p = a;
    return MPI_SUCCESS;
}

int ftw_agree_start(ftw_comm_t *c, const uint8_t *failed, int flag,
                    ftw_agree_t **agree_p)
{
    return agree_start(c, failed, flag, 0, agree_p);
}

int ftw_agree_test(ftw_agree_t *a)
{
    int decided;

    if (__atomic_load_n(&a->decided, __ATOMIC_ACQUIRE))
        return 1;
    /* Another thread moving the agreements on moves this one too. */
    if (ftw_mt_trylock(&agree_lock) != 0)
        return 0;
    pump_locked(1);
    decided = a->decided;
    ftw_mt_unlock(&agree_lock);
    return decided;
}

void ftw_agree_result(const ftw_agree_t *a, uint8_t *failed, int *flag)
{
    if (failed != NULL)
        memcpy(failed, a->decision, (size_t)a->n);
    memcpy(flag, a->decision + a->n, 4);
}

int ftw_agree_error(const ftw_agree_t *a)
{
    return a->decision[NOMEM_AT(a)] ? MPI_ERR_NO_MEM : MPI_SUCCESS;
}

void ftw_agree_free(ftw_agree_t *a)
{
    if (a == NULL)
        return;
    ftw_mt_lock(&agree_lock);
    a->owned = 0;
    if (!a->decided) {
        /* Given up (an error in the caller): it answers nobody. */
        for (ftw_agree_t **pp = &all; *pp != NULL; pp = &(*pp)->next) {
            if (*pp == a) {
                *pp = a->next;
                break;
            }
        }
        release(a);
    } else {
        pump_locked(0);
    }
    ftw_mt_unlock(&agree_lock);
}

void ftw_agree_comm_freed(uint64_t id)
{
    struct started *s;
    double now;

    if (id == 0)
        return;
    now = PMPI_Wtime();
    ftw_mt_lock(&agree_lock);
    for (ftw_agree_t *e = all; e != NULL; e = e->next)
        if (e->id == id && e->freed_at == 0)
            e->freed_at = now > 0 ? now : 1e-9;
    HASH_FIND(hh, started_table, &id, sizeof(id), s);
    if (s != NULL) {
        HASH_DEL(started_table, s);
        free(s);
    }
    ftw_mt_unlock(&agree_lock);
}

void ftw_agree_failure_seen(void)
{
    if (ftw_mt_trylock(&agree_lock) != 0)
        return;
    /* The kept ones send their decision to their new children and new
     * parents. */
    if (all != NULL)
        pump_locked(1);
    ftw_mt_unlock(&agree_lock);
}

void ftw_agree_fini(void)
{
    double until = PMPI_Wtime() + 0.3;
    int failures = atomic_load_explicit(&ftw_fail_epoch,
                                        memory_order_acquire) != 0;
    struct started *s, *tmp;

    ftw_mt_lock(&agree_lock);
    /* After failures a member may still ask (one that learned late that
     * its parent failed): answer for a moment. */
    do
        pump_locked(1);
    while (failures && PMPI_Wtime() < until);
    while (all != NULL) {
        ftw_agree_t *a = all;

        all = a->next;
        release(a);
    }
    HASH_ITER(hh, started_table, s, tmp) {
        HASH_DEL(started_table, s);
        free(s);
    }
    ftw_mt_unlock(&agree_lock);
    reserve_release();
}

int ftw_agree_post(ftw_comm_t *c, const uint8_t *failed_in, int flag_in,
                   ftw_agree_t **agree_p)
{
    return ftw_agree_start(c, failed_in, flag_in, agree_p);
}

int ftw_agree_wait(ftw_agree_t *a, uint8_t *failed_out, int *flag_out)
{
    ftw_poll_t p;
    int rc;

    ftw_poll_init(&p);
    while (!ftw_agree_test(a)) {
        ftw_poll_changed(&p);
        ftw_poll_idle(&p);
    }
    ftw_agree_result(a, failed_out, flag_out);
    rc = ftw_agree_error(a);
    ftw_agree_free(a);
    return rc;
}

int ftw_agree(ftw_comm_t *c, const uint8_t *failed_in, int flag_in,
              uint8_t *failed_out, int *flag_out)
{
    ftw_agree_t *a;
    int rc = ftw_agree_post(c, failed_in, flag_in, &a);

    if (rc != MPI_SUCCESS)
        return rc;
    return ftw_agree_wait(a, failed_out, flag_out);
}

int ftw_agree_handler(ftw_comm_t *c, int nfailed, int *flag_out)
{
    ftw_agree_t *a;
    int rc = agree_start(c, NULL, 1, (uint64_t)nfailed, &a);

    if (rc != MPI_SUCCESS)
        return rc;
    /* It only synchronises: a member's shortage changes nothing. */
    ftw_agree_wait(a, NULL, flag_out);
    return MPI_SUCCESS;
}

int ftw_agree_settled(ftw_comm_t *c, int flag_in, int always,
                      uint8_t *failed_out, int *flag_out)
{
    int n = ftw_agree_members(c), rc, ok, need;
    int *world = ftw_agree_malloc(sizeof(int) * (size_t)(n + 1));
    uint8_t *again = ftw_agree_malloc((size_t)n + 1);

    rc = world != NULL && again != NULL ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    if (rc == MPI_SUCCESS)
        ftw_agree_member_list(c, world);
    while (rc == MPI_SUCCESS) {
        rc = ftw_agree(c, NULL, flag_in, failed_out, flag_out);
        if (rc != MPI_SUCCESS)
            break;
        need = always || !*flag_out;
        for (int q = 0; q < n && !need; q++)
            need = failed_out[q] & 1;
        if (!need)
            break;
        ftw_inject(FTW_INJECT_SETTLED);
        /* The survivors' communicator is to be made: first every member
         * says whether all of its members are still live here; one that
         * died since its contribution, or dies before this one's, holds
         * this agreement up and is named by it.  Then again, without. */
        ok = 1;
        for (int q = 0; q < n; q++)
            if (!(failed_out[q] & 1) && ftw_detect_is_failed(world[q]))
                ok = 0;
        rc = ftw_agree(c, NULL, ok, again, &ok);
        for (int q = 0; q < n && rc == MPI_SUCCESS; q++)
            if (!(failed_out[q] & 1) && (again[q] & 1))
                ok = 0;
        if (rc == MPI_SUCCESS && ok)
            break;
        ftw_info("a member of the survivors died before their "
                 "communicator was made: agreeing again");
    }
    free(world);
    free(again);
    return rc;
}
