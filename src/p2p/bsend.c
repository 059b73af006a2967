/* Buffered sends in ftwrap's own attached buffer (see bsend.h). */
#include "p2p/bsend.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftw_mpi_have.h"
#include "core/lock.h"
#include "core/progress.h"
#include "core/raise.h"
#include "op/op.h"
#include "p2p/complete.h"
#include "util/compiler.h"
#include "util/log.h"

#define BS_ALIGN 16     /* each copy starts on this boundary */
#define ROOM_WAIT_SEC 0.05

/* A buffered message still going: its copy's send and where it lies. */
typedef struct {
    MPI_Request req;    /* ftwrap's nonblocking send of the copy */
    size_t off, len;    /* its bytes, from bs.start */
    int posting;        /* the range is being filled and sent */
} bs_msg_t;

/* The attached buffer and the messages in it, ordered by offset. */
static struct {
    pthread_mutex_t lock;
    int attached;
    void *user;         /* as the program attached it */
    MPI_Count user_size;
    char *start;        /* user, rounded up to BS_ALIGN */
    size_t size;        /* from start */
    bs_msg_t *msgs;
    int n, cap;
} bs = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* A persistent buffered send: its arguments, by its request. */
typedef struct bs_init {
    struct bs_init *next;
    MPI_Request req;
    const void *buf;
    MPI_Count count;
    MPI_Datatype dt;
    int dest, tag;
    MPI_Comm comm;
} bs_init_t;

static pthread_mutex_t inits_lock = PTHREAD_MUTEX_INITIALIZER;
static bs_init_t *inits;
static _Atomic int ninits;

static _Atomic int reaping;  /* one thread tests the sends at a time */

/* Take back the space of every message whose send ended, well or in
 * error (a failed peer's: a send only reads its copy).  The sends are
 * tested with no lock held and raising muted: the program's call that
 * buffered a message returned long ago, and a failure handler the test
 * runs may buffer more (it finds the list as it was, and does not reap).
 * A range is found again by its offset, which no other message can take
 * while it is listed. */
static void reap(void)
{
    struct look {
        MPI_Request req;
        size_t off;
        int ended;
    } *snap;
    int n, k;

    if (atomic_exchange_explicit(&reaping, 1, memory_order_acquire))
        return;
    ftw_mt_lock(&bs.lock);
    n = bs.n;
    snap = n > 0 ? malloc((size_t)n * sizeof(*snap)) : NULL;
    for (int i = 0; snap != NULL && i < n; i++)
        snap[i] = (struct look){ bs.msgs[i].req, bs.msgs[i].off,
                                 -bs.msgs[i].posting };
    ftw_mt_unlock(&bs.lock);
    for (int i = 0; snap != NULL && i < n; i++) {
        int flag = 0, rc;

        if (snap[i].ended < 0)
            continue;       /* still being posted */
        ftw_raise_muted++;
        rc = ftw_test(&snap[i].req, &flag, MPI_STATUS_IGNORE);
        ftw_raise_muted--;
        snap[i].ended = flag || rc != MPI_SUCCESS ||
                        snap[i].req == MPI_REQUEST_NULL;
    }
    ftw_mt_lock(&bs.lock);
    k = 0;
    for (int i = 0, j = 0; snap != NULL && i < bs.n; i++) {
        while (j < n && snap[j].off < bs.msgs[i].off)
            j++;
        if (j < n && snap[j].off == bs.msgs[i].off && snap[j].ended > 0)
            continue;
        bs.msgs[k++] = bs.msgs[i];
    }
    if (snap != NULL)
        bs.n = k;
    ftw_mt_unlock(&bs.lock);
    atomic_store_explicit(&reaping, 0, memory_order_release);
    free(snap);
}

static int going(void)
{
    int n;

    ftw_mt_lock(&bs.lock);
    n = bs.n;
    ftw_mt_unlock(&bs.lock);
    return n;
}

/* Wait (watched) until no buffered message is going. */
static void drain(void)
{
    ftw_poll_t p;

    ftw_poll_init(&p);
    for (reap(); going() > 0; reap())
        ftw_poll_idle(&p);
}

/* The first gap of len bytes: the index to insert at, its offset in
 * *off; -1 if none. */
static int gap_locked(size_t len, size_t *off)
{
    size_t end = 0;

    for (int i = 0; i < bs.n; i++) {
        if (bs.msgs[i].off - end >= len) {
            *off = end;
            return i;
        }
        end = bs.msgs[i].off + bs.msgs[i].len;
    }
    if (bs.size - end < len)
        return -1;
    *off = end;
    return bs.n;
}

static int insert_locked(int at, const bs_msg_t *m)
{
    if (bs.n == bs.cap) {
        int cap = bs.cap ? 2 * bs.cap : 16;
        bs_msg_t *p = realloc(bs.msgs, (size_t)cap * sizeof(*p));

        if (p == NULL)
            return MPI_ERR_NO_MEM;
        bs.msgs = p;
        bs.cap = cap;
    }
    memmove(&bs.msgs[at + 1], &bs.msgs[at],
            (size_t)(bs.n - at) * sizeof(*m));
    bs.msgs[at] = *m;
    bs.n++;
    return MPI_SUCCESS;
}

/* The listed message at offset off (it is there). */
static bs_msg_t *find_locked(size_t off)
{
    int lo = 0, hi = bs.n - 1;

    while (lo < hi) {
        int mid = (lo + hi) / 2;

        if (bs.msgs[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return &bs.msgs[lo];
}

int ftw_buffer_attach(void *buf, MPI_Count size, const char *name)
{
    char what[160];
    uintptr_t lead;

    if (size < 0 || (buf == NULL && size > 0)) {
        snprintf(what, sizeof(what), "%s: %s", name, size < 0 ?
                 "the size is negative" : "the buffer is NULL");
        return ftw_raise(MPI_COMM_WORLD, size < 0 ? MPI_ERR_ARG
                                                  : MPI_ERR_BUFFER, what, -1);
    }
    ftw_mt_lock(&bs.lock);
    if (bs.attached) {
        ftw_mt_unlock(&bs.lock);
        snprintf(what, sizeof(what), "%s: a buffer is attached already "
                 "(MPI_Buffer_detach it first)", name);
        return ftw_raise(MPI_COMM_WORLD, MPI_ERR_BUFFER, what, -1);
    }
    lead = (BS_ALIGN - (uintptr_t)buf % BS_ALIGN) % BS_ALIGN;
    bs.attached = 1;
    bs.user = buf;
    bs.user_size = size;
    bs.start = (char *)buf + lead;
    bs.size = (size_t)size > lead ? (size_t)size - lead : 0;
    ftw_mt_unlock(&bs.lock);
    return MPI_SUCCESS;
}

int ftw_buffer_detach(void *addr_p, MPI_Count *size_p, const char *name)
{
    void *user = NULL;
    MPI_Count size = 0;

    if (addr_p == NULL || size_p == NULL) {
        char what[128];

        snprintf(what, sizeof(what), "%s: a NULL argument", name);
        return ftw_raise(MPI_COMM_WORLD, MPI_ERR_ARG, what, -1);
    }
    drain();
    ftw_mt_lock(&bs.lock);
    if (bs.attached) {
        user = bs.user;
        size = bs.user_size;
        bs.attached = 0;
        bs.user = bs.start = NULL;
        bs.user_size = 0;
        bs.size = 0;
    }
    ftw_mt_unlock(&bs.lock);
    memcpy(addr_p, &user, sizeof(user));
    *size_p = size;
    return MPI_SUCCESS;
}

static int pack_size(MPI_Count count, MPI_Datatype dt, MPI_Comm comm,
                     MPI_Count *n)
{
#ifdef FTW_HAVE_MPI_PACK_SIZE_C
    return PMPI_Pack_size_c(count, dt, comm, n);
#else
    int k = 0, rc;

    if (count > INT_MAX)
        return MPI_ERR_COUNT;
    rc = PMPI_Pack_size((int)count, dt, comm, &k);
    *n = k;
    return rc;
#endif
}

/* Pack the message at dst (n bytes there) and send the copy. */
static int pack_send(const void *buf, MPI_Count count, MPI_Datatype dt,
                     int dest, int tag, MPI_Comm comm, char *dst,
                     MPI_Count n, MPI_Request *req)
{
#if defined(FTW_HAVE_MPI_PACK_C) && defined(FTW_HAVE_MPI_ISEND_C)
    MPI_Count pos = 0;
    int rc = PMPI_Pack_c(buf, count, dt, dst, n, &pos, comm);

    if (rc == MPI_SUCCESS)
        rc = MPI_Isend_c(dst, pos, MPI_PACKED, dest, tag, comm, req);
    return rc;
#else
    int pos = 0, rc;

    if (count > INT_MAX || n > INT_MAX)
        return MPI_ERR_COUNT;
    rc = PMPI_Pack(buf, (int)count, dt, dst, (int)n, &pos, comm);
    if (rc == MPI_SUCCESS)
        rc = MPI_Isend(dst, pos, MPI_PACKED, dest, tag, comm, req);
    return rc;
#endif
}

/* Buffer one message: its copy in the attached buffer, sent. */
static int buffer_one(ftw_op_t *op, const void *buf, MPI_Count count,
                      MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    char what[256], *dst;
    MPI_Count n = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    bs_msg_t m, *mp;
    size_t len;
    int at, rc;

    if ((rc = pack_size(count, dt, comm, &n)) != MPI_SUCCESS)
        return rc;
    /* At least one unit, so that every listed range has an offset of
     * its own (a message of 0 bytes too). */
    len = ((size_t)n + BS_ALIGN - 1) / BS_ALIGN * BS_ALIGN;
    if (len == 0)
        len = BS_ALIGN;
    ftw_mt_lock(&bs.lock);
    if (!bs.attached) {
        ftw_mt_unlock(&bs.lock);
        snprintf(what, sizeof(what), "%s: no buffer is attached "
                 "(MPI_Buffer_attach)", op->name);
        return ftw_raise(comm, MPI_ERR_BUFFER, what, -1);
    }
    /* No room: the space of the messages that have gone is taken back,
     * waiting a little for sends that need only this process's progress
     * (the MPIs' own make one progress pass and fail). */
    if ((at = gap_locked(len, &m.off)) < 0) {
        double end = PMPI_Wtime() + ROOM_WAIT_SEC;
        ftw_poll_t p;

        ftw_poll_init(&p);
        do {
            ftw_mt_unlock(&bs.lock);
            reap();
            ftw_mt_lock(&bs.lock);
            at = bs.attached ? gap_locked(len, &m.off) : -1;
            if (at >= 0 || bs.n == 0 || PMPI_Wtime() > end)
                break;
            ftw_mt_unlock(&bs.lock);
            ftw_poll_idle(&p);
            ftw_mt_lock(&bs.lock);
        } while (1);
    }
    if (at < 0) {
        size_t used = 0;

        for (int i = 0; i < bs.n; i++)
            used += bs.msgs[i].len;
        snprintf(what, sizeof(what), "%s: %lld packed bytes do not fit the "
                 "attached buffer (%lld bytes; %zu held by %d buffered "
                 "messages still going)", op->name, (long long)n,
                 (long long)bs.user_size, used, bs.n);
        ftw_mt_unlock(&bs.lock);
        return ftw_raise(comm, MPI_ERR_BUFFER, what, -1);
    }
    /* The range is listed before it is filled: a failure handler that
     * the send runs may buffer messages of its own meanwhile. */
    m.len = len;
    m.req = MPI_REQUEST_NULL;
    m.posting = 1;
    rc = insert_locked(at, &m);
    dst = bs.start + m.off;
    ftw_mt_unlock(&bs.lock);
    if (rc != MPI_SUCCESS)
        return ftw_raise(comm, rc, op->name, -1);
    rc = pack_send(buf, count, dt, dest, tag, comm, dst, n, &req);
    ftw_mt_lock(&bs.lock);
    mp = find_locked(m.off);
    if (rc == MPI_SUCCESS) {
        mp->req = req;
        mp->posting = 0;
    } else {
        at = (int)(mp - bs.msgs);
        memmove(mp, mp + 1, (size_t)(bs.n - at - 1) * sizeof(*mp));
        bs.n--;
    }
    ftw_mt_unlock(&bs.lock);
    return rc;
}

int ftw_bsend(const void *buf, MPI_Count count, MPI_Datatype dt, int dest,
              int tag, MPI_Comm comm, const char *name, MPI_Request *request)
{
    ftw_op_t op;
    int rc;

    ftw_op_begin(&op, name, comm, dest, FTW_OP_SEND);
    if (ftw_op_refused(&op, MPI_STATUS_IGNORE)) {
        if (request != NULL)
            *request = MPI_REQUEST_NULL;
        return op.rc;
    }
    rc = dest == MPI_PROC_NULL ? MPI_SUCCESS
                               : buffer_one(&op, buf, count, dt, dest, tag,
                                            comm);
    /* An MPI_Ibsend is complete once its message is buffered. */
    if (request != NULL)
        *request = MPI_REQUEST_NULL;
    if (rc == MPI_SUCCESS && request != NULL)
        rc = PMPI_Isend(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_SELF,
                        request);
    return rc;
}

int ftw_bsend_init(const void *buf, MPI_Count count, MPI_Datatype dt,
                   int dest, int tag, MPI_Comm comm, const char *name,
                   MPI_Request *request)
{
    bs_init_t *b;
    ftw_op_t op;
    int rc;

    ftw_op_begin(&op, name, comm, dest, FTW_OP_SEND);
    if (ftw_op_refused(&op, MPI_STATUS_IGNORE)) {
        *request = MPI_REQUEST_NULL;
        return op.rc;
    }
    if ((b = malloc(sizeof(*b))) == NULL)
        return ftw_raise(comm, MPI_ERR_NO_MEM, name, -1);
    /* Its starts complete at once: each buffers the message
     * (ftw_bsend_started). */
    rc = PMPI_Send_init(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_SELF,
                        request);
    if (rc != MPI_SUCCESS) {
        free(b);
        return rc;
    }
    *b = (bs_init_t){ .req = *request, .buf = buf, .count = count,
                      .dt = dt, .dest = dest, .tag = tag, .comm = comm };
    ftw_mt_lock(&inits_lock);
    b->next = inits;
    inits = b;
    atomic_fetch_add_explicit(&ninits, 1, memory_order_relaxed);
    ftw_mt_unlock(&inits_lock);
    return MPI_SUCCESS;
}

int ftw_bsend_started(int n, const MPI_Request reqs[], const char *name)
{
    if (ftw_likely(atomic_load_explicit(&ninits,
                                        memory_order_relaxed) == 0))
        return MPI_SUCCESS;
    for (int i = 0; i < n; i++) {
        bs_init_t a = { .req = MPI_REQUEST_NULL };
        int rc;

        ftw_mt_lock(&inits_lock);
        for (const bs_init_t *b = inits; b != NULL; b = b->next)
            if (b->req == reqs[i] && reqs[i] != MPI_REQUEST_NULL) {
                a = *b;
                break;
            }
        ftw_mt_unlock(&inits_lock);
        if (a.req != MPI_REQUEST_NULL &&
            (rc = ftw_bsend(a.buf, a.count, a.dt, a.dest, a.tag, a.comm,
                            name, NULL)) != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

void ftw_bsend_forget(MPI_Request req)
{
    bs_init_t **pp;

    if (ftw_likely(atomic_load_explicit(&ninits,
                                        memory_order_relaxed) == 0))
        return;
    ftw_mt_lock(&inits_lock);
    for (pp = &inits; *pp != NULL; pp = &(*pp)->next)
        if ((*pp)->req == req) {
            bs_init_t *b = *pp;

            *pp = b->next;
            free(b);
            atomic_fetch_sub_explicit(&ninits, 1, memory_order_relaxed);
            break;
        }
    ftw_mt_unlock(&inits_lock);
}

void ftw_bsend_fini(void)
{
    drain();
    ftw_mt_lock(&bs.lock);
    free(bs.msgs);
    bs.msgs = NULL;
    bs.n = bs.cap = 0;
    ftw_mt_unlock(&bs.lock);
    ftw_mt_lock(&inits_lock);
    while (inits != NULL) {
        bs_init_t *b = inits;

        inits = b->next;
        free(b);
    }
    atomic_store_explicit(&ninits, 0, memory_order_relaxed);
    ftw_mt_unlock(&inits_lock);
}
