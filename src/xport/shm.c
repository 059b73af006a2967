/*
 * The shm transport: a receiver-driven pipelined pull through a segment
 * per (sender, receiver) pair.  The receiver writes requests (an address
 * range of the message and a request number) into the slots of the
 * segment; the sender, from inside its own MPI calls (its FIN wait, any
 * progress pass), copies each requested fragment of its buffer into the
 * slot and answers with the request number; the receiver copies the
 * fragment out and asks for the next one in that slot.  With several
 * slots both copies run at once, on two cores, through memory that stays
 * in cache.
 *
 * Push slots: the sender also copies messages its receiver has not
 * asked for yet, oldest first, into slots of their own, from the same
 * progress calls; the receiver's pull copies out what they hold of its
 * message before it asks for the rest.  In a window of sends the
 * sender then copies the next message in while the receiver copies
 * this one out, where each message would otherwise wait for its own
 * request.
 *
 * The segment is a memfd the sender creates for one receiver, announced
 * by its fd number in the RTS; the receiver takes a duplicate with
 * pidfd_getfd and maps it.  A memfd rather than shm_open: the segment
 * never has a name, so nothing can be left in /dev/shm whichever side is
 * killed at whatever moment (a named segment exists from its creation
 * until both sides have mapped and unlinked it, and a SIGKILL in that
 * window leaves the file), and no extra message is needed to say that a
 * segment exists.  pidfd_getfd needs the same ptrace permission as
 * process_vm_readv, which the cma probe checks, plus Linux 5.6, checked
 * once by a real duplicate of one of this process's own descriptors.
 *
 * Split pulls (FTW_SHM_PULL=split): one copy, shared by the two
 * processes.  The receiver describes the pull in the segment (sender
 * range, its own destination and pid, chunk size) and both sides take
 * chunks from one counter there: the receiver reads its chunks with
 * process_vm_readv, the sender, from the same progress calls that serve
 * the slots, writes its chunks straight into the receiver's destination
 * with process_vm_writev.  A sender that is not in an MPI call helps
 * with nothing and costs nothing: the receiver takes every chunk itself
 * and never waits for a chunk nobody claimed.  It waits only for chunks
 * the sender claimed, which it is copying now (or it died: the detector
 * ends the wait).  A pull number in the counter's high half and a
 * seqlock over the description keep a sender that read an old
 * description from claiming a chunk of a newer pull.
 *
 * Safety: the sender copies only from ranges it exposed for that
 * receiver (ftw_xport_ops_t.expose) and still exposes; a request for
 * anything else gets an error answer, never a read of freed memory.  The
 * receiver only ever reads the segment.  Flags are C11 atomics: the
 * request number is published with release after its range, and the
 * answer with release after the data; each side reads with acquire.
 */
#define _GNU_SOURCE
#include "xport/xport.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "detect/detect.h"
#include "util/config.h"
#include "util/log.h"
#include "util/stats.h"

#define SHM_MAGIC 0x66747773686d3033ull     /* "ftwshm03" */
#define SHM_LINE 64
#define SHM_MAX_SLOTS 64
#define SHM_MAX_PUSH 64
#define SHM_PUSH_FRAG 65536     /* bytes of a push slot, at most */
#define SHM_SPINS_BEFORE_YIELD 20000
#define SHM_SERVE_LINGER 256    /* idle scans a busy server waits on */
#define SHM_MIN_FRAG 16384
#define SHM_STALL_MS 0.2        /* a silent sender: read it with cma */
#define SHM_COOL_MIN_MS 1.0     /* and keep to cma with it that long, */
#define SHM_COOL_MAX_MS 100.0   /* twice as long after each stall in a row */

/* One slot: the receiver's line (request) and the sender's (answer). */
typedef struct {
    _Alignas(SHM_LINE) _Atomic uint64_t req;   /* request number */
    uint64_t addr;                              /* range asked for */
    uint64_t len;
    _Alignas(SHM_LINE) _Atomic uint64_t done;  /* request answered */
    int64_t status;                             /* ftw_status_t */
} shm_slot_t;

/* A push slot: a fragment of a message the sender copied in before its
 * receiver asked.  Only the sender takes an EMPTY slot
 * (EMPTY -> FILLING -> FULL, under shm_lock); the receiver takes a FULL
 * one to copy out (FULL -> READING -> EMPTY); the sender empties a FULL
 * one whose send ended unread (FULL -> EMPTY).  addr and len change only
 * while the sender holds the slot FILLING. */
enum { PUSH_EMPTY, PUSH_FILLING, PUSH_FULL, PUSH_READING };

typedef struct {
    _Alignas(SHM_LINE) _Atomic uint64_t state; /* PUSH_* */
    _Atomic uint64_t addr;                      /* the sender's range */
    _Atomic uint64_t len;
} shm_push_t;

#define SPLIT_IDX_MASK 0xffffffffull   /* claim: chunk index bits */
#define SPLIT_HELP_ERR (1ull << 62)     /* helped: a sender write failed */

/* A split pull's description and counters (one pull at a time per
 * segment: the receiver's busy flag).  The receiver writes the
 * description between setting pull to 0 and to its number (a seqlock);
 * claim holds the pull number and the next chunk to take. */
typedef struct {
    _Alignas(SHM_LINE) _Atomic uint64_t claim;  /* pull << 32 | next chunk */
    _Alignas(SHM_LINE) _Atomic uint64_t pull;   /* 0 while being written */
    _Atomic uint64_t src, dst, len, chunk;      /* sender range, receiver dst */
    _Atomic int64_t dpid;                       /* the receiver's pid */
    _Alignas(SHM_LINE) _Atomic uint64_t helped; /* chunks the sender wrote */
} shm_split_t;

/* The head of a segment; the slots' data follow at data_off. */
typedef struct {
    uint64_t magic;
    int32_t pid;            /* the sender's */
    int32_t peer;           /* the receiver's world rank */
    uint64_t frag;          /* data bytes per slot */
    uint64_t nslots;
    uint64_t npush;         /* push slots, their data after the slots' */
    uint64_t pfrag;         /* data bytes per push slot */
    uint64_t data_off;
    shm_split_t split;
    shm_push_t push[SHM_MAX_PUSH];
    shm_slot_t slot[];
} shm_hdr_t;

/* A range a sender exposes to one receiver, while owner lives. */
typedef struct {
    uint64_t addr, len;
    const void *owner;
    uint64_t seq;           /* exposed as the seq-th to this receiver */
    uint64_t pushed;        /* bytes from addr copied to push slots */
    uint64_t push_end;      /* and how many may be: len if the push
                             * slots hold it whole, else 0 */
} shm_expo_t;

/* This process's side of one segment. */
typedef struct {
    shm_hdr_t *hdr;
    size_t maplen;
    int fd;                 /* out: the memfd; in: unused (-1) */
    int peer;
    int32_t key, pid;       /* in: the sender's fd number and pid */
    uint64_t seq;           /* in: the last request number issued */
    uint64_t split_seq;     /* in: the last split pull's number */
    uint64_t split_idle;    /* out: claim word last seen with nothing to do */
    int split_refused;      /* out: writes to the receiver are refused */
    double cma_until;       /* in: pulls wait for no answer until then
                             * (now_ms; split pulls use cma) */
    unsigned stalls;        /* in: stalls since the last full shm pull */
    shm_expo_t *expo;       /* out: exposed ranges */
    int nexpo, capexpo;
    int unpushed;           /* out: ranges with pushed < push_end */
    uint64_t expo_seq;      /* out: ranges exposed so far */
    const void *push_owner[SHM_MAX_PUSH];  /* out: whose range each holds */
    atomic_flag busy;       /* in: a pull is using it */
} shm_seg_t;

_Atomic int ftw_xport_shm_exposed;

static pthread_mutex_t shm_lock = PTHREAD_MUTEX_INITIALIZER;
static shm_seg_t **out_seg, **in_seg;   /* [world size], lazily */
static int *out_list, out_n;            /* peers with an out segment */
static int shm_npeers;
static int getfd_ok = -1;               /* pidfd_getfd works: 1, 0 */

static int pidfd_open_(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int pidfd_getfd_(int pidfd, int fd)
{
    return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* The per-peer tables, allocated on first use (shm_lock held). */
static ftw_status_t shm_tables(void)
{
    if (out_seg != NULL)
        return FTW_OK;
    shm_npeers = ftw_detect_world_size();
    out_seg = calloc((size_t)shm_npeers, sizeof(*out_seg));
    in_seg = calloc((size_t)shm_npeers, sizeof(*in_seg));
    out_list = calloc((size_t)shm_npeers, sizeof(*out_list));
    if (out_seg == NULL || in_seg == NULL || out_list == NULL) {
        free(out_seg);
        free(in_seg);
        free(out_list);
        out_seg = in_seg = NULL;
        out_list = NULL;
        ftw_error("out of memory for the shm tables of %d peers",
                  shm_npeers);
        return FTW_ST_NO_MEMORY;
    }
    return FTW_OK;
}

/* Once: does pidfd_getfd work here (kernel, seccomp)?  A real duplicate
 * of one of this process's own descriptors. */
static int shm_getfd_works(void)
{
    int pfd, fd, probe;

    if (getfd_ok >= 0)
        return getfd_ok;
    getfd_ok = 0;
    probe = memfd_create("ftw-shm-probe", MFD_CLOEXEC);
    pfd = pidfd_open_(getpid());
    fd = pfd >= 0 && probe >= 0 ? pidfd_getfd_(pfd, probe) : -1;
    if (fd >= 0) {
        getfd_ok = 1;
        close(fd);
    } else {
        ftw_info("pidfd_getfd does not work here (%m): no shm transport");
    }
    if (pfd >= 0)
        close(pfd);
    if (probe >= 0)
        close(probe);
    return getfd_ok;
}

/* The pipeline's fragment, and the push slots' number and size, as this
 * process's configuration sets them. */
static size_t cfg_frag(void)
{
    size_t frag = (ftw_cfg.shm_frag + SHM_LINE - 1) & ~(size_t)(SHM_LINE - 1);

    return frag < 4096 ? 4096 : frag;
}

static size_t cfg_push(size_t *pfrag)
{
    /* Split pulls make one copy; a push is a second. */
    size_t npush = ftw_cfg.shm_push < 0 ||
                   ftw_cfg.shm_pull == FTW_SHM_PULL_SPLIT ? 0
                                                          : (size_t)ftw_cfg.shm_push;

    /* Push slots smaller than the pipeline's: the receiver copies out
     * one while the sender fills the next, also within a message, and
     * what cycles through them stays in cache. */
    *pfrag = cfg_frag() < SHM_PUSH_FRAG ? cfg_frag() : SHM_PUSH_FRAG;
    return npush > SHM_MAX_PUSH ? SHM_MAX_PUSH : npush;
}

uint64_t ftw_xport_shm_push_bytes(void)
{
    size_t pfrag, npush = cfg_push(&pfrag);

    return (uint64_t)npush * pfrag;
}

/* The sender's segment for peer: a memfd of nslots * frag data bytes,
 * then npush * pfrag for the push slots. */
static shm_seg_t *seg_create(int peer)
{
    size_t frag = cfg_frag();
    size_t nslots = (size_t)ftw_cfg.shm_slots;
    size_t pfrag, npush = cfg_push(&pfrag), off;
    shm_seg_t *s = calloc(1, sizeof(*s));

    nslots = nslots < 1 ? 1 : nslots > SHM_MAX_SLOTS ? SHM_MAX_SLOTS : nslots;
    off = sizeof(shm_hdr_t) + nslots * sizeof(shm_slot_t);

    off = (off + 4095) & ~(size_t)4095;
    if (s == NULL)
        goto err;
    s->maplen = off + nslots * frag + npush * pfrag;
    s->fd = memfd_create("ftw-shm", MFD_CLOEXEC);
    if (s->fd < 0 || ftruncate(s->fd, (off_t)s->maplen) < 0) {
        ftw_error("memfd of %zu bytes for world rank %d: %m", s->maplen,
                  peer);
        goto err_close;
    }
    s->hdr = mmap(NULL, s->maplen, PROT_READ | PROT_WRITE, MAP_SHARED,
                  s->fd, 0);
    if (s->hdr == MAP_FAILED) {
        ftw_error("mmap of the shm segment for world rank %d: %m", peer);
        goto err_close;
    }
    *s->hdr = (shm_hdr_t){ .magic = SHM_MAGIC, .pid = (int32_t)getpid(),
                           .peer = peer, .frag = frag, .nslots = nslots,
                           .npush = npush, .pfrag = pfrag,
                           .data_off = off };
    /* Write every page now (MAP_POPULATE would map a shared mapping
     * read-only): the first write into each page of a slot would take a
     * fault of its own while a receiver waits for that fragment (on
     * this kind of host about 6 us a page, 0.4 ms for a 256 KiB slot,
     * long enough to count as a stalled sender). */
    for (size_t pg = 4096; pg < s->maplen; pg += 4096)
        ((volatile char *)s->hdr)[pg] = 0;
    s->peer = peer;
    return s;

err_close:
    if (s->fd >= 0)
        close(s->fd);
err:
    free(s);
    return NULL;
}

/* Empty the push slots that hold owner's range unread (its send ended:
 * the bytes may change from now on).  One the receiver is copying out
 * now it empties itself. */
static void push_reclaim(shm_seg_t *s, const void *owner)
{
    for (uint64_t i = 0; i < s->hdr->npush; i++) {
        uint64_t full = PUSH_FULL;

        if (s->push_owner[i] != owner)
            continue;
        s->push_owner[i] = NULL;
        atomic_compare_exchange_strong_explicit(&s->hdr->push[i].state,
                                                &full, PUSH_EMPTY,
                                                memory_order_acq_rel,
                                                memory_order_relaxed);
    }
}

static ftw_status_t shm_expose(int peer, uint64_t addr, size_t len,
                               const void *owner, int32_t *key_p)
{
    ftw_status_t st = FTW_ST_NO_MEMORY;
    uint64_t push_end;
    shm_seg_t *s;

    pthread_mutex_lock(&shm_lock);
    if (shm_tables() != FTW_OK || peer < 0 || peer >= shm_npeers)
        goto out;
    s = out_seg[peer];
    if (s == NULL && (s = seg_create(peer)) != NULL) {
        out_seg[peer] = s;
        out_list[out_n++] = peer;
    }
    if (s == NULL)
        goto out;
    if (s->nexpo == s->capexpo) {
        int cap = s->capexpo ? 2 * s->capexpo : 8;
        shm_expo_t *e = realloc(s->expo, sizeof(*e) * (size_t)cap);

        if (e == NULL)
            goto out;
        s->expo = e;
        s->capexpo = cap;
    }
    /* A message the push slots hold whole: a larger one goes as fast
     * through the pipeline, which its receiver drives (its first
     * fragments pushed cost that pipeline its cache). */
    push_end = s->hdr->npush * s->hdr->pfrag;
    s->expo[s->nexpo++] = (shm_expo_t){
        .addr = addr, .len = len, .owner = owner, .seq = s->expo_seq++,
        .push_end = len <= push_end ? len : 0 };
    s->unpushed += s->expo[s->nexpo - 1].push_end > 0;
    ftw_xport_exposed_add(&ftw_xport_shm_exposed, 1);
    *key_p = s->fd;
    st = FTW_OK;
out:
    pthread_mutex_unlock(&shm_lock);
    return st;
}

static void shm_release(const void *owner)
{
    if (atomic_load_explicit(&ftw_xport_shm_exposed,
                             memory_order_relaxed) == 0)
        return;
    pthread_mutex_lock(&shm_lock);
    for (int i = 0; i < out_n; i++) {
        shm_seg_t *s = out_seg[out_list[i]];

        for (int j = 0; j < s->nexpo; j++) {
            if (s->expo[j].owner != owner)
                continue;
            s->unpushed -= s->expo[j].pushed < s->expo[j].push_end;
            push_reclaim(s, owner);
            s->expo[j] = s->expo[--s->nexpo];
            ftw_xport_exposed_add(&ftw_xport_shm_exposed, -1);
            goto out;
        }
    }
out:
    pthread_mutex_unlock(&shm_lock);
}

/* The range of s that holds [addr, addr + len), or NULL. */
static shm_expo_t *seg_exposes(shm_seg_t *s, uint64_t addr, uint64_t len)
{
    for (int j = 0; j < s->nexpo; j++) {
        shm_expo_t *e = &s->expo[j];

        if (addr >= e->addr && len <= e->len && addr - e->addr <= e->len - len)
            return e;
    }
    return NULL;
}

/* The receiver asks for e's bytes itself: no more of it to push slots. */
static void expo_asked(shm_seg_t *s, shm_expo_t *e)
{
    if (e->pushed < e->push_end) {
        e->pushed = e->push_end;
        s->unpushed--;
    }
}

/* Answer every request waiting in s; the number answered. */
static int seg_serve(shm_seg_t *s)
{
    shm_hdr_t *h = s->hdr;
    char *data = (char *)h + h->data_off;
    int n = 0;

    for (uint64_t i = 0; i < h->nslots; i++) {
        shm_slot_t *sl = &h->slot[i];
        uint64_t r = atomic_load_explicit(&sl->req, memory_order_acquire);
        uint64_t addr, len;
        shm_expo_t *e;

        if (r == atomic_load_explicit(&sl->done, memory_order_relaxed))
            continue;
        /* Read once: a receiver that gave up on this request may be
         * writing the next one; what is checked is what is copied. */
        addr = sl->addr;
        len = sl->len;
        if (len <= h->frag && (e = seg_exposes(s, addr, len)) != NULL) {
            expo_asked(s, e);
            memcpy(data + i * h->frag, (const void *)(uintptr_t)addr, len);
            sl->status = FTW_OK;
        } else {
            sl->status = FTW_ST_IO_ERROR;
        }
        atomic_store_explicit(&sl->done, r, memory_order_release);
        n++;
    }
    return n;
}

/* Copy the next fragment of the oldest range of s not all pushed into a
 * free push slot, ahead of its receiver's asking: 1 if one was copied. */
static int seg_push(shm_seg_t *s)
{
    shm_hdr_t *h = s->hdr;
    shm_expo_t *e = NULL;
    shm_push_t *p;
    uint64_t i, n;

    if (s->unpushed == 0)
        return 0;
    for (i = 0; i < h->npush; i++)
        if (atomic_load_explicit(&h->push[i].state, memory_order_acquire) ==
            PUSH_EMPTY)
            break;
    if (i == h->npush)
        return 0;
    p = &h->push[i];
    for (int j = 0; j < s->nexpo; j++)
        if (s->expo[j].pushed < s->expo[j].push_end &&
            (e == NULL || s->expo[j].seq < e->seq))
            e = &s->expo[j];
    if (e == NULL) {
        s->unpushed = 0;
        return 0;
    }
    n = e->push_end - e->pushed < h->pfrag ? e->push_end - e->pushed
                                            : h->pfrag;
    atomic_store_explicit(&p->state, PUSH_FILLING, memory_order_relaxed);
    atomic_store_explicit(&p->addr, e->addr + e->pushed, memory_order_relaxed);
    atomic_store_explicit(&p->len, n, memory_order_relaxed);
    memcpy((char *)h + h->data_off + h->nslots * h->frag + i * h->pfrag,
           (const void *)(uintptr_t)(e->addr + e->pushed), n);
    s->push_owner[i] = e->owner;
    atomic_store_explicit(&p->state, PUSH_FULL, memory_order_release);
    e->pushed += n;
    s->unpushed -= e->pushed == e->push_end;
    return 1;
}

/* A split pull's description, read under its seqlock: 0 if the pull
 * number changed meanwhile (a newer pull is being described). */
static int split_read(shm_split_t *sp, uint64_t p, uint64_t d[5])
{
    if (atomic_load_explicit(&sp->pull, memory_order_acquire) != p)
        return 0;
    /* Acquire loads: the pull number's second load cannot pass them,
     * and a field already rewritten shows the writer's 0 there. */
    d[0] = atomic_load_explicit(&sp->src, memory_order_acquire);
    d[1] = atomic_load_explicit(&sp->dst, memory_order_acquire);
    d[2] = atomic_load_explicit(&sp->len, memory_order_acquire);
    d[3] = atomic_load_explicit(&sp->chunk, memory_order_acquire);
    d[4] = (uint64_t)atomic_load_explicit(&sp->dpid, memory_order_acquire);
    return atomic_load_explicit(&sp->pull, memory_order_relaxed) == p &&
           d[3] != 0;
}

/* Write len bytes at addr here to pid's dst (the receiver of a split
 * pull), looping on partial writes.  The system call itself, as cma's
 * read: the libc name is ftwrap's cut-copy interposer. */
static int split_write(int64_t pid, uint64_t dst, uint64_t addr,
                       uint64_t len)
{
    uint64_t done = 0;

    while (done < len) {
        struct iovec l = { (void *)(uintptr_t)(addr + done), len - done };
        struct iovec r = { (void *)(uintptr_t)(dst + done), len - done };
        ssize_t n = syscall(SYS_process_vm_writev, (pid_t)pid, &l, 1, &r, 1,
                            0UL);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : EFAULT;
        done += (uint64_t)n;
    }
    return 0;
}

/* Take and write chunks of the split pull in s while there are any; the
 * number written.  A chunk outside what s exposes is refused (the
 * receiver then reads the whole message again itself). */
static int split_serve(shm_seg_t *s)
{
    shm_split_t *sp = &s->hdr->split;
    int n = 0;

    for (;;) {
        uint64_t c = atomic_load_explicit(&sp->claim, memory_order_acquire);
        uint64_t d[5], k = c & SPLIT_IDX_MASK, off, len;
        shm_expo_t *e;
        int err = EFAULT;

        if (c == s->split_idle || s->split_refused)
            return n;
        if (!split_read(sp, c >> 32, d) || k >= (d[2] + d[3] - 1) / d[3]) {
            s->split_idle = c;
            return n;
        }
        if (!atomic_compare_exchange_weak_explicit(&sp->claim, &c, c + 1,
                                                   memory_order_acq_rel,
                                                   memory_order_relaxed))
            continue;
        off = k * d[3];
        len = d[2] - off < d[3] ? d[2] - off : d[3];
        if ((e = seg_exposes(s, d[0] + off, len)) != NULL) {
            expo_asked(s, e);
            err = split_write((int64_t)d[4], d[1] + off, d[0] + off, len);
        }
        if (err != 0 && err != ESRCH) {
            errno = err;
            ftw_warn_sparse("process_vm_writev to world rank %d: %m; it "
                            "reads the message itself", s->peer);
            /* No permission (Yama, another user): it stays so. */
            s->split_refused = err == EPERM;
        }
        if (err == 0)
            ftw_stat_add(FTW_STAT_RNDV_SHM_HELPED, len);
        if (err != 0)
            atomic_fetch_or_explicit(&sp->helped, SPLIT_HELP_ERR,
                                     memory_order_relaxed);
        atomic_fetch_add_explicit(&sp->helped, 1, memory_order_release);
        n++;
    }
}

/* A sender's segment whose receiver failed: nobody will ask again. */
static void seg_drop_out(int i)
{
    shm_seg_t *s = out_seg[out_list[i]];

    ftw_xport_exposed_add(&ftw_xport_shm_exposed, -s->nexpo);
    out_seg[out_list[i]] = NULL;
    out_list[i] = out_list[--out_n];
    munmap(s->hdr, s->maplen);
    close(s->fd);
    free(s->expo);
    free(s);
}

void ftw_xport_shm_serve(void)
{
    int idle = 0, asked = 0;

    if (pthread_mutex_trylock(&shm_lock) != 0)
        return;     /* another thread serves */
    /* While a receiver is pulling, stay: its next request comes as soon
     * as it has copied a fragment out.  Without one, fill the free push
     * slots and go: lingering then would hold up a sender posting a
     * window of sends, whose next RTS is what its receiver waits for. */
    while (idle < SHM_SERVE_LINGER) {
        int n = 0, pushed = 0;

        for (int i = 0; i < out_n; i++) {
            shm_seg_t *s;
            int m;

            if (ftw_detect_is_failed(out_list[i])) {
                seg_drop_out(i--);
                continue;
            }
            s = out_seg[out_list[i]];
            m = seg_serve(s) + split_serve(s);
            /* Asked-for fragments first: a receiver waits for them. */
            n += m;
            if (m == 0)
                pushed += seg_push(s);
        }
        if (n > 0) {
            idle = 0;
            asked = 1;
        } else if (pushed > 0) {
            continue;
        } else if (!asked || atomic_load_explicit(&ftw_xport_shm_exposed,
                                                  memory_order_relaxed) == 0) {
            break;
        } else {
            idle++;
            cpu_relax();
        }
    }
    pthread_mutex_unlock(&shm_lock);
}

/* ---- receiver ----------------------------------------------------------- */

/* Map the segment the sender src announced (its fd src->key). */
static ftw_status_t seg_attach(const ftw_xport_src_t *src, shm_seg_t **s_p)
{
    shm_seg_t *s;
    struct stat sb;
    int pfd, fd;

    pfd = pidfd_open_(src->pid);
    fd = pfd >= 0 ? pidfd_getfd_(pfd, src->key) : -1;
    if (fd < 0) {
        int err = errno;

        if (pfd >= 0)
            close(pfd);
        if (err == ESRCH || ftw_detect_is_failed(src->world))
            return FTW_ST_PEER_FAILED;
        errno = err;
        ftw_warn_sparse("pidfd_getfd of world rank %d's segment: %m",
                        src->world);
        return FTW_ST_UNSUPPORTED;
    }
    close(pfd);
    s = calloc(1, sizeof(*s));
    if (s == NULL || fstat(fd, &sb) < 0 || sb.st_size < (off_t)sizeof(*s->hdr))
        goto err_close;
    s->maplen = (size_t)sb.st_size;
    /* Populated: the receiver's first copies out of the slots take no
     * fault per page. */
    s->hdr = mmap(NULL, s->maplen, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_POPULATE, fd, 0);
    if (s->hdr == MAP_FAILED)
        goto err_close;
    close(fd);
    if (s->hdr->magic != SHM_MAGIC || s->hdr->pid != src->pid ||
        s->hdr->nslots == 0 || s->hdr->nslots > SHM_MAX_SLOTS ||
        s->hdr->npush > SHM_MAX_PUSH || s->hdr->pfrag > s->hdr->frag ||
        (s->hdr->npush != 0 && s->hdr->pfrag == 0) ||
        s->hdr->data_off + s->hdr->nslots * s->hdr->frag +
        s->hdr->npush * s->hdr->pfrag > s->maplen) {
        ftw_warn_sparse("world rank %d's fd %d is no shm segment",
                        src->world, src->key);
        munmap(s->hdr, s->maplen);
        free(s);
        return FTW_ST_IO_ERROR;
    }
    s->fd = -1;
    s->peer = src->world;
    s->key = src->key;
    s->pid = src->pid;
    for (uint64_t i = 0; i < s->hdr->nslots; i++) {
        uint64_t r = atomic_load_explicit(&s->hdr->slot[i].req,
                                          memory_order_relaxed);
        s->seq = r > s->seq ? r : s->seq;
    }
    s->split_seq = atomic_load_explicit(&s->hdr->split.claim,
                                        memory_order_relaxed) >> 32;
    atomic_flag_clear(&s->busy);
    *s_p = s;
    return FTW_OK;

err_close:
    ftw_warn_sparse("cannot map world rank %d's shm segment: %m",
                    src->world);
    free(s);
    close(fd);
    return FTW_ST_IO_ERROR;
}

/* The receiver's segment from src, mapped on first use, and held for
 * one pull (busy, taken under shm_lock, which a drop of the segment
 * also holds): FTW_ST_UNSUPPORTED if another thread pulls from src. */
static ftw_status_t seg_in(const ftw_xport_src_t *src, shm_seg_t **s_p)
{
    shm_seg_t *s;
    ftw_status_t st;

    pthread_mutex_lock(&shm_lock);
    st = shm_tables();
    if (st == FTW_OK && (src->world < 0 || src->world >= shm_npeers))
        st = FTW_ST_INVALID_PARAM;
    if (st != FTW_OK)
        goto out;
    s = in_seg[src->world];
    if (s != NULL && (s->key != src->key || s->pid != src->pid)) {
        st = FTW_ST_IO_ERROR;   /* a sender has one segment for us */
        goto out;
    }
    if (s == NULL) {
        st = seg_attach(src, &s);
        if (st != FTW_OK)
            goto out;
        in_seg[src->world] = s;
    }
    if (atomic_flag_test_and_set_explicit(&s->busy, memory_order_acquire)) {
        st = FTW_ST_UNSUPPORTED;    /* another thread pulls: use cma */
        goto out;
    }
    *s_p = s;
out:
    pthread_mutex_unlock(&shm_lock);
    return st;
}

/* Ask for fragment k (of fsz bytes) of the pull of len bytes at addr. */
static void frag_ask(shm_seg_t *s, uint64_t k, uint64_t fsz, uint64_t addr,
                     size_t len)
{
    shm_slot_t *sl = &s->hdr->slot[k % s->hdr->nslots];
    uint64_t off = k * fsz;

    sl->addr = addr + off;
    sl->len = len - off < fsz ? len - off : fsz;
    atomic_store_explicit(&sl->req, ++s->seq, memory_order_release);
}

/* Fragment size for a pull of len bytes: small enough that every slot
 * has work (a message of one fragment would not overlap the copies), at
 * most a slot. */
static uint64_t frag_size(const shm_hdr_t *h, size_t len)
{
    uint64_t f = (len / h->nslots + 4095) & ~(uint64_t)4095;

    f = f < SHM_MIN_FRAG ? SHM_MIN_FRAG : f;
    return f < h->frag ? f : h->frag;
}

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* One turn of a receiver's wait for its sender: serve this process's
 * own receivers now and then, yield the core after a long wait. */
static void wait_turn(unsigned spins)
{
    if ((spins & 15) == 0 &&
        atomic_load_explicit(&ftw_xport_shm_exposed,
                             memory_order_relaxed) != 0)
        ftw_xport_shm_serve();
    if (spins > SHM_SPINS_BEFORE_YIELD && (spins & 15) == 0)
        sched_yield();
    else
        cpu_relax();
}

/* The sender answered nothing for SHM_STALL_MS: for a while the pulls
 * from it wait for no answer (seg_pull reads the fragments it has not
 * answered with cma; split pulls use cma), the longer the more stalls
 * came in a row, and until it answers again.  One stall
 * is mostly a moment without a core (a timer, another thread); a sender
 * computing outside MPI stalls every pull, and soon costs one wait per
 * SHM_COOL_MAX_MS. */
static void seg_stalled(shm_seg_t *s)
{
    double cool = SHM_COOL_MIN_MS;

    for (unsigned i = 0; i < s->stalls && cool < SHM_COOL_MAX_MS; i++)
        cool *= 2;
    s->cma_until = now_ms() + (cool < SHM_COOL_MAX_MS ? cool
                                                      : SHM_COOL_MAX_MS);
    s->stalls++;
    ftw_stat_add(FTW_STAT_RNDV_SHM_STALLS, 1);
}

/* Whether the pulls from s's sender still cool after a stall. */
static int seg_cooling(const shm_seg_t *s)
{
    return s->cma_until != 0 && now_ms() < s->cma_until;
}

/* Wait for the answer to request number want in sl, watching the
 * sender and serving this process's own receivers meanwhile.  A sender
 * that answers nothing for SHM_STALL_MS is not copying now: it is
 * outside the MPI calls ftwrap drives (it computes, or waits in a call
 * passed straight to the MPI), or it has no core (a loaded host, where
 * the pipeline, which needs both processes running, is slower than one
 * copy).  FTW_ST_UNSUPPORTED then: the caller reads with cma, which
 * needs no help from the sender, what the sender has not answered, and
 * so do the pulls from that sender for the next SHM_COOL_MS. */
static ftw_status_t frag_wait(shm_seg_t *s, shm_slot_t *sl, uint64_t want)
{
    unsigned spins = 0;
    double t0 = 0;

    while (atomic_load_explicit(&sl->done, memory_order_acquire) != want) {
        if ((++spins & 255) == 0) {
            ftw_detect_peek();
            if (ftw_detect_is_failed(s->peer))
                return FTW_ST_PEER_FAILED;
        }
        if ((spins & 63) == 0) {
            if (t0 == 0) {
                t0 = now_ms();
            } else if (now_ms() - t0 > SHM_STALL_MS) {
                seg_stalled(s);
                return FTW_ST_UNSUPPORTED;
            }
        }
        wait_turn(spins);
    }
    return (ftw_status_t)sl->status;
}

/* Fault injection as cma pulls are chunked: once for each
 * FTW_RNDV_CHUNK boundary in the fragment at off (fsz bytes of len). */
static void frag_inject(const ftw_xport_src_t *src, uint64_t off,
                        uint64_t fsz, uint64_t len)
{
    uint64_t chunk = ftw_cfg.rndv_chunk ? ftw_cfg.rndv_chunk : len;
    uint64_t end = off + fsz < len ? off + fsz : len;

    for (uint64_t c = (off + chunk - 1) / chunk * chunk; c < end; c += chunk) {
        ftw_inject(FTW_INJECT_PULL);
        ftw_inject_pulled(src->world, src->pid);
    }
}

/* The rest of a pull, from off, with cma, chunk by chunk as cma pulls
 * are: a fault injected at each FTW_RNDV_CHUNK boundary from done on
 * (those before were injected when their fragments were asked for),
 * the sender checked before each chunk. */
static ftw_status_t rest_cma(const ftw_xport_src_t *src, uint64_t addr,
                             char *dst, uint64_t off, uint64_t done,
                             uint64_t len)
{
    uint64_t chunk = ftw_cfg.rndv_chunk ? ftw_cfg.rndv_chunk : len;

    while (off < len) {
        uint64_t end = (off / chunk + 1) * chunk;
        ftw_status_t st;

        end = end < len ? end : len;
        if (off % chunk == 0 && off >= done) {
            ftw_inject(FTW_INJECT_PULL);
            ftw_inject_pulled(src->world, src->pid);
        }
        if (ftw_detect_is_failed(src->world))
            return FTW_ST_PEER_FAILED;
        st = ftw_xport_cma_ops.pull(src, addr + off, dst + off,
                                    (size_t)(end - off));
        if (st != FTW_OK)
            return st;
        off = end;
    }
    return FTW_OK;
}

/* Bytes of [addr, addr + len) at its start that [pa, pa + pl) holds. */
static uint64_t range_prefix(uint64_t pa, uint64_t pl, uint64_t addr,
                             uint64_t len)
{
    if (addr < pa || addr - pa >= pl)
        return 0;
    return pl - (addr - pa) < len ? pl - (addr - pa) : len;
}

/* What push slot i of s holds of [addr, addr + len) at its start. */
static uint64_t push_holds(const shm_push_t *p, uint64_t addr, uint64_t len)
{
    return range_prefix(atomic_load_explicit(&p->addr, memory_order_relaxed),
                        atomic_load_explicit(&p->len, memory_order_relaxed),
                        addr, len);
}

/* Copy out the start of [addr, addr + len) from the push slot that holds
 * it, into dst; *got_p the bytes copied (0: no slot holds the start).
 * off is where addr lies in the pull of total bytes (for the fault
 * injection a cma pull would meet).  A slot the sender is filling with
 * it now is waited for.  Its bytes are
 * the message's: a slot is FULL only while a send of its range is
 * pending, and a pending send's buffer does not change. */
static ftw_status_t push_take(shm_seg_t *s, const ftw_xport_src_t *src,
                              uint64_t addr, char *dst, uint64_t len,
                              uint64_t off, uint64_t total, uint64_t *got_p)
{
    shm_hdr_t *h = s->hdr;

    *got_p = 0;
    for (uint64_t i = 0; i < h->npush; i++) {
        shm_push_t *p = &h->push[i];
        unsigned spins = 0;

        for (;;) {
            uint64_t st = atomic_load_explicit(&p->state,
                                               memory_order_acquire);
            uint64_t full = PUSH_FULL, n;

            if (push_holds(p, addr, len) == 0)
                break;
            if (st == PUSH_FILLING) {
                if ((++spins & 255) == 0) {
                    ftw_detect_peek();
                    if (ftw_detect_is_failed(s->peer))
                        return FTW_ST_PEER_FAILED;
                }
                cpu_relax();
                continue;
            }
            if (st != PUSH_FULL)
                break;
            if (!atomic_compare_exchange_strong_explicit(
                    &p->state, &full, PUSH_READING, memory_order_acq_rel,
                    memory_order_relaxed))
                continue;
            /* Emptied and filled again since the look: check again. */
            n = push_holds(p, addr, len);
            if (n == 0) {
                atomic_store_explicit(&p->state, PUSH_FULL,
                                      memory_order_release);
                break;
            }
            frag_inject(src, off, n, total);
            if (ftw_detect_is_failed(src->world)) {
                atomic_store_explicit(&p->state, PUSH_FULL,
                                      memory_order_release);
                return FTW_ST_PEER_FAILED;
            }
            memcpy(dst, (const char *)h + h->data_off +
                        h->nslots * h->frag + i * h->pfrag +
                        (addr - atomic_load_explicit(&p->addr,
                                                     memory_order_relaxed)),
                   n);
            atomic_store_explicit(&p->state, PUSH_EMPTY,
                                  memory_order_release);
            *got_p = n;
            return FTW_OK;
        }
    }
    return FTW_OK;
}

/* The start of a pull from the push slots, while they hold it: the
 * bytes copied out in *off_p. */
static ftw_status_t push_pull(shm_seg_t *s, const ftw_xport_src_t *src,
                              uint64_t addr, char *dst, uint64_t len,
                              uint64_t *off_p)
{
    uint64_t off = 0, got = 1;
    ftw_status_t st = FTW_OK;

    while (off < len && got != 0 && st == FTW_OK) {
        st = push_take(s, src, addr + off, dst + off, len - off, off, len,
                       &got);
        off += got;
    }
    *off_p = off;
    return st;
}

/* A fragment out of the slot into a message larger than the caches:
 * non-temporal 16-byte stores, which write whole lines without reading
 * them first (a plain copy reads every destination line from memory,
 * a third of the traffic of a copy that misses the caches, and evicts
 * the slots it is copying from).  The caller fences once per pull. */
#if defined(__SSE2__)
#define SHM_STREAM_STORES 1

static void copy_stream(char *dst, const char *src, size_t n)
{
    size_t head = (16 - ((uintptr_t)dst & 15)) & 15;

    if (head > n)
        head = n;
    memcpy(dst, src, head);
    dst += head;
    src += head;
    n -= head;
    for (; n >= 64; n -= 64, dst += 64, src += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)src);
        __m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(src + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(src + 48));

        _mm_stream_si128((__m128i *)dst, a);
        _mm_stream_si128((__m128i *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(dst + 32), c);
        _mm_stream_si128((__m128i *)(dst + 48), d);
    }
    memcpy(dst, src, n);
}

static inline void stream_fence(void)
{
    _mm_sfence();
}
#else
/* No non-temporal stores this file knows of: every pull copies plainly. */
#define SHM_STREAM_STORES 0

static void copy_stream(char *dst, const char *src, size_t n)
{
    memcpy(dst, src, n);
}

static inline void stream_fence(void)
{
}
#endif

/* Fragment want's answer, if the sender has given it: FTW_ST_UNSUPPORTED
 * while it has not. */
static ftw_status_t frag_answered(const shm_slot_t *sl, uint64_t want)
{
    if (atomic_load_explicit(&sl->done, memory_order_acquire) != want)
        return FTW_ST_UNSUPPORTED;
    return (ftw_status_t)sl->status;
}

/* The pipeline: up to nslots fragments asked ahead, copied out in order.
 * A fragment the sender leaves unanswered for SHM_STALL_MS is read with
 * cma, and so is every later one it has not answered by the time the
 * pull comes to it, without waiting, until it answers one again: a
 * sender that lost its core for a moment (another process, a timer)
 * takes up the fragments asked ahead as soon as it is back, and one
 * that computes outside MPI costs a cma read per fragment and no more
 * waits.  While the sender cools after a stall (seg_stalled) the pull
 * starts so, without the wait.  A request left unanswered stays out:
 * its number is never waited for again, and the slot is asked again
 * with the next number as the pipeline moves on. */
static ftw_status_t seg_pull(shm_seg_t *s, const ftw_xport_src_t *src,
                             uint64_t addr, char *dst, size_t len)
{
    shm_hdr_t *h = s->hdr;
    const char *data = (const char *)h + h->data_off;
    uint64_t fsz = frag_size(h, len);
    uint64_t nfrag = (len + fsz - 1) / fsz, asked = 0, streamed = 0;
    uint64_t seq0 = s->seq + 1;
    int stream = SHM_STREAM_STORES && ftw_cfg.shm_stream != 0 &&
                 len >= ftw_cfg.shm_stream;
    int away = seg_cooling(s), resumed = 0;

    for (uint64_t k = 0; k < nfrag; k++) {
        shm_slot_t *sl = &h->slot[k % h->nslots];
        size_t off = k * fsz, n = len - off < fsz ? len - off : fsz;
        ftw_status_t st;

        for (; asked < nfrag && asked < k + h->nslots; asked++) {
            frag_inject(src, asked * fsz, fsz, len);
            frag_ask(s, asked, fsz, addr, len);
        }
        st = away ? frag_answered(sl, seq0 + k) : frag_wait(s, sl, seq0 + k);
        if (st == FTW_ST_UNSUPPORTED) {
            away = 1;
            /* Its faults were injected when it was asked for. */
            st = rest_cma(src, addr + off, dst + off, 0, n, n);
            if (st != FTW_OK)
                return st;
            ftw_stat_add(FTW_STAT_RNDV_SHM_CMA_BYTES, n);
            continue;
        }
        if (st != FTW_OK)
            return st;
        if (away) {
            away = 0;           /* the sender is back */
            s->cma_until = 0;
            resumed = 1;
        }
        if (stream) {
            copy_stream(dst + off, data + (k % h->nslots) * h->frag, n);
            streamed += n;
        } else {
            memcpy(dst + off, data + (k % h->nslots) * h->frag, n);
        }
    }
    if (streamed != 0) {
        stream_fence();     /* the streamed stores before the FIN */
        ftw_stat_add(FTW_STAT_RNDV_SHM_STREAMED, streamed);
    }
    if (resumed)
        ftw_stat_add(FTW_STAT_RNDV_SHM_RESUMED, 1);
    return FTW_OK;
}

/* Chunk size of a split pull of len bytes: about 16 chunks (both sides
 * find work, and the last chunk's wait is short), from 64 KiB to 1 MiB,
 * whole pages. */
static uint64_t split_chunk(size_t len)
{
    uint64_t c = ((uint64_t)len / 16 + 4095) & ~(uint64_t)4095;

    c = c < (64u << 10) ? (64u << 10) : c;
    return c > (1u << 20) ? (1u << 20) : c;
}

/* Describe a split pull in s (seqlock writes), with nobody's claim
 * left over: the previous pull ended with every chunk taken and
 * written. */
static void split_post(shm_seg_t *s, uint64_t addr, char *dst, size_t len,
                       uint64_t chunk)
{
    shm_split_t *sp = &s->hdr->split;
    /* Pull numbers are 32 bits (the claim word's high half), never 0. */
    uint64_t p = ++s->split_seq & SPLIT_IDX_MASK;

    if (p == 0)
        p = ++s->split_seq & SPLIT_IDX_MASK;
    /* Release stores: the 0 is visible before any new field is. */
    atomic_store_explicit(&sp->pull, 0, memory_order_relaxed);
    atomic_store_explicit(&sp->src, addr, memory_order_release);
    atomic_store_explicit(&sp->dst, (uint64_t)(uintptr_t)dst,
                          memory_order_release);
    atomic_store_explicit(&sp->len, (uint64_t)len, memory_order_release);
    atomic_store_explicit(&sp->chunk, chunk, memory_order_release);
    atomic_store_explicit(&sp->dpid, (int64_t)ftw_xport_self_pid(),
                          memory_order_release);
    atomic_store_explicit(&sp->helped, 0, memory_order_relaxed);
    atomic_store_explicit(&sp->pull, p, memory_order_release);
    atomic_store_explicit(&sp->claim, p << 32,
                          memory_order_release);
}

/* Wait until the sender has written the want chunks it claimed (it is
 * copying them now), watching it and serving this process's own
 * receivers meanwhile.  Nonzero in *err_p if a write failed.  A sender
 * that took SHM_STALL_MS lost its core in the middle of a chunk (a
 * loaded host): pulls from it are cma's for the next SHM_COOL_MS. */
static ftw_status_t split_wait(shm_seg_t *s, uint64_t want, int *err_p)
{
    shm_split_t *sp = &s->hdr->split;
    unsigned spins = 0;
    double t0 = 0;
    uint64_t h;

    while (((h = atomic_load_explicit(&sp->helped, memory_order_acquire)) &
            SPLIT_IDX_MASK) != want) {
        if ((++spins & 255) == 0) {
            ftw_detect_peek();
            if (ftw_detect_is_failed(s->peer))
                return FTW_ST_PEER_FAILED;
            if (t0 == 0) {
                t0 = now_ms();
            } else if (t0 > 0 && now_ms() - t0 > SHM_STALL_MS) {
                seg_stalled(s);
                t0 = -1;    /* once a wait */
            }
        }
        wait_turn(spins);
    }
    *err_p = (h & SPLIT_HELP_ERR) != 0;
    return FTW_OK;
}

/* A split pull: chunks taken from the shared counter, read here with
 * cma, while the sender writes the ones it takes.  Faults are injected
 * at the FTW_RNDV_CHUNK boundaries of the chunks read here. */
static ftw_status_t split_pull(shm_seg_t *s, const ftw_xport_src_t *src,
                               uint64_t addr, char *dst, size_t len)
{
    shm_split_t *sp = &s->hdr->split;
    uint64_t chunk = split_chunk(len), nchunk = (len + chunk - 1) / chunk;
    uint64_t mine = 0;
    ftw_status_t st = FTW_OK;
    int err = 0;

    split_post(s, addr, dst, len, chunk);
    for (;;) {
        uint64_t k = atomic_fetch_add_explicit(&sp->claim, 1,
                                               memory_order_acq_rel) &
                     SPLIT_IDX_MASK;
        uint64_t off = k * chunk, n;

        if (k >= nchunk)
            break;
        n = len - off < chunk ? len - off : chunk;
        frag_inject(src, off, n, len);
        if (ftw_detect_is_failed(src->world))
            return FTW_ST_PEER_FAILED;
        if (st == FTW_OK)
            st = ftw_xport_cma_ops.pull(src, addr + off, dst + off, n);
        if (st == FTW_ST_PEER_FAILED)
            return st;
        mine++;     /* taken, even if its read failed: all must be */
    }
    /* Whatever happened here, the sender's chunks must be written
     * before the destination is given back. */
    if (split_wait(s, nchunk - mine, &err) != FTW_OK)
        return FTW_ST_PEER_FAILED;
    if (st == FTW_OK && err)
        st = rest_cma(src, addr, dst, 0, len, len);
    if (st == FTW_OK)
        ftw_stat_add(FTW_STAT_RNDV_SHM_SPLIT, 1);
    return st;
}

/* A receiver's segment whose sender failed (shm_lock held). */
static void seg_drop_in(int peer)
{
    shm_seg_t *s = in_seg[peer];

    if (s == NULL)
        return;
    in_seg[peer] = NULL;
    munmap(s->hdr, s->maplen);
    free(s);
}

/* The pull of [off, len) of the message at addr that the push slots did
 * not hold. */
static ftw_status_t seg_pull_rest(shm_seg_t *s, const ftw_xport_src_t *src,
                                  uint64_t addr, char *dst, uint64_t off,
                                  uint64_t len)
{
    unsigned stalls = s->stalls;
    ftw_status_t st;

    if (ftw_cfg.shm_pull != FTW_SHM_PULL_SPLIT)
        st = seg_pull(s, src, addr + off, dst + off, len - off);
    else if (seg_cooling(s))
        /* The sender stalled lately: cma (the whole of it, if none came
         * from the push slots). */
        return off == 0 ? FTW_ST_UNSUPPORTED
                        : rest_cma(src, addr, dst, off, off, len);
    else
        st = split_pull(s, src, addr + off, dst + off, len - off);
    if (st == FTW_OK && s->stalls == stalls)
        s->stalls = 0;          /* the sender kept up all the way */
    return st;
}

static ftw_status_t shm_pull(const ftw_xport_src_t *src, uint64_t addr,
                             void *local, size_t len)
{
    shm_seg_t *s;
    uint64_t off;
    ftw_status_t st;

    if (ftw_detect_is_failed(src->world))
        return FTW_ST_PEER_FAILED;
    st = seg_in(src, &s);
    if (st != FTW_OK)
        return st;
    st = push_pull(s, src, addr, local, len, &off);
    if (off != 0)
        ftw_stat_add(FTW_STAT_RNDV_SHM_PUSHED, 1);
    if (st == FTW_OK && off < len)
        st = seg_pull_rest(s, src, addr, local, off, len);
    if (st == FTW_ST_PEER_FAILED) {
        /* Dropped while still held: no other thread is using it. */
        pthread_mutex_lock(&shm_lock);
        seg_drop_in(src->world);
        pthread_mutex_unlock(&shm_lock);
        return st;
    }
    atomic_flag_clear_explicit(&s->busy, memory_order_release);
    return st;
}

/* shm needs what cma needs (ptrace permission, probed by a real read)
 * and a working pidfd_getfd. */
static ftw_status_t shm_reach(int peer, const ftw_xport_peer_t *p)
{
    ftw_status_t st = ftw_xport_cma_ops.reach(peer, p);

    if (st == FTW_OK && !shm_getfd_works())
        st = FTW_ST_UNSUPPORTED;
    return st;
}

void ftw_xport_shm_fini(void)
{
    pthread_mutex_lock(&shm_lock);
    while (out_n > 0)
        seg_drop_out(out_n - 1);
    for (int i = 0; in_seg != NULL && i < shm_npeers; i++)
        seg_drop_in(i);
    free(out_seg);
    free(in_seg);
    free(out_list);
    out_seg = in_seg = NULL;
    out_list = NULL;
    pthread_mutex_unlock(&shm_lock);
}

const ftw_xport_ops_t ftw_xport_shm_ops = {
    .name = "shm",
    .reach = shm_reach,
    .pull = shm_pull,
    .expose = shm_expose,
    .release = shm_release,
    .progress = ftw_xport_shm_serve,
    .exposed = &ftw_xport_shm_exposed,
    .pulls_whole = 1,
    .fallback = FTW_XPORT_ID_CMA,
};
