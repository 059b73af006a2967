/*
 * The verbs transport: the receiver pulls the sender's buffer with RDMA
 * READ over one RC QP per peer.  The sender's memory is opened for
 * REMOTE_READ only, never REMOTE_WRITE: no peer can write into this
 * process; the only DMA into a receive buffer is this process's own READ,
 * and a READ that must stop (the peer failed) is flushed by moving the QP
 * to the error state and polling the CQ until every work request has
 * completed, before the receive returns.
 *
 * Connection: at MPI_Init (ftw_xport_verbs_init, collective), not lazily
 * through the control communicator: every process creates one QP per
 * peer, one MPI_Allgather exchanges GID, LID, QPNs, PSN and the rkey of
 * the probe word, every QP goes to RTS and a barrier ends it.  Lazy
 * connection would need a handshake that survives a peer dying halfway;
 * the eager one costs n-1 QPs per process (fine for the jobs ftwrap sees).
 *
 * Memory: see verbs_md.c.  Whether ODP is trusted is decided by a
 * data-checked RDMA READ through ODP memory on a loopback QP pair at
 * MPI_Init (rxe at active MTU 1024 completes such READs with wrong data).
 */
#define _GNU_SOURCE
#include "xport/verbs_int.h"
#include "xport/xport.h"

#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "detect/detect.h"
#include "util/config.h"
#include "util/log.h"
#include "util/stats.h"

#define QP_DEPTH 64             /* send queue: READs in flight per QP */
#define READ_MAX (1u << 30)     /* bytes per READ work request */
#define SELFTEST_LEN (4 * 4096 + 123)
#define SELFTEST_OFF 100
#define SELFTEST_SECS 5
#define STALL_SECS 30           /* a READ that makes no progress: error */
#define BOUNCE_LEN (4u << 20)   /* page-aligned READs land here first */

ftw_verbs_iface_t ftw_verbs;

/* What one process tells the others; qpn[] (one per world rank) follows. */
typedef struct {
    uint8_t gid[16];
    uint32_t ok;            /* 1: this process pulls and serves over verbs */
    uint32_t psn;
    uint32_t probe_rkey;
    uint16_t lid;
    uint8_t mtu;
    uint8_t pad;
} verbs_addr_t;

static struct {
    int n, self;
    uint32_t psn;
    struct ibv_qp **qp;         /* [n], NULL for self */
    uint8_t *ok;                /* [n] peer connected */
    uint8_t *dead;              /* [n] QP in error (flushed) */
    uint32_t *probe_rkey;       /* [n] */
    struct ibv_mr *probe_mr;    /* this process's probe word */
    pthread_mutex_t lock;       /* one pull at a time on the shared CQ */
} vb = { .lock = PTHREAD_MUTEX_INITIALIZER };

static const char *dev_name(void)
{
    return ibv_get_device_name(ftw_verbs.ctx->device);
}

static int mtu_bytes(enum ibv_mtu m)
{
    return 128 << m;
}

/* ---- device ------------------------------------------------------------ */

/* The device FTW_VERBS_DEVICE names, or the first. */
static struct ibv_context *dev_open(int loud)
{
    int level = loud ? FTW_LOG_WARN : FTW_LOG_INFO;
    struct ibv_device **list;
    struct ibv_context *ctx = NULL;
    int n = 0, i;

    list = ibv_get_device_list(&n);
    if (list == NULL || n == 0) {
        ftw_log(level, "verbs: no RDMA device (ibv_get_device_list: %s); "
                "large messages go through cma on this host, else the MPI",
                list == NULL ? strerror(errno) : "none");
        goto out;
    }
    for (i = 0; i < n; i++)
        if (!ftw_cfg.verbs_device[0] ||
            !strcmp(ibv_get_device_name(list[i]), ftw_cfg.verbs_device))
            break;
    if (i == n) {
        ftw_log(level, "verbs: FTW_VERBS_DEVICE=%s not found; large "
                "messages go through cma on this host, else the MPI",
                ftw_cfg.verbs_device);
        goto out;
    }
    ctx = ibv_open_device(list[i]);
    if (ctx == NULL)
        ftw_log(level, "verbs: ibv_open_device(%s): %m",
                ibv_get_device_name(list[i]));
out:
    if (list != NULL)
        ibv_free_device_list(list);
    return ctx;
}

/* FTW_VERBS_GID_INDEX, or the first RoCE v2 IPv4-mapped GID, else 1. */
static int gid_pick(int tbl_len)
{
    static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };
    struct ibv_gid_entry e;
    char *end;
    long v;

    if (strcmp(ftw_cfg.verbs_gid_index, "auto") != 0) {
        v = strtol(ftw_cfg.verbs_gid_index, &end, 10);
        if (*end == '\0' && v >= 0 && v < tbl_len)
            return (int)v;
        ftw_warn("FTW_VERBS_GID_INDEX=%s is not a GID index of %s "
                 "(0..%d); using auto", ftw_cfg.verbs_gid_index, dev_name(),
                 tbl_len - 1);
    }
    for (int i = 0; i < tbl_len; i++)
        if (ibv_query_gid_ex(ftw_verbs.ctx, ftw_verbs.port, (uint32_t)i, &e,
                             0) == 0 &&
            e.gid_type == IBV_GID_TYPE_ROCE_V2 &&
            !memcmp(e.gid.raw, v4, sizeof(v4)))
            return i;
    return tbl_len > 1 ? 1 : 0;
}

/* Port 1's attributes, GID and ODP caps into ftw_verbs. */
static ftw_status_t port_query(void)
{
    struct ibv_device_attr_ex dx;
    struct ibv_port_attr pa;

    if (ibv_query_device_ex(ftw_verbs.ctx, NULL, &dx) != 0 ||
        ibv_query_port(ftw_verbs.ctx, ftw_verbs.port, &pa) != 0) {
        ftw_warn("verbs: ibv_query_device_ex/ibv_query_port on %s: %m",
                 dev_name());
        return FTW_ST_IO_ERROR;
    }
    if (pa.state != IBV_PORT_ACTIVE) {
        ftw_warn("verbs: %s port %u is not active", dev_name(),
                 ftw_verbs.port);
        return FTW_ST_UNSUPPORTED;
    }
    ftw_verbs.mtu = pa.active_mtu;
    ftw_verbs.lid = pa.lid;
    ftw_verbs.is_eth = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    ftw_verbs.rd_atom = (uint8_t)(dx.orig_attr.max_qp_rd_atom < 16 ?
                                  dx.orig_attr.max_qp_rd_atom : 16);
    if (ftw_verbs.rd_atom == 0)
        ftw_verbs.rd_atom = 1;
    ftw_verbs.odp_caps = dx.odp_caps.general_caps;
    ftw_verbs.rc_odp_caps = dx.odp_caps.per_transport_caps.rc_odp_caps;
    ftw_verbs.gid_index = gid_pick(pa.gid_tbl_len);
    if (ibv_query_gid(ftw_verbs.ctx, ftw_verbs.port, ftw_verbs.gid_index,
                      &ftw_verbs.gid) != 0) {
        ftw_warn("verbs: ibv_query_gid(%s, port %u, index %d): %m",
                 dev_name(), ftw_verbs.port, ftw_verbs.gid_index);
        return FTW_ST_IO_ERROR;
    }
    return FTW_OK;
}

/* Device, PD, CQ. */
static ftw_status_t iface_open(int loud)
{
    ftw_verbs.port = 1;
    ftw_verbs.ctx = dev_open(loud);
    if (ftw_verbs.ctx == NULL)
        return FTW_ST_UNSUPPORTED;
    if (port_query() != FTW_OK)
        goto err_close;
    ftw_verbs.pd = ibv_alloc_pd(ftw_verbs.ctx);
    if (ftw_verbs.pd == NULL) {
        ftw_warn("verbs: ibv_alloc_pd(%s): %m", dev_name());
        goto err_close;
    }
    ftw_verbs.cq = ibv_create_cq(ftw_verbs.ctx, 2 * QP_DEPTH, NULL, NULL, 0);
    if (ftw_verbs.cq == NULL) {
        ftw_warn("verbs: ibv_create_cq(%s): %m", dev_name());
        goto err_dealloc_pd;
    }
    return FTW_OK;

err_dealloc_pd:
    ibv_dealloc_pd(ftw_verbs.pd);
err_close:
    ibv_close_device(ftw_verbs.ctx);
    ftw_verbs.ctx = NULL;
    return FTW_ST_UNSUPPORTED;
}

static void iface_close(void)
{
    ftw_verbs_md_close();
    if (ftw_verbs.ctx == NULL)
        return;
    ibv_destroy_cq(ftw_verbs.cq);
    ibv_dealloc_pd(ftw_verbs.pd);
    ibv_close_device(ftw_verbs.ctx);
    ftw_verbs.ctx = NULL;
}

/* ---- QPs --------------------------------------------------------------- */

static struct ibv_qp *qp_create(void)
{
    struct ibv_qp_init_attr a = {
        .send_cq = ftw_verbs.cq, .recv_cq = ftw_verbs.cq,
        .cap = { .max_send_wr = QP_DEPTH, .max_recv_wr = 1,
                 .max_send_sge = 1, .max_recv_sge = 1 },
        .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
    };
    struct ibv_qp_attr init = {
        .qp_state = IBV_QPS_INIT, .port_num = ftw_verbs.port,
        .qp_access_flags = IBV_ACCESS_REMOTE_READ,
    };
    struct ibv_qp *qp = ibv_create_qp(ftw_verbs.pd, &a);

    if (qp == NULL) {
        ftw_warn("verbs: ibv_create_qp(%s, RC): %m", dev_name());
        return NULL;
    }
    if (ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                      IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
        ftw_warn("verbs: ibv_modify_qp(%s, INIT): %m", dev_name());
        ibv_destroy_qp(qp);
        return NULL;
    }
    return qp;
}

/* INIT -> RTR -> RTS towards the QP qpn of the process that sent a. */
static ftw_status_t qp_connect(struct ibv_qp *qp, const verbs_addr_t *a,
                               uint32_t qpn)
{
    struct ibv_qp_attr rtr = {
        .qp_state = IBV_QPS_RTR, .dest_qp_num = qpn,
        .path_mtu = a->mtu < ftw_verbs.mtu ? (enum ibv_mtu)a->mtu
                                           : ftw_verbs.mtu,
        .rq_psn = a->psn, .max_dest_rd_atomic = ftw_verbs.rd_atom,
        .min_rnr_timer = 12,
        .ah_attr = { .is_global = (uint8_t)ftw_verbs.is_eth,
                     .dlid = a->lid, .port_num = ftw_verbs.port,
                     .grh = { .sgid_index = (uint8_t)ftw_verbs.gid_index,
                              .hop_limit = 64 } },
    };
    /* timeout 18: 1.07 s per retry.  A dead peer is noticed by the
     * detector, not by retries; a live one may be slow (rxe in a TCG VM
     * timed out at 14, 67 ms). */
    struct ibv_qp_attr rts = {
        .qp_state = IBV_QPS_RTS, .timeout = 18, .retry_cnt = 7,
        .rnr_retry = 7, .sq_psn = vb.psn, .max_rd_atomic = ftw_verbs.rd_atom,
    };

    memcpy(rtr.ah_attr.grh.dgid.raw, a->gid, sizeof(a->gid));
    if (ibv_modify_qp(qp, &rtr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
        ftw_warn("verbs: ibv_modify_qp(%s, RTR, remote QPN %u): %m",
                 dev_name(), qpn);
        return FTW_ST_IO_ERROR;
    }
    if (ibv_modify_qp(qp, &rts, IBV_QP_STATE | IBV_QP_TIMEOUT |
                      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                      IBV_QP_MAX_QP_RD_ATOMIC)) {
        ftw_warn("verbs: ibv_modify_qp(%s, RTS): %m", dev_name());
        return FTW_ST_IO_ERROR;
    }
    return FTW_OK;
}

/* This process's address, for peers and for its own loopback QPs. */
static void addr_fill(verbs_addr_t *a, int ok)
{
    *a = (verbs_addr_t){ .ok = (uint32_t)ok, .psn = vb.psn,
                         .lid = ftw_verbs.lid, .mtu = (uint8_t)ftw_verbs.mtu,
                         .probe_rkey = vb.probe_mr ? vb.probe_mr->rkey : 0 };
    memcpy(a->gid, ftw_verbs.gid.raw, sizeof(a->gid));
}

/* ---- READ and completion ----------------------------------------------- */

/* Post READs of len bytes at raddr/rkey into local (lkey). */
static int read_post(struct ibv_qp *qp, uint64_t raddr, uint32_t rkey,
                     char *local, uint32_t lkey, size_t len)
{
    struct ibv_sge sge = { .addr = (uintptr_t)local, .length = (uint32_t)len,
                           .lkey = lkey };
    struct ibv_send_wr wr = {
        .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
        .send_flags = IBV_SEND_SIGNALED,
        .wr.rdma = { .remote_addr = raddr, .rkey = rkey },
    }, *bad;
    int rc = ibv_post_send(qp, &wr, &bad);

    if (rc != 0) {
        errno = rc;
        ftw_warn_sparse("verbs: ibv_post_send(%s, RDMA_READ %zu bytes): %m",
                        dev_name(), len);
    }
    return rc;
}

/* Move qp to the error state: what is outstanding gets flushed. */
static void qp_kill(struct ibv_qp *qp)
{
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

    if (ibv_modify_qp(qp, &a, IBV_QP_STATE) != 0)
        ftw_warn_sparse("verbs: ibv_modify_qp(%s, ERR): %m", dev_name());
}

/* Seconds since t0. */
static double secs_since(const struct timespec *t0)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) +
           (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* Count the n completions in wc; the first error sets *st_p. */
static int wc_check(const struct ibv_wc *wc, int n, int peer,
                    ftw_status_t *st_p)
{
    for (int i = 0; i < n; i++) {
        if (wc[i].status == IBV_WC_SUCCESS || *st_p != FTW_OK)
            continue;
        *st_p = FTW_ST_IO_ERROR;
        if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
            ftw_warn_sparse("verbs: RDMA READ from world rank %d on %s: %s",
                            peer, dev_name(), ibv_wc_status_str(wc[i].status));
    }
    return n;
}

/* Why a wait must stop: the peer failed, or nothing completed for
 * STALL_SECS (a live peer whose READ the device lost: better an error
 * than a hang), or the self-test's SELFTEST_SECS are over.  FTW_OK: go on
 * waiting. */
static ftw_status_t wait_verdict(int peer, int n, double idle, int *slow_p)
{
    if (peer < 0)
        return idle < SELFTEST_SECS ? FTW_OK : FTW_ST_IO_ERROR;
    ftw_detect_peek();
    if (ftw_detect_is_failed(peer))
        return FTW_ST_PEER_FAILED;
    if (idle >= 2 && !*slow_p) {
        *slow_p = 1;
        ftw_warn_sparse("verbs: %d READs from world rank %d on %s: nothing "
                        "completed for 2 s", n, peer, dev_name());
    }
    if (idle < STALL_SECS)
        return FTW_OK;
    ftw_error("verbs: %d READs from world rank %d on %s: nothing completed "
              "for %d s, the QP is shut down", n, peer, dev_name(),
              STALL_SECS);
    return FTW_ST_IO_ERROR;
}

/* Poll until the n work requests posted on qp have completed, watching
 * the failure detector (peer >= 0).  When the wait must stop (see
 * wait_verdict), the QP goes to the error state and polling goes on until
 * the flush has completed every request: no DMA lands after the return.
 * Empty polls sleep a little after a while, so that a device emulated in
 * the kernel (rxe) gets the CPU. */
static ftw_status_t cq_wait(struct ibv_qp *qp, int peer, int n)
{
    static const struct timespec nap = { .tv_nsec = 20000 };
    struct timespec t0;
    ftw_status_t st = FTW_OK, why;
    unsigned spin = 0;
    int killed = 0, slow = 0;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (n > 0) {
        struct ibv_wc wc[8];
        int got = ibv_poll_cq(ftw_verbs.cq, 8, wc);

        if (got < 0) {
            ftw_error("verbs: ibv_poll_cq(%s) failed", dev_name());
            return FTW_ST_FATAL;    /* DMA may still land: cannot go on */
        }
        if (got > 0) {
            n -= wc_check(wc, got, peer, &st);
            clock_gettime(CLOCK_MONOTONIC, &t0);    /* progress */
            spin = 0;
            continue;
        }
        if (killed || (++spin & 63) != 0)
            continue;
        if (spin >= 1024)
            nanosleep(&nap, NULL);
        why = wait_verdict(peer, n, secs_since(&t0), &slow);
        if (why == FTW_OK)
            continue;
        st = why;
        qp_kill(qp);
        killed = 1;
    }
    if (peer >= 0 && st == FTW_ST_IO_ERROR && ftw_detect_is_failed(peer))
        st = FTW_ST_PEER_FAILED;
    return st;
}

/* READ len bytes at raddr/rkey into local through qp, lkey covering it. */
static ftw_status_t read_run(struct ibv_qp *qp, int peer, uint64_t raddr,
                             uint32_t rkey, char *local, uint32_t lkey,
                             size_t len)
{
    ftw_status_t st = FTW_OK;

    for (size_t off = 0; off < len && st == FTW_OK;) {
        int posted = 0;

        while (off < len && posted < QP_DEPTH / 2) {
            size_t n = len - off < READ_MAX ? len - off : READ_MAX;

            if (read_post(qp, raddr + off, rkey, local + off, lkey, n))
                break;
            posted++;
            off += n;
        }
        st = cq_wait(qp, peer, posted);
        if (st == FTW_OK && posted == 0)
            st = FTW_ST_IO_ERROR;
    }
    return st;
}

/* ---- the ODP self-test -------------------------------------------------- */

/* Register the two halves of the self-test's mapping as mode says (the
 * implicit MR for both), page-aligned like the MR cache's. */
static ftw_status_t selftest_mrs(char *map, size_t half, ftw_verbs_mem_t mode,
                                 struct ibv_mr **smr, struct ibv_mr **dmr)
{
    *smr = *dmr = NULL;
    if (mode == FTW_VERBS_MEM_IMPLICIT)
        return ftw_verbs_mr_get(map, half, FTW_VERBS_MR_REMOTE,
                                smr) == FTW_OK ?
               ftw_verbs_mr_get(map + half, half, FTW_VERBS_MR_LOCAL, dmr) :
               FTW_ST_IO_ERROR;
    if (ftw_verbs_mr_reg(map, half, FTW_VERBS_MR_REMOTE, FTW_VERBS_MEM_ODP,
                         smr) != FTW_OK)
        return FTW_ST_IO_ERROR;
    return ftw_verbs_mr_reg(map + half, half, FTW_VERBS_MR_LOCAL,
                            FTW_VERBS_MEM_ODP, dmr);
}

/* The first byte of the destination half of the self-test's mapping that
 * is not what it should be (the data, or the guard pattern around it),
 * as an offset from dst (may be negative), or LONG_MIN if all is right. */
static long selftest_check(const char *map, size_t half, const char *src,
                           const char *dst)
{
    for (const char *q = map + half; q < map + 2 * half; q++) {
        long i = q - dst;
        char want = i >= 0 && i < SELFTEST_LEN ? src[i] : (char)0xa5;

        if (*q != want)
            return i;
    }
    return LONG_MIN;
}

/* Two QPs of this process, connected to each other. */
static ftw_status_t selftest_qps(struct ibv_qp **qa, struct ibv_qp **qb)
{
    verbs_addr_t me;

    *qa = qp_create();
    *qb = qp_create();
    if (*qa == NULL || *qb == NULL)
        return FTW_ST_IO_ERROR;
    addr_fill(&me, 1);
    if (qp_connect(*qa, &me, (*qb)->qp_num) != FTW_OK ||
        qp_connect(*qb, &me, (*qa)->qp_num) != FTW_OK)
        return FTW_ST_IO_ERROR;
    return FTW_OK;
}

/* One READ of SELFTEST_LEN bytes (several pages, several MTUs) between
 * two QPs of this process, through ODP memory as mode says, source and
 * destination soff and doff bytes into a page.  Both sit in one private
 * mapping with guard bytes around them, so a READ that writes astray is
 * caught here and hurts nothing else.  *bad_p: see selftest_check. */
static ftw_status_t selftest_read(ftw_verbs_mem_t mode, size_t soff,
                                  size_t doff, long *bad_p)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t half = (SELFTEST_LEN / page + 3) * page;
    struct ibv_qp *qa = NULL, *qb = NULL;
    struct ibv_mr *smr = NULL, *dmr = NULL;
    char *map, *src, *dst;
    ftw_status_t st;

    *bad_p = LONG_MIN;
    map = mmap(NULL, 2 * half, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        ftw_warn("verbs: mmap of %zu bytes for the ODP self-test: %m",
                 2 * half);
        return FTW_ST_NO_MEMORY;
    }
    memset(map, 0xa5, 2 * half);
    src = map + page + soff;
    dst = map + half + page + doff;
    for (size_t i = 0; i < SELFTEST_LEN; i++)
        src[i] = (char)(i * 131 + i / 4096 + 7);
    st = selftest_qps(&qa, &qb);
    if (st == FTW_OK)
        st = selftest_mrs(map, half, mode, &smr, &dmr);
    if (st == FTW_OK)
        st = read_run(qa, -1, (uintptr_t)src, smr->rkey, dst, dmr->lkey,
                      SELFTEST_LEN);
    if (st == FTW_OK)
        *bad_p = selftest_check(map, half, src, dst);
    if (mode != FTW_VERBS_MEM_IMPLICIT) {
        if (smr != NULL)
            ibv_dereg_mr(smr);
        if (dmr != NULL)
            ibv_dereg_mr(dmr);
    }
    if (qa != NULL)
        ibv_destroy_qp(qa);
    if (qb != NULL)
        ibv_destroy_qp(qb);
    munmap(map, 2 * half);
    return st;
}

/* Refuse ODP: say why (device and active MTU), use the fallback. */
static void odp_refuse(int loud, ftw_status_t st, long bad)
{
    ftw_verbs_mem_t fb = ftw_cfg.verbs_fallback == FTW_VERBS_FALLBACK_PIN ?
                         FTW_VERBS_MEM_PIN : FTW_VERBS_MEM_NONE;
    const char *fbname = fb == FTW_VERBS_MEM_PIN ? "pin" : "native";

    if (st == FTW_ST_UNSUPPORTED)
        ftw_info("verbs: %s offers no ODP for RC READ; FTW_VERBS_FALLBACK=%s",
                 dev_name(), fbname);
    else if (st == FTW_OK)
        ftw_log(loud ? FTW_LOG_WARN : FTW_LOG_INFO, "verbs: ODP refused on "
                "%s at active MTU %d: a page-aligned RDMA READ of %d bytes "
                "through ODP memory completed but byte %ld (from the "
                "destination's start) is wrong; FTW_VERBS_FALLBACK=%s",
                dev_name(), mtu_bytes(ftw_verbs.mtu), SELFTEST_LEN, bad,
                fbname);
    else
        ftw_log(loud ? FTW_LOG_WARN : FTW_LOG_INFO, "verbs: ODP refused on "
                "%s at active MTU %d: the self-test READ failed (%s); "
                "FTW_VERBS_FALLBACK=%s", dev_name(), mtu_bytes(ftw_verbs.mtu),
                ftw_status_string(st), fbname);
    ftw_verbs_md_close();
    ftw_verbs.mem = fb;
}

/* The memory mode: ODP (implicit, else explicit) when the device offers
 * it for RC READ and the self-test reads right, else the fallback.  A
 * device that gets page-aligned READs right but misplaces the others
 * (rxe in Linux 7.3 ignores the offset into a page of an ODP access)
 * keeps ODP with every READ page-aligned (odp_aligned, see pull_aligned). */
static void mem_choose(int loud)
{
    long bad = LONG_MIN;
    ftw_status_t st;

    if (!(ftw_verbs.odp_caps & IBV_ODP_SUPPORT) ||
        !(ftw_verbs.rc_odp_caps & IBV_ODP_SUPPORT_READ)) {
        odp_refuse(0, FTW_ST_UNSUPPORTED, 0);
        return;
    }
    ftw_verbs.mem = ftw_verbs.odp_caps & IBV_ODP_SUPPORT_IMPLICIT ?
                    FTW_VERBS_MEM_IMPLICIT : FTW_VERBS_MEM_ODP;
    ftw_verbs_md_open();    /* may step down from implicit to explicit */
    st = selftest_read(ftw_verbs.mem, 0, 0, &bad);
    if (st != FTW_OK || bad != LONG_MIN) {
        odp_refuse(loud, st, bad);
        return;
    }
    st = selftest_read(ftw_verbs.mem, SELFTEST_OFF, SELFTEST_OFF / 2, &bad);
    ftw_verbs.odp_aligned = st != FTW_OK || bad != LONG_MIN;
    if (ftw_verbs.odp_aligned)
        ftw_log(loud ? FTW_LOG_WARN : FTW_LOG_INFO, "verbs: ODP on %s at "
                "active MTU %d misplaces data at addresses that are not "
                "page-aligned (self-test: %s, byte %ld wrong): every READ "
                "starts on a page boundary and lands in a bounce buffer",
                dev_name(), mtu_bytes(ftw_verbs.mtu), ftw_status_string(st),
                bad);
    ftw_info("verbs: %s, active MTU %d, GID index %d: %s ODP%s",
             dev_name(), mtu_bytes(ftw_verbs.mtu), ftw_verbs.gid_index,
             ftw_verbs.mem == FTW_VERBS_MEM_IMPLICIT ? "implicit"
                                                     : "explicit",
             ftw_verbs.odp_aligned ? ", page-aligned READs" : "");
}

/* ---- init and fini ------------------------------------------------------ */

/* QPs to every peer and the probe word's MR. */
static ftw_status_t local_setup(uint64_t probe_addr)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t p = (uintptr_t)probe_addr & ~(page - 1);

    for (int i = 0; i < vb.n; i++)
        if (i != vb.self && (vb.qp[i] = qp_create()) == NULL)
            return FTW_ST_IO_ERROR;
    return ftw_verbs_mr_reg((void *)p, page, FTW_VERBS_MR_REMOTE,
                            ftw_verbs.mem == FTW_VERBS_MEM_PIN ?
                            FTW_VERBS_MEM_PIN : FTW_VERBS_MEM_ODP,
                            &vb.probe_mr);
}

static void local_teardown(void)
{
    for (int i = 0; vb.qp != NULL && i < vb.n; i++)
        if (vb.qp[i] != NULL)
            ibv_destroy_qp(vb.qp[i]);
    if (vb.probe_mr != NULL)
        ibv_dereg_mr(vb.probe_mr);
    vb.probe_mr = NULL;
    iface_close();
    free(vb.qp);
    free(vb.ok);
    free(vb.dead);
    free(vb.probe_rkey);
    vb.qp = NULL;
    vb.ok = vb.dead = NULL;
    vb.probe_rkey = NULL;
}

/* Connect to every peer that is ready; *addrs: every process's record. */
static void peers_connect(const char *addrs, size_t rec)
{
    for (int i = 0; i < vb.n; i++) {
        const verbs_addr_t *a = (const verbs_addr_t *)(addrs + rec * i);
        const uint32_t *qpn = (const uint32_t *)(a + 1);

        if (i == vb.self || !a->ok)
            continue;
        vb.probe_rkey[i] = a->probe_rkey;
        vb.ok[i] = qp_connect(vb.qp[i], a, qpn[vb.self]) == FTW_OK;
    }
}

/* Everyone's record: addr, then the QPN for each world rank. */
static ftw_status_t addrs_exchange(int ok)
{
    size_t rec = sizeof(verbs_addr_t) + sizeof(uint32_t) * (size_t)vb.n;
    char *all = malloc(rec * (size_t)vb.n), *mine = calloc(1, rec);
    ftw_status_t st = FTW_ST_NO_MEMORY;

    if (all != NULL && mine != NULL) {
        uint32_t *qpn = (uint32_t *)(mine + sizeof(verbs_addr_t));

        addr_fill((verbs_addr_t *)mine, ok);
        for (int i = 0; ok && i < vb.n; i++)
            qpn[i] = vb.qp[i] != NULL ? vb.qp[i]->qp_num : 0;
        st = FTW_OK;
    }
    /* Every process takes part, even one that could not allocate. */
    if (PMPI_Allgather(mine != NULL ? mine : all, (int)rec, MPI_BYTE, all,
                       (int)rec, MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS) {
        ftw_error("verbs: MPI_Allgather of the QP addresses failed");
        st = FTW_ST_MPI_ERROR;
    }
    if (st == FTW_OK && ok)
        peers_connect(all, rec);
    free(all);
    free(mine);
    return st;
}

ftw_status_t ftw_xport_verbs_init(const ftw_xport_peer_t *peers, int npeers,
                                  int self)
{
    int loud = ftw_cfg.xport == FTW_XPORT_VERBS && self == 0;
    ftw_status_t st;
    int ok = 0;

    vb.n = npeers;
    vb.self = self;
    vb.qp = calloc((size_t)npeers, sizeof(*vb.qp));
    vb.ok = calloc((size_t)npeers, 1);
    vb.dead = calloc((size_t)npeers, 1);
    vb.probe_rkey = calloc((size_t)npeers, sizeof(*vb.probe_rkey));
    if (getrandom(&vb.psn, sizeof(vb.psn), 0) != (ssize_t)sizeof(vb.psn))
        vb.psn = (uint32_t)getpid();
    vb.psn &= 0xffffff;
    st = vb.qp && vb.ok && vb.dead && vb.probe_rkey ? iface_open(loud)
                                                   : FTW_ST_NO_MEMORY;
    if (st == FTW_OK)
        mem_choose(loud);
    if (st == FTW_OK && ftw_verbs.mem != FTW_VERBS_MEM_NONE)
        ok = local_setup(peers[self].probe_addr) == FTW_OK;
    if (addrs_exchange(ok) != FTW_OK)
        ok = 0;
    PMPI_Barrier(MPI_COMM_WORLD);   /* every QP is at RTR before a READ */
    if (ok) {
        ftw_stat_add(ftw_verbs.mem == FTW_VERBS_MEM_PIN ? FTW_STAT_VERBS_PIN
                                                        : FTW_STAT_VERBS_ODP,
                     1);
        ftw_stat_add(FTW_STAT_VERBS_ODP_ALIGNED,
                     (uint64_t)(ftw_verbs.odp_aligned &&
                                ftw_verbs.mem != FTW_VERBS_MEM_PIN));
        return FTW_OK;
    }
    if (st == FTW_OK && ftw_verbs.mem == FTW_VERBS_MEM_NONE) {
        local_teardown();
        ftw_verbs.mem = FTW_VERBS_MEM_NONE;
        return FTW_OK;              /* verbs works, its messages go native */
    }
    local_teardown();
    return FTW_ST_UNSUPPORTED;
}

void ftw_xport_verbs_fini(void)
{
    pthread_mutex_lock(&vb.lock);
    local_teardown();
    pthread_mutex_unlock(&vb.lock);
}

int ftw_xport_verbs_native(void)
{
    return ftw_verbs.mem == FTW_VERBS_MEM_NONE;
}

/* ---- the ops ------------------------------------------------------------ */

/* READ len bytes of world rank peer, local bytes already covered by mr. */
static ftw_status_t peer_read(int peer, uint64_t addr, uint32_t rkey,
                              void *local, size_t len, struct ibv_mr *mr)
{
    ftw_status_t st;

    if (vb.qp == NULL || peer < 0 || peer >= vb.n || !vb.ok[peer])
        return FTW_ST_UNSUPPORTED;
    if (vb.dead[peer])
        return ftw_detect_is_failed(peer) ? FTW_ST_PEER_FAILED
                                          : FTW_ST_IO_ERROR;
    st = read_run(vb.qp[peer], peer, addr, rkey, local, mr->lkey, len);
    if (st != FTW_OK)
        vb.dead[peer] = 1;      /* in the error state, flushed */
    return st;
}

/* ODP that gets only page-aligned accesses right: READ whole pages of
 * the sender from the page boundary below addr (its MR covers them: it
 * is page-rounded, or implicit) into a page-aligned bounce buffer, and
 * copy the message's bytes out. */
static ftw_status_t pull_aligned(int peer, uint64_t addr, uint32_t rkey,
                                 char *local, size_t len)
{
    static char *bounce;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t end = addr + len, r = addr & ~(page - 1), n;
    struct ibv_mr *mr;
    ftw_status_t st;

    if (bounce == NULL && (bounce = aligned_alloc(page, BOUNCE_LEN)) == NULL)
        return FTW_ST_NO_MEMORY;
    st = ftw_verbs_mr_get(bounce, BOUNCE_LEN, FTW_VERBS_MR_LOCAL, &mr);
    for (; st == FTW_OK && r < end; r += n) {
        uint64_t from = r < addr ? addr : r;

        n = end - r < BOUNCE_LEN ? end - r : BOUNCE_LEN;
        st = peer_read(peer, r, rkey, bounce, n, mr);
        if (st == FTW_OK)
            memcpy(local + (from - addr), bounce + (from - r), r + n - from);
    }
    return st;
}

static ftw_status_t verbs_pull_key(int peer, uint64_t addr, uint64_t key,
                                   void *local, size_t len)
{
    struct ibv_mr *mr;
    ftw_status_t st;

    ftw_debug("verbs: READ %zu bytes at 0x%llx key 0x%llx of world rank %d "
              "into %p", len, (unsigned long long)addr,
              (unsigned long long)key, peer, local);
    pthread_mutex_lock(&vb.lock);
    if (ftw_verbs.odp_aligned) {
        st = pull_aligned(peer, addr, (uint32_t)key, local, len);
    } else {
        st = ftw_verbs_mr_get(local, len, FTW_VERBS_MR_LOCAL, &mr);
        if (st == FTW_OK) {
            st = peer_read(peer, addr, (uint32_t)key, local, len, mr);
            ftw_verbs_mr_put(mr);
        }
    }
    pthread_mutex_unlock(&vb.lock);
    return st;
}

/* A real READ of the peer's probe word, its value checked. */
static ftw_status_t verbs_reach(int peer, const ftw_xport_peer_t *p)
{
    static uint64_t word;
    ftw_status_t st;

    word = 0;
    st = verbs_pull_key(peer, p->probe_addr,
                        vb.probe_rkey != NULL ? vb.probe_rkey[peer] : 0,
                        &word, sizeof(word));
    if (st == FTW_OK && word != ftw_xport_probe_value(p->pid))
        st = FTW_ST_IO_ERROR;
    if (st != FTW_OK)
        ftw_log_sparse(FTW_LOG_INFO, "verbs cannot read world rank %d: %s; "
                       "its large messages go another way", peer,
                       ftw_status_string(st));
    return st;
}

static ftw_status_t verbs_expose(int peer, const void *addr, size_t len,
                                 uint64_t *key_p, void **mem_p)
{
    struct ibv_mr *mr;
    ftw_status_t st;

    (void)peer;
    pthread_mutex_lock(&vb.lock);
    st = ftw_verbs_mr_get(addr, len, FTW_VERBS_MR_REMOTE, &mr);
    pthread_mutex_unlock(&vb.lock);
    if (st != FTW_OK)
        return st;
    *key_p = mr->rkey;
    *mem_p = ftw_verbs.mem == FTW_VERBS_MEM_PIN ? mr : NULL;
    return FTW_OK;
}

static void verbs_release(void *mem)
{
    pthread_mutex_lock(&vb.lock);
    ftw_verbs_mr_put(mem);
    pthread_mutex_unlock(&vb.lock);
}

/* The stub for what verbs does not do: pulls need the key. */
static ftw_status_t verbs_pull(int pid, uint64_t addr, void *local,
                               size_t len)
{
    (void)pid;
    (void)addr;
    (void)local;
    (void)len;
    return FTW_ST_UNSUPPORTED;
}

const ftw_xport_ops_t ftw_xport_verbs_ops = {
    .name = "verbs",
    .reach = verbs_reach,
    .pull = verbs_pull,
    .expose = verbs_expose,
    .release = verbs_release,
    .pull_key = verbs_pull_key,
};
