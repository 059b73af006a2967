/*
 * Memory windows of the verbs transport.  With windows, a sender's memory
 * regions grant no remote access themselves (IBV_ACCESS_MW_BIND only, see
 * verbs_md.c): each rendezvous message gets a type 2 window over exactly
 * its bytes (from the page boundary below them when READs must start
 * page-aligned), remote read only, bound by a BIND_MW work request on the
 * QP to its receiver, so that only that receiver, through that QP, can
 * read it.  When the send ends (FIN, abort, failure) a LOCAL_INV on the
 * same QP invalidates the window before the send's request completes; a
 * QP that cannot run it (error state, being reconnected) gets the window
 * freed instead, which invalidates it as well.
 *
 * Windows are kept for reuse (an invalidated type 2 window may be bound
 * again, with the next rkey).  Whether the device can do all this over
 * this process's memory mode (pinned, explicit or implicit ODP) is tried
 * at MPI_Init by a self-test between two QPs of this process.
 */
#define _GNU_SOURCE
#include "xport/verbs_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/config.h"
#include "util/log.h"
#include "util/stats.h"

#define POOL_MAX 64             /* invalidated windows kept for reuse */
#define SELFTEST_LEN 5000       /* several MTUs at 1024 */
#define SELFTEST_OFF 100

typedef struct {
    struct ibv_mw *mw;
    uint32_t rkey;              /* its last rkey */
} pooled_t;

static pooled_t pool[POOL_MAX];
static int pool_n;

/* A window from the pool, or a new one; *rkey_p: its last rkey. */
static struct ibv_mw *mw_get(uint32_t *rkey_p)
{
    struct ibv_mw *mw;

    if (pool_n > 0) {
        pool_n--;
        *rkey_p = pool[pool_n].rkey;
        return pool[pool_n].mw;
    }
    mw = ibv_alloc_mw(ftw_verbs.pd, IBV_MW_TYPE_2);
    if (mw == NULL) {
        ftw_warn_sparse("verbs: ibv_alloc_mw(%s, TYPE_2): %m",
                        ftw_verbs_dev_name());
        return NULL;
    }
    *rkey_p = mw->rkey;
    return mw;
}

/* An invalidated window back to the pool, or freed. */
static void mw_put(struct ibv_mw *mw, uint32_t rkey)
{
    if (pool_n < POOL_MAX)
        pool[pool_n++] = (pooled_t){ .mw = mw, .rkey = rkey };
    else
        ibv_dealloc_mw(mw);
}

ftw_status_t ftw_verbs_mw_bind(struct ibv_qp *qp, int peer, struct ibv_mr *mr,
                               uint64_t addr, size_t len,
                               struct ibv_mw **mw_p, uint32_t *rkey_p)
{
    struct ibv_send_wr wr = {
        .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED,
    };
    struct ibv_mw *mw;
    uint32_t rkey;

    mw = mw_get(&rkey);
    if (mw == NULL)
        return FTW_ST_NO_MEMORY;
    rkey = ibv_inc_rkey(rkey);
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = rkey;
    wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
        .mr = mr, .addr = addr, .length = len,
        .mw_access_flags = IBV_ACCESS_REMOTE_READ,
    };
    if (ftw_verbs_post_one(qp, peer, &wr) != FTW_OK) {
        ibv_dealloc_mw(mw);     /* maybe bound: freeing invalidates it */
        return FTW_ST_IO_ERROR;
    }
    /* The window's current rkey, as ibv_bind_mw keeps it for type 1:
     * providers (rxe) name the window by it in the next bind. */
    mw->rkey = rkey;
    ftw_stat_add(FTW_STAT_VERBS_MW_BINDS, 1);
    *mw_p = mw;
    *rkey_p = rkey;
    return FTW_OK;
}

int ftw_verbs_mw_unbind(struct ibv_qp *qp, int peer, struct ibv_mw *mw,
                        uint32_t rkey)
{
    struct ibv_send_wr wr = {
        .opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED,
        .invalidate_rkey = rkey,
    };

    if (qp != NULL && ftw_verbs_post_one(qp, peer, &wr) == FTW_OK) {
        ftw_stat_add(FTW_STAT_VERBS_MW_INVALIDATED, 1);
        mw_put(mw, rkey);
        return 0;
    }
    if (ibv_dealloc_mw(mw) != 0)
        ftw_error("verbs: ibv_dealloc_mw(%s) of a window LOCAL_INV could "
                  "not invalidate: %m", ftw_verbs_dev_name());
    ftw_stat_add(FTW_STAT_VERBS_MW_DEALLOCATED, 1);
    return qp != NULL;
}

void ftw_verbs_mw_close(void)
{
    while (pool_n > 0)
        ibv_dealloc_mw(pool[--pool_n].mw);
}

/* ---- self-test ---------------------------------------------------------- */

/* The self-test's resources. */
typedef struct {
    char *map;
    size_t half;
    size_t off;                 /* of the bytes: 0 when READs go aligned */
    struct ibv_qp *qa, *qb;     /* qa reads, qb binds */
    struct ibv_mr *smr, *dmr;
} mwtest_t;

static void mwtest_free(mwtest_t *t)
{
    if (ftw_verbs.mem != FTW_VERBS_MEM_IMPLICIT) {
        if (t->smr != NULL)
            ibv_dereg_mr(t->smr);
        if (t->dmr != NULL)
            ibv_dereg_mr(t->dmr);
    }
    if (t->qa != NULL)
        ibv_destroy_qp(t->qa);
    if (t->qb != NULL)
        ibv_destroy_qp(t->qb);
    if (t->map != NULL)
        munmap(t->map, 2 * t->half);
}

/* Source and destination halves of one mapping, their MRs as this
 * process's memory mode makes them, and two connected QPs; NULL, or why
 * not. */
static const char *mwtest_setup(mwtest_t *t)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    ftw_verbs_mem_t mode = ftw_verbs.mem == FTW_VERBS_MEM_PIN ?
                           FTW_VERBS_MEM_PIN : FTW_VERBS_MEM_ODP;

    t->half = (SELFTEST_LEN / page + 2) * page;
    t->map = mmap(NULL, 2 * t->half, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (t->map == MAP_FAILED) {
        t->map = NULL;
        return "mmap failed";
    }
    memset(t->map, 0xa5, 2 * t->half);
    t->off = ftw_verbs.odp_aligned ? 0 : SELFTEST_OFF;
    for (size_t i = 0; i < SELFTEST_LEN; i++)
        t->map[t->off + i] = (char)(i * 37 + 11);
    if (ftw_verbs_selftest_qps(&t->qa, &t->qb) != FTW_OK)
        return "its QPs could not be made";
    if (ftw_verbs.mem == FTW_VERBS_MEM_IMPLICIT) {
        if (ftw_verbs_mr_get(t->map, t->half, FTW_VERBS_MR_REMOTE,
                             &t->smr) != FTW_OK ||
            ftw_verbs_mr_get(t->map + t->half, t->half, FTW_VERBS_MR_LOCAL,
                             &t->dmr) != FTW_OK)
            return "no implicit ODP MR";
        return NULL;
    }
    if (ftw_verbs_mr_reg(t->map, t->half, FTW_VERBS_MR_REMOTE, mode,
                         &t->smr) != FTW_OK ||
        ftw_verbs_mr_reg(t->map + t->half, t->half, FTW_VERBS_MR_LOCAL,
                         mode, &t->dmr) != FTW_OK)
        return "an MR with MW_BIND (and no REMOTE_READ) could not be "
               "registered";
    return NULL;
}

/* A READ through rkey of the test's bytes; 0: it read them right. */
static int mwtest_read(mwtest_t *t, uint32_t rkey)
{
    char *dst = t->map + t->half;

    memset(dst, 0, SELFTEST_LEN);
    if (ftw_verbs_read(t->qa, -1, (uintptr_t)(t->map + t->off), rkey,
                       dst, t->dmr->lkey, SELFTEST_LEN) != FTW_OK)
        return -1;
    return memcmp(dst, t->map + t->off, SELFTEST_LEN) != 0 ? 1 : 0;
}

/* Bind, read through the window, invalidate, read again (refused);
 * NULL, or why windows cannot be used, into buf. */
static const char *mwtest_run(mwtest_t *t, char *buf, size_t n)
{
    struct ibv_mw *mw;
    uint32_t rkey;
    int rc;

    if (ftw_verbs_mw_bind(t->qb, -1, t->smr,
                          (uintptr_t)(t->map + t->off), SELFTEST_LEN,
                          &mw, &rkey) != FTW_OK) {
        snprintf(buf, n, "binding a window over %s memory failed (%s)",
                 ftw_verbs.mem == FTW_VERBS_MEM_PIN ? "pinned" : "ODP",
                 ibv_wc_status_str(ftw_verbs.last_wc_status));
        return buf;
    }
    rc = mwtest_read(t, rkey);
    if (rc != 0) {
        ftw_verbs_mw_unbind(NULL, -1, mw, rkey);
        snprintf(buf, n, "a READ through a window %s",
                 rc < 0 ? "failed" : "read wrong data");
        return buf;
    }
    if (ftw_verbs_mw_unbind(t->qb, -1, mw, rkey) != 0)
        return "LOCAL_INV of a window failed";
    if (mwtest_read(t, rkey) >= 0)
        return "a READ through an invalidated window still read";
    return NULL;
}

void ftw_verbs_mw_choose(int loud)
{
    mwtest_t t = { 0 };
    const char *why = NULL;
    char buf[160];

    if (!ftw_cfg.verbs_mw || ftw_verbs.mem == FTW_VERBS_MEM_NONE)
        return;
    if (ftw_verbs.max_mw <= 0)
        why = "the device has no memory windows (max_mw 0)";
    ftw_verbs.mw = why == NULL;     /* the MRs below: MW_BIND only */
    if (why == NULL)
        why = mwtest_setup(&t);
    if (why == NULL)
        why = mwtest_run(&t, buf, sizeof(buf));
    mwtest_free(&t);
    /* Not its window either: every window a message gets must be newer
     * than the QPs (made after this).  A killed process's verbs objects
     * are destroyed newest first, and rxe (Linux 7.3) waits for good in
     * destroying a QP that an older type 2 window is still bound to. */
    ftw_verbs_mw_close();
    ftw_verbs.mw = why == NULL;
    if (why != NULL) {
        ftw_log(loud ? FTW_LOG_WARN : FTW_LOG_INFO, "verbs: no memory "
                "windows on %s (%s): peers read through the memory regions, "
                "%s", ftw_verbs_dev_name(), why,
                ftw_verbs.mem == FTW_VERBS_MEM_PIN ?
                "one per message" : "which cover more than each message");
        return;
    }
    ftw_verbs_md_tighten();
    ftw_info("verbs: %s: a type 2 memory window per message", ftw_verbs_dev_name());
}
