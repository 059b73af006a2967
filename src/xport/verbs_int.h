/*
 * Inside the verbs transport: the interface (device, PD, CQ, memory mode)
 * shared by verbs.c (QPs, connection, RDMA READ, the ODP self-test) and
 * verbs_md.c (memory regions: one implicit ODP MR, a cache of explicit
 * ODP MRs, or a registration per message).
 */
#ifndef FTW_XPORT_VERBS_INT_H
#define FTW_XPORT_VERBS_INT_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

/* How memory is made visible to the device. */
typedef enum {
    FTW_VERBS_MEM_NONE,         /* not at all: messages go native */
    FTW_VERBS_MEM_PIN,          /* registered (pinned) per message */
    FTW_VERBS_MEM_ODP,          /* explicit ODP MRs, cached by range */
    FTW_VERBS_MEM_IMPLICIT,     /* one implicit ODP MR for everything */
} ftw_verbs_mem_t;

/* What an MR is for: the sender's buffer, read by a peer, or the
 * receiver's, written by its own READ.  Never both, never REMOTE_WRITE. */
typedef enum {
    FTW_VERBS_MR_REMOTE,        /* REMOTE_READ (with windows: MW_BIND) */
    FTW_VERBS_MR_LOCAL,         /* LOCAL_WRITE */
    FTW_VERBS_MR_KINDS,
    FTW_VERBS_MR_PROBE = FTW_VERBS_MR_KINDS, /* REMOTE_READ; never cached */
} ftw_verbs_mr_kind_t;

typedef struct {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    uint8_t port;
    int gid_index;
    int is_eth;                 /* RoCE: address by GID, else by LID */
    union ibv_gid gid;
    uint16_t lid;
    enum ibv_mtu mtu;           /* the port's active MTU */
    uint8_t rd_atom;            /* outstanding READs per QP */
    uint64_t odp_caps;          /* general ODP caps, 0 without ODP */
    uint32_t rc_odp_caps;
    ftw_verbs_mem_t mem;
    int odp_aligned;            /* ODP READs must start page-aligned */
    uint32_t psn;               /* first PSN of every QP of this process */
    int max_mw;                 /* the device's memory windows, 0: none */
    int mw_bind;                /* QPs and MRs allow binding windows */
    int mw;                     /* each message gets its own window */
    int last_wc_status;         /* the last error completion's status */
} ftw_verbs_iface_t;

extern ftw_verbs_iface_t ftw_verbs;

#define FTW_VERBS_QP_DEPTH 64       /* send queue: READs in flight per QP */
#define FTW_VERBS_SELFTEST_SECS 5   /* a self-test READ's time limit */

/* What one process tells the others at MPI_Init; qpn[] (one per world
 * rank) follows it. */
typedef struct {
    uint8_t gid[16];
    uint32_t ok;            /* 1: this process pulls and serves over verbs */
    uint32_t psn;
    uint32_t probe_rkey;
    uint16_t lid;
    uint8_t mtu;
    uint8_t pad;
} ftw_verbs_addr_t;

static inline const char *ftw_verbs_dev_name(void)
{
    return ibv_get_device_name(ftw_verbs.ctx->device);
}

static inline int ftw_verbs_mtu_bytes(enum ibv_mtu m)
{
    return 128 << m;
}

/* verbs_ep.c: an RC QP in INIT; connect it (RTR, RTS) to QP qpn of the
 * process that sent a, starting this side's packets at sq_psn; move a QP
 * (any state) back to INIT; this process's address. */
struct ibv_qp *ftw_verbs_qp_create(void);
ftw_status_t ftw_verbs_qp_connect(struct ibv_qp *qp, const ftw_verbs_addr_t *a,
                                  uint32_t qpn, uint32_t sq_psn);
ftw_status_t ftw_verbs_qp_reset(struct ibv_qp *qp);
void ftw_verbs_addr_fill(ftw_verbs_addr_t *a, int ok, uint32_t probe_rkey);

/* Post one work request (a window's bind or invalidation) on qp and wait
 * for its completion, as ftw_verbs_read waits (peer: see there). */
ftw_status_t ftw_verbs_post_one(struct ibv_qp *qp, int peer,
                                struct ibv_send_wr *wr);

/* READ len bytes at raddr (rkey) into local (lkey) through qp and wait
 * for them.  peer >= 0: world rank, watched by the failure detector
 * (FTW_ST_PEER_FAILED); peer < 0: a self-test, limited in time.  On any
 * error the QP is in the error state and flushed when this returns. */
ftw_status_t ftw_verbs_read(struct ibv_qp *qp, int peer, uint64_t raddr,
                            uint32_t rkey, char *local, uint32_t lkey,
                            size_t len);

/* verbs_odp.c: set ftw_verbs.mem (and odp_aligned) from the ODP caps and
 * the self-test; loud: warn (else info) when ODP is refused.  Two QPs of
 * this process connected to each other, for self-tests. */
void ftw_verbs_mem_choose(int loud);
ftw_status_t ftw_verbs_selftest_qps(struct ibv_qp **qa, struct ibv_qp **qb);

/* verbs_mw.c: memory windows.  ftw_verbs_mw_choose sets ftw_verbs.mw
 * (FTW_VERBS_MW and a self-test: a window bound over this memory mode's
 * MR reads right and refuses a READ once invalidated); when windows
 * cannot be used it says so once, naming the device and the reason (loud:
 * a warning, else info). */
void ftw_verbs_mw_choose(int loud);

/* A window over [addr, addr + len) of mr, remote read only, bound through
 * qp (the QP to world rank peer): *mw_p and its rkey *rkey_p. */
ftw_status_t ftw_verbs_mw_bind(struct ibv_qp *qp, int peer, struct ibv_mr *mr,
                               uint64_t addr, size_t len,
                               struct ibv_mw **mw_p, uint32_t *rkey_p);
/* Invalidate the window (LOCAL_INV on qp; qp NULL or unusable: free it,
 * which invalidates it too); either way nobody reads through rkey after
 * this returns.  Nonzero: the QP failed the invalidation (its state is
 * error). */
int ftw_verbs_mw_unbind(struct ibv_qp *qp, int peer, struct ibv_mw *mw,
                        uint32_t rkey);
/* Free the windows kept for reuse (before the QPs and MRs go). */
void ftw_verbs_mw_close(void);

/* verbs_conn.c: reconnection of a QP in the error state, all under the
 * verbs lock.  init: collective over MPI_COMM_WORLD, n world ranks; peer:
 * world rank peer's QP, connected at MPI_Init to its QP qpn (its address
 * a); lost: the QP cannot be used (start reconnecting, unless the peer
 * failed); ready: nonzero when it can (HELLOs answered first); wait: until
 * it can, at most secs (FTW_ST_PEER_FAILED if the peer dies); serve:
 * answer the peers' HELLOs. */
ftw_status_t ftw_verbs_conn_init(int n);
void ftw_verbs_conn_peer(int peer, struct ibv_qp *qp,
                         const ftw_verbs_addr_t *a, uint32_t qpn);
void ftw_verbs_conn_lost(int peer, const char *why);
int ftw_verbs_conn_ready(int peer);
ftw_status_t ftw_verbs_conn_wait(int peer, double secs);
void ftw_verbs_conn_serve(void);
void ftw_verbs_conn_fini(void);

/* An MR that covers len bytes at addr for kind; ftw_verbs_mr_put when
 * done with it (which deregisters a per-message one). */
ftw_status_t ftw_verbs_mr_get(const void *addr, size_t len,
                              ftw_verbs_mr_kind_t kind,
                              struct ibv_mr **mr_p);
void ftw_verbs_mr_put(struct ibv_mr *mr);

/* Register len bytes at addr as mode says (ODP or pinned), uncached. */
ftw_status_t ftw_verbs_mr_reg(const void *addr, size_t len,
                              ftw_verbs_mr_kind_t kind, ftw_verbs_mem_t mode,
                              struct ibv_mr **mr_p);

/* The implicit ODP MR, if the device offers one (mode IMPLICIT). */
ftw_status_t ftw_verbs_md_open(void);
/* Windows in use: the implicit MR again without REMOTE_READ, so that only
 * windows grant remote access. */
void ftw_verbs_md_tighten(void);
/* Deregister every cached MR. */
void ftw_verbs_md_close(void);

/* ibv_advise_mr over the range, if FTW_VERBS_PREFETCH (warns once). */
void ftw_verbs_prefetch(struct ibv_mr *mr, const void *addr, size_t len,
                        ftw_verbs_mr_kind_t kind);

#endif
