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
 * Memory: see verbs_md.c; whether ODP is trusted: verbs_odp.c; QPs,
 * READ and its completion: verbs_ep.c; a window per message: verbs_mw.c;
 * a QP brought back from the error state: verbs_conn.c.
 */
#define _GNU_SOURCE
#include "xport/verbs_int.h"
#include "xport/xport.h"

#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "detect/detect.h"
#include "util/config.h"
#include "util/log.h"
#include "util/stats.h"

#define BOUNCE_LEN (4u << 20)   /* page-aligned READs land here first */
#define RECONNECT_SECS 5        /* a pull waits this long for its QP */
#define EXPOSE_WAIT_SECS 1      /* a send, before it goes native */
#define REREAD_MAX 4096         /* bytes FTW_Verbs_reread reads again */

ftw_verbs_iface_t ftw_verbs;

static struct {
    int n, self;
    struct ibv_qp **qp;         /* [n], NULL for self */
    uint8_t *ok;                /* [n] peer connected at MPI_Init */
    uint32_t *probe_rkey;       /* [n] */
    struct { uint64_t addr; uint32_t key; uint32_t len; } *last; /* [n] */
    struct ibv_mr *probe_mr;    /* this process's probe word */
    pthread_mutex_t lock;       /* one pull at a time on the shared CQ */
} vb = { .lock = PTHREAD_MUTEX_INITIALIZER };

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
                 "(0..%d); using auto", ftw_cfg.verbs_gid_index, ftw_verbs_dev_name(),
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
                 ftw_verbs_dev_name());
        return FTW_ST_IO_ERROR;
    }
    if (pa.state != IBV_PORT_ACTIVE) {
        ftw_warn("verbs: %s port %u is not active", ftw_verbs_dev_name(),
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
    ftw_verbs.max_mw = dx.orig_attr.max_mw;
    ftw_verbs.mw_bind = ftw_cfg.verbs_mw && ftw_verbs.max_mw > 0;
    ftw_verbs.rc_odp_caps = dx.odp_caps.per_transport_caps.rc_odp_caps;
    ftw_verbs.gid_index = gid_pick(pa.gid_tbl_len);
    if (ibv_query_gid(ftw_verbs.ctx, ftw_verbs.port, ftw_verbs.gid_index,
                      &ftw_verbs.gid) != 0) {
        ftw_warn("verbs: ibv_query_gid(%s, port %u, index %d): %m",
                 ftw_verbs_dev_name(), ftw_verbs.port, ftw_verbs.gid_index);
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
        ftw_warn("verbs: ibv_alloc_pd(%s): %m", ftw_verbs_dev_name());
        goto err_close;
    }
    ftw_verbs.cq = ibv_create_cq(ftw_verbs.ctx, 2 * FTW_VERBS_QP_DEPTH, NULL, NULL, 0);
    if (ftw_verbs.cq == NULL) {
        ftw_warn("verbs: ibv_create_cq(%s): %m", ftw_verbs_dev_name());
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

/* ---- init and fini ------------------------------------------------------ */

/* QPs to every peer and the probe word's MR. */
static ftw_status_t local_setup(uint64_t probe_addr)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t p = (uintptr_t)probe_addr & ~(page - 1);

    for (int i = 0; i < vb.n; i++)
        if (i != vb.self && (vb.qp[i] = ftw_verbs_qp_create()) == NULL)
            return FTW_ST_IO_ERROR;
    return ftw_verbs_mr_reg((void *)p, page, FTW_VERBS_MR_PROBE,
                            ftw_verbs.mem == FTW_VERBS_MEM_PIN ?
                            FTW_VERBS_MEM_PIN : FTW_VERBS_MEM_ODP,
                            &vb.probe_mr);
}

static void held_drop_all(void);

static void local_teardown(void)
{
    held_drop_all();
    ftw_verbs_mw_close();
    ftw_verbs_conn_fini();
    for (int i = 0; vb.qp != NULL && i < vb.n; i++)
        if (vb.qp[i] != NULL)
            ibv_destroy_qp(vb.qp[i]);
    if (vb.probe_mr != NULL)
        ibv_dereg_mr(vb.probe_mr);
    vb.probe_mr = NULL;
    iface_close();
    free(vb.qp);
    free(vb.ok);
    free(vb.probe_rkey);
    free(vb.last);
    vb.qp = NULL;
    vb.ok = NULL;
    vb.probe_rkey = NULL;
    vb.last = NULL;
}

/* Connect to every peer that is ready; *addrs: every process's record. */
static void peers_connect(const char *addrs, size_t rec)
{
    for (int i = 0; i < vb.n; i++) {
        const ftw_verbs_addr_t *a = (const ftw_verbs_addr_t *)(addrs + rec * i);
        const uint32_t *qpn = (const uint32_t *)(a + 1);

        if (i == vb.self || !a->ok)
            continue;
        vb.probe_rkey[i] = a->probe_rkey;
        vb.ok[i] = ftw_verbs_qp_connect(vb.qp[i], a, qpn[vb.self],
                                        ftw_verbs.psn) == FTW_OK;
        if (vb.ok[i])
            ftw_verbs_conn_peer(i, vb.qp[i], a, qpn[vb.self]);
    }
}

/* Everyone's record: addr, then the QPN for each world rank. */
static ftw_status_t addrs_exchange(int ok)
{
    size_t rec = sizeof(ftw_verbs_addr_t) + sizeof(uint32_t) * (size_t)vb.n;
    char *all = malloc(rec * (size_t)vb.n), *mine = calloc(1, rec);
    ftw_status_t st = FTW_ST_NO_MEMORY;

    if (all != NULL && mine != NULL) {
        uint32_t *qpn = (uint32_t *)(mine + sizeof(ftw_verbs_addr_t));

        ftw_verbs_addr_fill((ftw_verbs_addr_t *)mine, ok,
                            vb.probe_mr != NULL ? vb.probe_mr->rkey : 0);
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
    vb.probe_rkey = calloc((size_t)npeers, sizeof(*vb.probe_rkey));
    vb.last = calloc((size_t)npeers, sizeof(*vb.last));
    if (getrandom(&ftw_verbs.psn, sizeof(ftw_verbs.psn), 0) != (ssize_t)sizeof(ftw_verbs.psn))
        ftw_verbs.psn = (uint32_t)getpid();
    ftw_verbs.psn &= 0xffffff;
    st = vb.qp && vb.ok && vb.probe_rkey && vb.last ? iface_open(loud)
                                                    : FTW_ST_NO_MEMORY;
    if (ftw_verbs_conn_init(npeers) != FTW_OK)    /* collective */
        st = FTW_ST_NO_MEMORY;
    if (st == FTW_OK)
        ftw_verbs_mem_choose(loud);
    if (st == FTW_OK && ftw_verbs.mem != FTW_VERBS_MEM_NONE)
        ftw_verbs_mw_choose(self == 0);
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
        ftw_stat_add(FTW_STAT_VERBS_MW, (uint64_t)ftw_verbs.mw);
        /* One for the HELLOs: the transport's progress runs for good. */
        ftw_xport_exposed_add(&ftw_xport_verbs_held, 1);
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
    if (atomic_load(&ftw_xport_verbs_held) > 0)
        ftw_xport_exposed_add(&ftw_xport_verbs_held, -1);
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
    /* A QP being reconnected: the sender waits for this pull's FIN, so
     * it answers the HELLO from its wait. */
    if (!ftw_verbs_conn_ready(peer) &&
        (st = ftw_verbs_conn_wait(peer, RECONNECT_SECS)) != FTW_OK)
        return st;
    st = ftw_verbs_read(vb.qp[peer], peer, addr, rkey, local, mr->lkey, len);
    if (st != FTW_OK)
        ftw_verbs_conn_lost(peer, "a READ failed"); /* flushed */
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
    if (vb.last != NULL && peer >= 0 && peer < vb.n) {
        vb.last[peer].addr = addr;
        vb.last[peer].key = (uint32_t)key;
        vb.last[peer].len = (uint32_t)(len < REREAD_MAX ? len : REREAD_MAX);
    }
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
    int down;

    /* A QP connected at MPI_Init and being reconnected now (a READ
     * refused, say) worked: verbs stays the peer's transport (the choice
     * is kept for the job), and what needs the QP meanwhile waits for it
     * or goes another way for that message. */
    pthread_mutex_lock(&vb.lock);
    down = vb.qp != NULL && peer >= 0 && peer < vb.n && vb.ok[peer] &&
           !ftw_verbs_conn_ready(peer);
    pthread_mutex_unlock(&vb.lock);
    if (down) {
        ftw_log_sparse(FTW_LOG_INFO, "verbs: the QP to world rank %d is "
                       "being reconnected; verbs stays its transport", peer);
        return FTW_OK;
    }
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

/* What sends in flight hold: a per-message registration (pin), a window
 * (FTW_VERBS_MW), or both; each send's owner block, released when the
 * send ends (ftw_rndv_send_end), whatever way.  The word counts them, and
 * one more while verbs is up (the reconnection's progress). */
typedef struct {
    const void *owner;
    struct ibv_mr *mr;          /* pin: this message's own */
    struct ibv_mw *mw;
    uint32_t rkey;              /* the window's */
    int peer;
} held_t;

static held_t *held;
static int held_n, held_cap;
_Atomic int ftw_xport_verbs_held;

static int held_add(const held_t *h)
{
    if (held_n == held_cap) {
        int cap = held_cap ? 2 * held_cap : 16;
        held_t *a = realloc(held, sizeof(*a) * (size_t)cap);

        if (a == NULL)
            return -1;
        held = a;
        held_cap = cap;
    }
    held[held_n++] = *h;
    ftw_xport_exposed_add(&ftw_xport_verbs_held, 1);
    return 0;
}

/* The window goes (LOCAL_INV on the peer's QP, or freed), then the
 * registration under it. */
static void held_drop(held_t *h)
{
    if (h->mw != NULL) {
        int up = ftw_verbs_conn_ready(h->peer);

        if (ftw_verbs_mw_unbind(up ? vb.qp[h->peer] : NULL, h->peer, h->mw,
                                h->rkey) != 0)
            ftw_verbs_conn_lost(h->peer, "LOCAL_INV failed");
    }
    ftw_verbs_mr_put(h->mr);
}

static void held_drop_all(void)
{
    for (int i = 0; i < held_n; i++)
        held_drop(&held[i]);
    if (held_n > 0)
        ftw_xport_exposed_add(&ftw_xport_verbs_held, -held_n);
    held_n = 0;
    free(held);
    held = NULL;
    held_cap = 0;
}

/* The key a receiver reads [addr, addr + len) with, through mr: a window
 * bound on the QP to peer, from the page boundary below addr when READs
 * start there (pull_aligned), or the MR's own rkey. */
static ftw_status_t expose_key(int peer, uint64_t addr, size_t len,
                               struct ibv_mr *mr, held_t *h)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t from = ftw_verbs.odp_aligned ? addr & ~(page - 1) : addr;

    if (!ftw_verbs.mw) {
        h->rkey = mr->rkey;
        return FTW_OK;
    }
    /* A bind that fails finds the QP in the error state (the peer's
     * HELLO may not be here yet): reconnect, bind again once. */
    for (int again = 0; again < 2; again++) {
        if (ftw_verbs_mw_bind(vb.qp[peer], peer, mr, from,
                              len + (addr - from), &h->mw,
                              &h->rkey) == FTW_OK)
            return FTW_OK;
        ftw_verbs_conn_lost(peer, "BIND_MW failed");
        if (ftw_verbs_conn_wait(peer, EXPOSE_WAIT_SECS) != FTW_OK)
            break;
    }
    return FTW_ST_UNSUPPORTED;
}

/* FTW_ST_UNSUPPORTED: the QP to peer is being reconnected (a second, at
 * most: the receiver answers from its MPI calls) or could not bind: this
 * message goes through the MPI. */
static ftw_status_t verbs_expose(int peer, uint64_t addr, size_t len,
                                 const void *owner, int32_t *key_p)
{
    held_t h = { .owner = owner, .peer = peer };
    struct ibv_mr *mr;
    ftw_status_t st;

    if (vb.qp == NULL || peer < 0 || peer >= vb.n || !vb.ok[peer])
        return FTW_ST_UNSUPPORTED;
    pthread_mutex_lock(&vb.lock);
    ftw_verbs_conn_serve();     /* the receiver's QP failed: it said so */
    if (!ftw_verbs_conn_ready(peer) &&
        ftw_verbs_conn_wait(peer, EXPOSE_WAIT_SECS) != FTW_OK) {
        pthread_mutex_unlock(&vb.lock);
        return FTW_ST_UNSUPPORTED;
    }
    st = ftw_verbs_mr_get((const void *)(uintptr_t)addr, len,
                          FTW_VERBS_MR_REMOTE, &mr);
    if (st == FTW_OK) {
        st = expose_key(peer, addr, len, mr, &h);
        h.mr = ftw_verbs.mem == FTW_VERBS_MEM_PIN ? mr : NULL;
        if (st != FTW_OK)
            ftw_verbs_mr_put(mr);
    }
    if (st == FTW_OK && (h.mr != NULL || h.mw != NULL) && held_add(&h) != 0) {
        held_drop(&h);
        st = FTW_ST_NO_MEMORY;
    }
    pthread_mutex_unlock(&vb.lock);
    if (st != FTW_OK)
        return st;
    *key_p = (int32_t)h.rkey;
    return FTW_OK;
}

static void verbs_release(const void *owner)
{
    pthread_mutex_lock(&vb.lock);
    for (int i = 0; i < held_n; i++)
        if (held[i].owner == owner) {
            held_drop(&held[i]);
            held[i] = held[--held_n];
            ftw_xport_exposed_add(&ftw_xport_verbs_held, -1);
            break;
        }
    pthread_mutex_unlock(&vb.lock);
}

/* Answer the peers' reconnection HELLOs, now and then. */
static void verbs_progress(void)
{
    static _Atomic unsigned turn;

    if ((atomic_fetch_add_explicit(&turn, 1, memory_order_relaxed) & 7) != 0 ||
        pthread_mutex_trylock(&vb.lock) != 0)
        return;
    if (vb.qp != NULL)
        ftw_verbs_conn_serve();
    pthread_mutex_unlock(&vb.lock);
}

ftw_status_t ftw_xport_verbs_reread(int peer, int *refused_p)
{
    static char scratch[REREAD_MAX];
    ftw_status_t st;
    uint64_t addr;
    uint32_t key, len;

    if (vb.qp == NULL || vb.last == NULL || peer < 0 || peer >= vb.n ||
        peer == vb.self || vb.last[peer].key == 0)
        return FTW_ST_INVALID_PARAM;
    pthread_mutex_lock(&vb.lock);
    addr = vb.last[peer].addr;
    key = vb.last[peer].key;
    len = vb.last[peer].len;
    pthread_mutex_unlock(&vb.lock);
    st = verbs_pull_key(peer, addr, key, scratch, len);
    if (st == FTW_ST_PEER_FAILED || st == FTW_ST_UNSUPPORTED)
        return st;
    *refused_p = st != FTW_OK;
    return FTW_OK;
}

static ftw_status_t verbs_pull(const ftw_xport_src_t *src, uint64_t addr,
                               void *local, size_t len)
{
    return verbs_pull_key(src->world, addr, (uint32_t)src->key, local, len);
}

const ftw_xport_ops_t ftw_xport_verbs_ops = {
    .name = "verbs",
    .reach = verbs_reach,
    .pull = verbs_pull,
    .expose = verbs_expose,
    .release = verbs_release,
    .progress = verbs_progress,
    .exposed = &ftw_xport_verbs_held,
    .fallback = FTW_XPORT_ID_NATIVE,
};
