/*
 * Memory of the verbs transport.  An ODP MR follows the process's page
 * tables, so it stays right across free, munmap and a new mapping at the
 * same address: no malloc/free/munmap hooks, no pinned pages.
 *
 *  IMPLICIT  one MR over the whole address space (ibv_reg_mr(pd, NULL,
 *            SIZE_MAX, ON_DEMAND)), used for every buffer.
 *  ODP       explicit ODP MRs, one per page-rounded range, cached by
 *            virtual range (one small array per kind, least recently
 *            used one evicted when full).
 *  PIN       a plain (pinning) registration per message, deregistered
 *            when the message is done; nothing cached.
 *
 * A cached sender MR evicted while a peer still reads it makes that READ
 * fail (remote access error): the receiver reports the failure (FIN), no
 * data lands wrong.
 */
#include "xport/verbs_int.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "util/config.h"
#include "util/log.h"
#include "util/stats.h"

#define MR_CACHE_MAX 256

typedef struct {
    uintptr_t start, end;       /* page-rounded range */
    uint64_t used;              /* last use, for eviction */
    struct ibv_mr *mr;
} mr_entry_t;

static mr_entry_t cache[FTW_VERBS_MR_KINDS][MR_CACHE_MAX];
static int cache_n[FTW_VERBS_MR_KINDS];
static uint64_t use_clock;
static struct ibv_mr *implicit_mr;

/* A sender's MR grants REMOTE_READ itself, or, with windows, only the
 * binding of windows (which grant it, message by message). */
static int mr_access(ftw_verbs_mr_kind_t kind, ftw_verbs_mem_t mode)
{
    int a = kind == FTW_VERBS_MR_LOCAL ? IBV_ACCESS_LOCAL_WRITE :
            kind == FTW_VERBS_MR_REMOTE && ftw_verbs.mw ? IBV_ACCESS_MW_BIND :
            IBV_ACCESS_REMOTE_READ;

    return mode == FTW_VERBS_MEM_PIN ? a : a | IBV_ACCESS_ON_DEMAND;
}

ftw_status_t ftw_verbs_mr_reg(const void *addr, size_t len,
                              ftw_verbs_mr_kind_t kind, ftw_verbs_mem_t mode,
                              struct ibv_mr **mr_p)
{
    struct ibv_mr *mr = ibv_reg_mr(ftw_verbs.pd, (void *)addr, len,
                                   mr_access(kind, mode));

    if (mr == NULL) {
        ftw_warn_sparse("ibv_reg_mr(%p, %zu, %s%s) on %s: %m", addr, len,
                        kind == FTW_VERBS_MR_LOCAL ? "LOCAL_WRITE" :
                        kind == FTW_VERBS_MR_REMOTE && ftw_verbs.mw ?
                        "MW_BIND" : "REMOTE_READ",
                        mode == FTW_VERBS_MEM_PIN ? "" : "|ON_DEMAND",
                        ibv_get_device_name(ftw_verbs.ctx->device));
        return FTW_ST_IO_ERROR;
    }
    ftw_stat_add(FTW_STAT_VERBS_MR_REGS, 1);
    *mr_p = mr;
    return FTW_OK;
}

ftw_status_t ftw_verbs_md_open(void)
{
    if (ftw_verbs.mem != FTW_VERBS_MEM_IMPLICIT)
        return FTW_OK;
    /* One MR for both kinds: it grants REMOTE_READ (never REMOTE_WRITE)
     * and LOCAL_WRITE for this process's own READs. */
    implicit_mr = ibv_reg_mr(ftw_verbs.pd, NULL, SIZE_MAX,
                             IBV_ACCESS_ON_DEMAND | IBV_ACCESS_REMOTE_READ |
                             IBV_ACCESS_LOCAL_WRITE |
                             (ftw_verbs.mw_bind ? IBV_ACCESS_MW_BIND : 0));
    if (implicit_mr == NULL) {
        ftw_info("implicit ODP ibv_reg_mr(NULL, SIZE_MAX) on %s: %m; using "
                 "explicit ODP memory regions",
                 ibv_get_device_name(ftw_verbs.ctx->device));
        ftw_verbs.mem = FTW_VERBS_MEM_ODP;
    }
    return FTW_OK;
}

void ftw_verbs_md_tighten(void)
{
    struct ibv_mr *mr;

    if (implicit_mr == NULL)
        return;
    mr = ibv_reg_mr(ftw_verbs.pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND |
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    if (mr == NULL) {
        ftw_warn("verbs: implicit ODP ibv_reg_mr(NULL, SIZE_MAX, MW_BIND) "
                 "on %s: %m; its REMOTE_READ stays (its rkey is never "
                 "sent)", ibv_get_device_name(ftw_verbs.ctx->device));
        return;
    }
    ibv_dereg_mr(implicit_mr);
    implicit_mr = mr;
}

void ftw_verbs_md_close(void)
{
    for (int k = 0; k < FTW_VERBS_MR_KINDS; k++) {
        for (int i = 0; i < cache_n[k]; i++)
            ibv_dereg_mr(cache[k][i].mr);
        cache_n[k] = 0;
    }
    if (implicit_mr != NULL)
        ibv_dereg_mr(implicit_mr);
    implicit_mr = NULL;
}

/* The cached MR of kind that covers [s, e), or NULL. */
static mr_entry_t *cache_find(ftw_verbs_mr_kind_t kind, uintptr_t s,
                              uintptr_t e)
{
    for (int i = 0; i < cache_n[kind]; i++) {
        mr_entry_t *m = &cache[kind][i];

        if (m->start <= s && e <= m->end)
            return m;
    }
    return NULL;
}

/* A free slot of kind, made by evicting the least recently used. */
static mr_entry_t *cache_slot(ftw_verbs_mr_kind_t kind)
{
    mr_entry_t *old;

    if (cache_n[kind] < MR_CACHE_MAX)
        return &cache[kind][cache_n[kind]++];
    old = &cache[kind][0];
    for (int i = 1; i < MR_CACHE_MAX; i++)
        if (cache[kind][i].used < old->used)
            old = &cache[kind][i];
    ibv_dereg_mr(old->mr);
    return old;
}

/* Explicit ODP: the cached MR over the pages of [addr, addr + len). */
static ftw_status_t mr_cached(const void *addr, size_t len,
                              ftw_verbs_mr_kind_t kind, struct ibv_mr **mr_p)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t s = (uintptr_t)addr & ~(page - 1);
    uintptr_t e = ((uintptr_t)addr + len + page - 1) & ~(page - 1);
    mr_entry_t *m = cache_find(kind, s, e);
    struct ibv_mr *mr;

    if (m == NULL) {
        if (ftw_verbs_mr_reg((void *)s, e - s, kind, FTW_VERBS_MEM_ODP,
                             &mr) != FTW_OK)
            return FTW_ST_IO_ERROR;
        m = cache_slot(kind);
        *m = (mr_entry_t){ .start = s, .end = e, .mr = mr };
    }
    m->used = ++use_clock;
    *mr_p = m->mr;
    return FTW_OK;
}

ftw_status_t ftw_verbs_mr_get(const void *addr, size_t len,
                              ftw_verbs_mr_kind_t kind, struct ibv_mr **mr_p)
{
    ftw_status_t st;

    switch (ftw_verbs.mem) {
    case FTW_VERBS_MEM_IMPLICIT:
        *mr_p = implicit_mr;
        st = FTW_OK;
        break;
    case FTW_VERBS_MEM_ODP:
        st = mr_cached(addr, len, kind, mr_p);
        break;
    case FTW_VERBS_MEM_PIN:
        return ftw_verbs_mr_reg(addr, len, kind, FTW_VERBS_MEM_PIN, mr_p);
    default:
        return FTW_ST_UNSUPPORTED;
    }
    if (st == FTW_OK)
        ftw_verbs_prefetch(*mr_p, addr, len, kind);
    return st;
}

void ftw_verbs_mr_put(struct ibv_mr *mr)
{
    if (ftw_verbs.mem == FTW_VERBS_MEM_PIN && mr != NULL)
        ibv_dereg_mr(mr);
}

void ftw_verbs_prefetch(struct ibv_mr *mr, const void *addr, size_t len,
                        ftw_verbs_mr_kind_t kind)
{
    static int warned;
    struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = (uint32_t)len,
                           .lkey = mr->lkey };
    int rc;

    if (!ftw_cfg.verbs_prefetch || warned || len > UINT32_MAX)
        return;
    rc = ibv_advise_mr(ftw_verbs.pd, kind == FTW_VERBS_MR_LOCAL ?
                       IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE :
                       IBV_ADVISE_MR_ADVICE_PREFETCH,
                       IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1);
    if (rc != 0) {
        warned = 1;
        errno = rc;
        ftw_warn("FTW_VERBS_PREFETCH: ibv_advise_mr on %s: %m; prefetch "
                 "is off", ibv_get_device_name(ftw_verbs.ctx->device));
    }
}
