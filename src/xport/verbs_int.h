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
    FTW_VERBS_MR_REMOTE,        /* REMOTE_READ */
    FTW_VERBS_MR_LOCAL,         /* LOCAL_WRITE */
    FTW_VERBS_MR_KINDS
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
} ftw_verbs_iface_t;

extern ftw_verbs_iface_t ftw_verbs;

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
/* Deregister every cached MR. */
void ftw_verbs_md_close(void);

/* ibv_advise_mr over the range, if FTW_VERBS_PREFETCH (warns once). */
void ftw_verbs_prefetch(struct ibv_mr *mr, const void *addr, size_t len,
                        ftw_verbs_mr_kind_t kind);

#endif
