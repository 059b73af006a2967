/* Cut reads (buf/cut.h): the interposed cross-memory copies and the table
 * of the ranges they left unwritten. */
#include "buf/cut.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "detect/detect.h"
#include "buf/quarantine.h"
#include "core/lock.h"
#include "util/compiler.h"
#include "util/log.h"
#include "util/stats.h"

typedef struct {
    const char *lo, *hi;
    int world;          /* the process the bytes should have come from */
} cut_t;

/* The processes of the last cut events, for collectives (ftw_cut_since);
 * older events than this many count as "some member". */
#define CUT_RECENT 64

_Atomic int ftw_cut_count;
_Atomic uint32_t ftw_cut_seq;
static cut_t *cuts;
static int cap_cuts;
static int recent[CUT_RECENT];
static pthread_mutex_t cut_lock = PTHREAD_MUTEX_INITIALIZER;

/* Copies at most this many iovec entries are resumed after a short copy
 * (the MPIs pass one remote entry and a few local ones). */
#define CUT_IOV_MAX 64

static size_t iov_bytes(const struct iovec *iov, unsigned long n)
{
    size_t sum = 0;

    for (unsigned long i = 0; i < n; i++)
        sum += iov[i].iov_len;
    return sum;
}

/* dst = src without its first skip bytes; the entries in *n_p. */
static void iov_skip(struct iovec *dst, unsigned long *n_p,
                     const struct iovec *src, unsigned long n, size_t skip)
{
    unsigned long k = 0;

    for (unsigned long i = 0; i < n; i++) {
        if (skip >= src[i].iov_len) {
            skip -= src[i].iov_len;
            continue;
        }
        dst[k].iov_base = (char *)src[i].iov_base + skip;
        dst[k].iov_len = src[i].iov_len - skip;
        skip = 0;
        k++;
    }
    *n_p = k;
}

/* Record [lo, hi) as cut off from world, merged with a cut it extends
 * (a transfer's next segment).  Under cut_lock. */
static void cut_add(const char *lo, const char *hi, int world)
{
    for (int i = 0; i < ftw_cut_count; i++) {
        cut_t *c = &cuts[i];

        if (c->world == world && lo <= c->hi && c->lo <= hi) {
            c->lo = lo < c->lo ? lo : c->lo;
            c->hi = hi > c->hi ? hi : c->hi;
            return;
        }
    }
    if (ftw_cut_count == cap_cuts) {
        int cap = cap_cuts ? 2 * cap_cuts : 8;
        cut_t *n = realloc(cuts, sizeof(*n) * (size_t)cap);

        if (n == NULL) {
            /* The receive cannot be failed for certain now: say so. */
            ftw_error("out of memory recording bytes [%p, %p) that rank "
                      "%d's death left unwritten; a receive into them may "
                      "report success", (const void *)lo, (const void *)hi,
                      world);
            return;
        }
        cuts = n;
        cap_cuts = cap;
    }
    cuts[ftw_cut_count] = (cut_t){ lo, hi, world };
    ftw_gate_add(ftw_cut_count, 1);
}

/* The bytes of local from offset done to want were not copied. */
static void cut_record(const struct iovec *local, unsigned long nlocal,
                       size_t done, size_t want, int world)
{
    size_t off = 0;

    ftw_mt_lock(&cut_lock);
    for (unsigned long i = 0; i < nlocal && off < want; i++) {
        const char *base = local[i].iov_base;
        size_t start = off, end = off + local[i].iov_len;
        size_t a = start > done ? start : done;
        size_t b = end < want ? end : want;

        if (a < b)
            cut_add(base + (a - start), base + (b - start), world);
        off = end;
    }
    /* One event per run of cuts from one process: a transfer is cut in
     * many reads, and a collective that starts after the first finds the
     * process published failed already. */
    if (ftw_cut_seq == 0 ||
        recent[(ftw_cut_seq - 1) % CUT_RECENT] != world) {
        recent[ftw_cut_seq % CUT_RECENT] = world;
        ftw_gate_add(ftw_cut_seq, 1);
    }
    ftw_mt_unlock(&cut_lock);
}

/* A copy with pid came back short or with ESRCH (n, errno err): finish it
 * if pid is alive, else cut it.  Returns what the caller returns. */
static ssize_t vm_cut(long nr, int pid, const struct iovec *local,
                      unsigned long nlocal, const struct iovec *remote,
                      unsigned long nremote, unsigned long flags,
                      ssize_t n, int err, size_t want)
{
    struct iovec l[CUT_IOV_MAX], r[CUT_IOV_MAX];
    int world = ftw_detect_local_rank_of(pid);
    size_t done = n > 0 ? (size_t)n : 0;

    if (world < 0 || nlocal > CUT_IOV_MAX || nremote > CUT_IOV_MAX) {
        errno = err;
        return n;       /* not a copy between ranks ftwrap watches */
    }
    /* A short copy: the rest may still come, or show the peer gone. */
    while (n >= 0 && done < want) {
        unsigned long nl, nr_;

        iov_skip(l, &nl, local, nlocal, done);
        iov_skip(r, &nr_, remote, nremote, done);
        n = syscall(nr, pid, l, nl, r, nr_, flags);
        if (n > 0)
            done += (size_t)n;
        else if (n == 0)
            return (ssize_t)done;   /* no progress, no error: the MPI's */
        else
            err = errno;
    }
    if (done >= want)
        return (ssize_t)done;
    if (err != ESRCH) {
        errno = err;
        return done > 0 ? (ssize_t)done : -1;
    }
    if (nr == SYS_process_vm_readv)
        cut_record(local, nlocal, done, want, world);
    ftw_stat_add(FTW_STAT_CUT_COPIES, 1);
    ftw_info("the MPI's cross-memory copy %s rank %d stopped at %zu of %zu "
             "bytes: the process is gone", nr == SYS_process_vm_readv ?
             "from" : "to", world, done, want);
    ftw_detect_gone(world, "cross-memory copy: process gone");
    return (ssize_t)want;
}

static ssize_t vm_copy(long nr, int pid, const struct iovec *local,
                       unsigned long nlocal, const struct iovec *remote,
                       unsigned long nremote, unsigned long flags)
{
    ssize_t n = syscall(nr, pid, local, nlocal, remote, nremote, flags);
    size_t want, rwant;

    if (ftw_likely(n >= 0) || errno == ESRCH) {
        want = iov_bytes(local, nlocal);
        rwant = iov_bytes(remote, nremote);
        if (rwant < want)
            want = rwant;
        if (ftw_likely(n >= 0 && (size_t)n >= want))
            return n;
        return vm_cut(nr, pid, local, nlocal, remote, nremote, flags, n,
                      n < 0 ? errno : 0, want);
    }
    return n;
}

FTW_EXPORT ssize_t process_vm_readv(pid_t pid, const struct iovec *local,
                                    unsigned long nlocal,
                                    const struct iovec *remote,
                                    unsigned long nremote,
                                    unsigned long flags)
{
    return vm_copy(SYS_process_vm_readv, pid, local, nlocal, remote,
                   nremote, flags);
}

FTW_EXPORT ssize_t process_vm_writev(pid_t pid, const struct iovec *local,
                                     unsigned long nlocal,
                                     const struct iovec *remote,
                                     unsigned long nremote,
                                     unsigned long flags)
{
    return vm_copy(SYS_process_vm_writev, pid, local, nlocal, remote,
                   nremote, flags);
}

/* Drop the cut ranges overlapping [lo, hi); 1 if there were any. */
static int cut_drop(const char *lo, const char *hi)
{
    int hit = 0;

    ftw_mt_lock(&cut_lock);
    for (int i = 0; i < ftw_cut_count;) {
        if (lo < cuts[i].hi && cuts[i].lo < hi) {
            ftw_gate_add(ftw_cut_count, -1);
            cuts[i] = cuts[ftw_cut_count];
            hit = 1;
        } else {
            i++;
        }
    }
    ftw_mt_unlock(&cut_lock);
    return hit;
}

int ftw_cut_hit(const void *buf, MPI_Count count, MPI_Datatype dt)
{
    const char *lo, *hi;

    if (buf == NULL || ftw_buffer_span(buf, count, dt, &lo, &hi) !=
                           MPI_SUCCESS || lo == hi || !cut_drop(lo, hi))
        return 0;
    ftw_stat_add(FTW_STAT_CUT_FAILED, 1);
    return 1;
}

void ftw_cut_forget(const char *lo, const char *hi)
{
    cut_drop(lo, hi);
}

int ftw_cut_since(uint32_t seq0, const ftw_comm_t *c)
{
    uint32_t seq = atomic_load_explicit(&ftw_cut_seq, memory_order_acquire);
    int hit = 0;

    if (seq == seq0)
        return 0;
    if (c == NULL || seq - seq0 > CUT_RECENT) {
        hit = 1;        /* too many to tell: some member, to be safe */
    } else {
        ftw_mt_lock(&cut_lock);
        for (uint32_t s = seq0; s != seq && !hit; s++)
            hit = ftw_comm_has_member(c, recent[s % CUT_RECENT]);
        ftw_mt_unlock(&cut_lock);
    }
    if (hit)
        ftw_stat_add(FTW_STAT_CUT_FAILED, 1);
    return hit;
}
