/*
 * Early exit notice for peers on this host, through robust futexes.
 *
 * A pidfd becomes readable only after the dead process's memory has been
 * torn down, which takes milliseconds for an MPI process (about 0.3 us
 * per resident KB).  The kernel releases a thread's robust futexes
 * before that teardown.  So each process keeps futex words in a memfd,
 * owned (robust list, word = tid) by its detector thread, which lives
 * exactly as long as the process; peers map the memfd through
 * /proc/<pid>/fd/<n> and a sentinel thread waits on their words with
 * futex_waitv.  When a process dies the kernel sets FUTEX_OWNER_DIED in
 * each word and wakes one waiter per word, so there is one word (slot)
 * per watching rank: every sentinel is woken by the kernel itself, not
 * by another sentinel that must first be scheduled.  Ranks beyond
 * ROBUST_SLOTS share slots, and a woken sentinel wakes its slot's other
 * waiters.  The sentinel publishes the death and hands the rank to the
 * detector thread (as if its pidfd had fired).  The detector thread
 * disowns the words before it ends in ftw_detect_fini, so a clean exit
 * sets nothing.
 *
 * Everything here is an optimisation: if a page cannot be shared, that
 * peer is watched by its pidfd alone.
 */
#define _GNU_SOURCE
#include "detect/detect_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/log.h"

#define ROBUST_PAGE 4096
#define ROBUST_SLOTS 1024       /* well below the kernel's list limit */

/* One slot: a robust-list entry and the word it owns, at a fixed offset
 * from each other as the kernel requires. */
typedef struct {
    struct robust_list entry;
    _Atomic uint32_t word;
    uint32_t pad;
} ftw_robust_slot_t;

static struct {
    ftw_robust_slot_t *own;         /* this process's slots */
    int own_fd;
    void **pages;                   /* [size], peers' mappings or NULL */
    _Atomic uint32_t **words;       /* [size], my slot in each, or NULL;
                                     * fixed while the sentinel runs */
    _Atomic uint8_t *gone;          /* [size], reported dead */
    int *mapped;                    /* [nmapped], ranks with words[r] */
    int nmapped;
    _Atomic uint32_t stop;          /* the sentinel's own wake word */
    pthread_t sentinel;
    int started;
    /* The detector thread's robust list (that thread only). */
    struct robust_list_head head;
    struct robust_list_head *saved_head;
    size_t saved_len;
} rob = { .own_fd = -1 };

static int robust_nslots(void)
{
    return ftw_det.size < ROBUST_SLOTS ? ftw_det.size : ROBUST_SLOTS;
}

static size_t robust_len(void)
{
    size_t len = (size_t)robust_nslots() * sizeof(ftw_robust_slot_t);

    return (len + ROBUST_PAGE - 1) / ROBUST_PAGE * ROBUST_PAGE;
}

static long futex_wake(_Atomic uint32_t *word, int private)
{
    return syscall(SYS_futex, word, FUTEX_WAKE | private, INT_MAX, NULL,
                   NULL, 0);
}

/* Create this process's page; *fd_p is what peers open.  -1 if none. */
void ftw_det_robust_create(int32_t *fd_p)
{
    void *page;
    int fd = memfd_create("ftwrap-detect", MFD_CLOEXEC);

    *fd_p = -1;
    if (fd < 0 || ftruncate(fd, (off_t)robust_len()) < 0) {
        ftw_debug("memfd for the exit futex: %m; pidfd only");
        goto err_close;
    }
    page = mmap(NULL, robust_len(), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                0);
    if (page == MAP_FAILED) {
        ftw_debug("mmap of the exit futex: %m; pidfd only");
        goto err_close;
    }
    rob.own = page;
    rob.own_fd = fd;
    *fd_p = fd;
    return;

err_close:
    if (fd >= 0)
        close(fd);
}

/* Set every slot's word to v and wake whoever waits on it. */
static void robust_own_set(uint32_t v)
{
    for (int i = 0; i < robust_nslots(); i++) {
        atomic_store(&rob.own[i].word, v);
        futex_wake(&rob.own[i].word, 0);
    }
}

/* Called by the detector thread as it starts: own the words. */
void ftw_det_robust_arm(void)
{
    int n = robust_nslots();

    if (!rob.own)
        return;
    syscall(SYS_get_robust_list, 0, &rob.saved_head, &rob.saved_len);
    rob.head.list.next = &rob.own[0].entry;
    for (int i = 0; i < n; i++)
        rob.own[i].entry.next = i + 1 < n ? &rob.own[i + 1].entry
                                          : &rob.head.list;
    rob.head.futex_offset = (long)offsetof(ftw_robust_slot_t, word) -
                            (long)offsetof(ftw_robust_slot_t, entry);
    rob.head.list_op_pending = NULL;
    if (syscall(SYS_set_robust_list, &rob.head, sizeof(rob.head)) < 0) {
        ftw_debug("set_robust_list: %m; peers use the pidfd only");
        robust_own_set(0);
        return;
    }
    robust_own_set((uint32_t)gettid());
}

/* Called by the detector thread before it ends: a clean exit. */
void ftw_det_robust_disarm(void)
{
    if (!rob.own)
        return;
    rob.head.list.next = &rob.head.list;
    for (int i = 0; i < robust_nslots(); i++)
        atomic_store(&rob.own[i].word, 0);
    if (rob.saved_head)
        syscall(SYS_set_robust_list, rob.saved_head, rob.saved_len);
}

/* Map rank's slots; NULL if they cannot be shared. */
static void *robust_map_peer(int rank)
{
    const ftw_det_peer_t *p = &ftw_det.peers[rank];
    char path[64];
    void *page;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)p->pid,
             (int)p->memfd);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        ftw_debug("%s (rank %d): %m; pidfd only", path, rank);
        return NULL;
    }
    page = mmap(NULL, robust_len(), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                0);
    close(fd);
    if (page == MAP_FAILED) {
        ftw_debug("mmap %s (rank %d): %m; pidfd only", path, rank);
        return NULL;
    }
    return page;
}

/* One word to wait on: the value it must still hold, with the waiters
 * bit set so that the dying kernel wakes us.  0 when its owner died. */
static uint32_t robust_expect(_Atomic uint32_t *w)
{
    uint32_t v = atomic_load(w);

    while (v && !(v & FUTEX_OWNER_DIED) && !(v & FUTEX_WAITERS)) {
        if (atomic_compare_exchange_weak(w, &v, v | FUTEX_WAITERS))
            return v | FUTEX_WAITERS;
    }
    return (v & FUTEX_OWNER_DIED) ? 0 : v;
}

/* A dead rank: publish it at once, then hand it to the detector thread
 * for the rest (pidfd, notices).  Publishing here saves the application
 * a second thread wake-up, which on a loaded host costs milliseconds.  A
 * rank that already said goodbye (its finalize began) is left to the
 * detector thread, which reads pending goodbyes first.  The dying kernel
 * wakes one waiter only: wake the other processes' sentinels too. */
static void robust_report(int rank)
{
    uint64_t one = 1;

    futex_wake(rob.words[rank], 0);
    if (__atomic_load_n(&ftw_det.state[rank], __ATOMIC_ACQUIRE) ==
        FTW_PEER_LIVE)
        ftw_det_publish(rank, "process exit, robust futex");

    atomic_store(&ftw_det.early[rank], 1);
    if (write(ftw_det.earlyfd, &one, sizeof(one)) < 0) {
        /* Saturated counter: the detector is awake anyway. */
    }
    atomic_store(&rob.gone[rank], 1);
}

/* Application threads that wait: look at the words themselves.  The kernel
 * sets FUTEX_OWNER_DIED in the dying process's context; a waiter that
 * reads it needs no thread of its own to be scheduled, which on a
 * crowded host is most of the delay.  A few loads per local peer. */
void ftw_detect_peek(void)
{
    if (!rob.started)
        return;
    for (int i = 0; i < rob.nmapped; i++) {
        int r = rob.mapped[i];

        if (atomic_load(&rob.gone[r]))
            continue;
        if (atomic_load_explicit(rob.words[r], memory_order_relaxed) &
            FUTEX_OWNER_DIED)
            robust_report(r);
    }
}

/* Build the wait set; 0 entries for peers beyond FUTEX_WAITV_MAX - 1. */
static int robust_collect(struct futex_waitv *wv, int *ranks)
{
    int n = 0;

    wv[n] = (struct futex_waitv){ .val = 0, .uaddr = (uintptr_t)&rob.stop,
                                  .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG };
    ranks[n++] = -1;
    for (int i = 0; i < rob.nmapped && n < FUTEX_WAITV_MAX; i++) {
        int r = rob.mapped[i];
        uint32_t v;

        if (atomic_load(&rob.gone[r]))
            continue;
        v = robust_expect(rob.words[r]);
        if (v == 0 && (atomic_load(rob.words[r]) & FUTEX_OWNER_DIED)) {
            robust_report(r);
            continue;
        }
        wv[n] = (struct futex_waitv){ .val = v,
                                      .uaddr = (uintptr_t)rob.words[r],
                                      .flags = FUTEX_32 };
        ranks[n++] = r;
    }
    return n;
}

static void *robust_sentinel(void *arg)
{
    struct futex_waitv wv[FUTEX_WAITV_MAX];
    int ranks[FUTEX_WAITV_MAX];

    while (!atomic_load(&rob.stop)) {
        int n = robust_collect(wv, ranks);

        if (atomic_load(&rob.stop))
            break;
        if (syscall(SYS_futex_waitv, wv, n, 0, NULL, CLOCK_MONOTONIC) < 0 &&
            errno != EAGAIN && errno != EINTR) {
            ftw_warn("futex_waitv: %m; local peers watched by pidfd only");
            break;
        }
    }
    return NULL;
}

/* Map the pages of the peers watched by pidfd and start the sentinel. */
ftw_status_t ftw_det_robust_start(void)
{
    ftw_robust_slot_t *slots;
    sigset_t all, old;
    int rc;

    rob.words = calloc((size_t)ftw_det.size, sizeof(*rob.words));
    rob.pages = calloc((size_t)ftw_det.size, sizeof(*rob.pages));
    rob.gone = calloc((size_t)ftw_det.size, sizeof(*rob.gone));
    rob.mapped = calloc((size_t)ftw_det.size, sizeof(*rob.mapped));
    if (!rob.words || !rob.pages || !rob.gone || !rob.mapped)
        return FTW_OK;
    for (int r = 0; r < ftw_det.size; r++) {
        if (ftw_det.pidfds[r] < 0 || ftw_det.peers[r].memfd < 0)
            continue;
        rob.pages[r] = robust_map_peer(r);
        if (!rob.pages[r])
            continue;
        slots = rob.pages[r];
        rob.words[r] = &slots[ftw_det.rank % robust_nslots()].word;
        rob.mapped[rob.nmapped++] = r;
    }
    if (rob.nmapped == 0)
        return FTW_OK;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&rob.sentinel, NULL, robust_sentinel, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        ftw_warn("pthread_create (exit futex sentinel): %s; pidfd only",
                 strerror(rc));
    rob.started = rc == 0;
    return FTW_OK;
}

void ftw_det_robust_stop(void)
{
    if (rob.started) {
        atomic_store(&rob.stop, 1);
        futex_wake(&rob.stop, FUTEX_PRIVATE_FLAG);
        pthread_join(rob.sentinel, NULL);
        rob.started = 0;
    }
    for (int r = 0; rob.pages && r < ftw_det.size; r++)
        if (rob.pages[r])
            munmap(rob.pages[r], robust_len());
    free(rob.pages);
    free(rob.words);
    free((void *)rob.gone);
    free(rob.mapped);
    rob.mapped = NULL;
    rob.nmapped = 0;
    rob.pages = NULL;
    rob.words = NULL;
    rob.gone = NULL;
}

/* The sentinel reported deaths (detector thread).  Pending datagrams
 * first, in case the rank said goodbye before leaving. */
void ftw_det_early_event(void)
{
    uint64_t count;

    if (read(ftw_det.earlyfd, &count, sizeof(count)) < 0 && errno != EAGAIN)
        ftw_warn_sparse("read(eventfd): %m");
    for (int r = 0; r < ftw_det.size; r++) {
        if (!atomic_exchange(&ftw_det.early[r], 0))
            continue;
        ftw_det_sock_drain();
        ftw_det_declare(r, "process exit, robust futex");
    }
}

/* After the detector thread has ended. */
void ftw_det_robust_release(void)
{
    if (rob.own)
        munmap(rob.own, robust_len());
    if (rob.own_fd >= 0)
        close(rob.own_fd);
    rob.own = NULL;
    rob.own_fd = -1;
}
