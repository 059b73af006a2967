/*
 * The verbs transport's endpoints: RC QPs, their connection, RDMA READ
 * and the wait for its completion, which watches the failure detector and
 * flushes what is outstanding before it gives up.
 */
#define _GNU_SOURCE
#include "xport/verbs_int.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "detect/detect.h"
#include "util/log.h"

#define READ_MAX (1u << 30)     /* bytes per READ work request */
#define STALL_SECS 30           /* a READ that makes no progress: error */

/* qp (just made, or reset) to INIT: remote READ, and type 2 windows bound
 * through it when they are in use. */
static int qp_init(struct ibv_qp *qp)
{
    struct ibv_qp_attr init = {
        .qp_state = IBV_QPS_INIT, .port_num = ftw_verbs.port,
        .qp_access_flags = IBV_ACCESS_REMOTE_READ |
                           (ftw_verbs.mw_bind ? IBV_ACCESS_MW_BIND : 0),
    };

    if (ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                      IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
        ftw_warn_sparse("verbs: ibv_modify_qp(%s, INIT): %m",
                        ftw_verbs_dev_name());
        return -1;
    }
    return 0;
}

struct ibv_qp *ftw_verbs_qp_create(void)
{
    struct ibv_qp_init_attr a = {
        .send_cq = ftw_verbs.cq, .recv_cq = ftw_verbs.cq,
        .cap = { .max_send_wr = FTW_VERBS_QP_DEPTH, .max_recv_wr = 1,
                 .max_send_sge = 1, .max_recv_sge = 1 },
        .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
    };
    struct ibv_qp *qp = ibv_create_qp(ftw_verbs.pd, &a);

    if (qp == NULL) {
        ftw_warn("verbs: ibv_create_qp(%s, RC): %m", ftw_verbs_dev_name());
        return NULL;
    }
    if (qp_init(qp) != 0) {
        ibv_destroy_qp(qp);
        return NULL;
    }
    return qp;
}

ftw_status_t ftw_verbs_qp_reset(struct ibv_qp *qp)
{
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

    if (ibv_modify_qp(qp, &a, IBV_QP_STATE) != 0) {
        ftw_warn_sparse("verbs: ibv_modify_qp(%s, RESET): %m",
                        ftw_verbs_dev_name());
        return FTW_ST_IO_ERROR;
    }
    return qp_init(qp) == 0 ? FTW_OK : FTW_ST_IO_ERROR;
}

/* INIT -> RTR -> RTS towards the QP qpn of the process that sent a (its
 * first PSN a->psn), this side's first PSN sq_psn. */
ftw_status_t ftw_verbs_qp_connect(struct ibv_qp *qp, const ftw_verbs_addr_t *a,
                                  uint32_t qpn, uint32_t sq_psn)
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
        .rnr_retry = 7, .sq_psn = sq_psn, .max_rd_atomic = ftw_verbs.rd_atom,
    };

    memcpy(rtr.ah_attr.grh.dgid.raw, a->gid, sizeof(a->gid));
    if (ibv_modify_qp(qp, &rtr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
        ftw_warn("verbs: ibv_modify_qp(%s, RTR, remote QPN %u): %m",
                 ftw_verbs_dev_name(), qpn);
        return FTW_ST_IO_ERROR;
    }
    if (ibv_modify_qp(qp, &rts, IBV_QP_STATE | IBV_QP_TIMEOUT |
                      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                      IBV_QP_MAX_QP_RD_ATOMIC)) {
        ftw_warn("verbs: ibv_modify_qp(%s, RTS): %m", ftw_verbs_dev_name());
        return FTW_ST_IO_ERROR;
    }
    return FTW_OK;
}

/* This process's address, for peers and for its own loopback QPs. */
void ftw_verbs_addr_fill(ftw_verbs_addr_t *a, int ok, uint32_t probe_rkey)
{
    *a = (ftw_verbs_addr_t){ .ok = (uint32_t)ok, .psn = ftw_verbs.psn,
                             .lid = ftw_verbs.lid,
                             .mtu = (uint8_t)ftw_verbs.mtu,
                             .probe_rkey = probe_rkey };
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
                        ftw_verbs_dev_name(), len);
    }
    return rc;
}

/* Move qp to the error state: what is outstanding gets flushed. */
static void qp_kill(struct ibv_qp *qp)
{
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

    if (ibv_modify_qp(qp, &a, IBV_QP_STATE) != 0)
        ftw_warn_sparse("verbs: ibv_modify_qp(%s, ERR): %m", ftw_verbs_dev_name());
}

/* Seconds since t0. */
static double secs_since(const struct timespec *t0)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) +
           (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* What a completion was for; an error completion's opcode is undefined. */
static const char *wc_opcode_name(enum ibv_wc_opcode op)
{
    switch (op) {
    case IBV_WC_RDMA_READ: return "RDMA READ";
    case IBV_WC_BIND_MW: return "BIND_MW";
    case IBV_WC_LOCAL_INV: return "LOCAL_INV";
    default: return "a work request";
    }
}

/* Count the n completions in wc; the first error sets *st_p. */
static int wc_check(const struct ibv_wc *wc, int n, int peer,
                    ftw_status_t *st_p)
{
    for (int i = 0; i < n; i++) {
        if (wc[i].status == IBV_WC_SUCCESS || *st_p != FTW_OK)
            continue;
        ftw_verbs.last_wc_status = wc[i].status;
        *st_p = FTW_ST_IO_ERROR;
        if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
            ftw_log_sparse(peer < 0 ? FTW_LOG_INFO : FTW_LOG_WARN,"verbs: %s on the QP to world rank %d on %s: "
                            "%s (%d)", wc_opcode_name(wc[i].opcode), peer,
                            ftw_verbs_dev_name(),
                            ibv_wc_status_str(wc[i].status), wc[i].status);
    }
    return n;
}

/* Why a wait must stop: the peer failed, or nothing completed for
 * STALL_SECS (a live peer whose READ the device lost: better an error
 * than a hang), or the self-test's FTW_VERBS_SELFTEST_SECS are over.  FTW_OK: go on
 * waiting. */
static ftw_status_t wait_verdict(int peer, int n, double idle, int *slow_p)
{
    if (peer < 0)
        return idle < FTW_VERBS_SELFTEST_SECS ? FTW_OK : FTW_ST_IO_ERROR;
    ftw_detect_peek();
    if (ftw_detect_is_failed(peer))
        return FTW_ST_PEER_FAILED;
    if (idle >= 2 && !*slow_p) {
        *slow_p = 1;
        ftw_warn_sparse("verbs: %d READs from world rank %d on %s: nothing "
                        "completed for 2 s", n, peer, ftw_verbs_dev_name());
    }
    if (idle < STALL_SECS)
        return FTW_OK;
    ftw_error("verbs: %d READs from world rank %d on %s: nothing completed "
              "for %d s, the QP is shut down", n, peer, ftw_verbs_dev_name(),
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
            ftw_error("verbs: ibv_poll_cq(%s) failed", ftw_verbs_dev_name());
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
ftw_status_t ftw_verbs_read(struct ibv_qp *qp, int peer, uint64_t raddr,
                             uint32_t rkey, char *local, uint32_t lkey,
                             size_t len)
{
    ftw_status_t st = FTW_OK;

    for (size_t off = 0; off < len && st == FTW_OK;) {
        int posted = 0;

        while (off < len && posted < FTW_VERBS_QP_DEPTH / 2) {
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

ftw_status_t ftw_verbs_post_one(struct ibv_qp *qp, int peer,
                                struct ibv_send_wr *wr)
{
    struct ibv_send_wr *bad;
    int rc = ibv_post_send(qp, wr, &bad);

    if (rc != 0) {
        errno = rc;
        ftw_warn_sparse("verbs: ibv_post_send(%s, opcode %d) to world rank "
                        "%d: %m", ftw_verbs_dev_name(), wr->opcode, peer);
        return FTW_ST_IO_ERROR;
    }
    return cq_wait(qp, peer, 1);
}
