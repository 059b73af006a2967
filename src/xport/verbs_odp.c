/*
 * Whether the device's on-demand paging can be trusted: a data-checked
 * RDMA READ through ODP memory between two QPs of this process, at
 * MPI_Init, page-aligned and not, with guard bytes around the destination
 * (rxe in Linux 7.3 ignores the offset into a page of an ODP access, so at
 * active MTU 1024 every READ longer than one packet lands wrong).
 */
#define _GNU_SOURCE
#include "xport/verbs_int.h"

#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/config.h"
#include "util/log.h"

#define SELFTEST_LEN (4 * 4096 + 123)   /* several pages and MTUs */
#define SELFTEST_OFF 100

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

ftw_status_t ftw_verbs_selftest_qps(struct ibv_qp **qa, struct ibv_qp **qb)
{
    ftw_verbs_addr_t me;

    *qa = ftw_verbs_qp_create();
    *qb = ftw_verbs_qp_create();
    if (*qa == NULL || *qb == NULL)
        return FTW_ST_IO_ERROR;
    ftw_verbs_addr_fill(&me, 1, 0);
    if (ftw_verbs_qp_connect(*qa, &me, (*qb)->qp_num, me.psn) != FTW_OK ||
        ftw_verbs_qp_connect(*qb, &me, (*qa)->qp_num, me.psn) != FTW_OK)
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
    st = ftw_verbs_selftest_qps(&qa, &qb);
    if (st == FTW_OK)
        st = selftest_mrs(map, half, mode, &smr, &dmr);
    if (st == FTW_OK)
        st = ftw_verbs_read(qa, -1, (uintptr_t)src, smr->rkey, dst, dmr->lkey,
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
                 ftw_verbs_dev_name(), fbname);
    else if (st == FTW_OK)
        ftw_log(loud ? FTW_LOG_WARN : FTW_LOG_INFO, "verbs: ODP refused on "
                "%s at active MTU %d: a page-aligned RDMA READ of %d bytes "
                "through ODP memory completed but byte %ld (from the "
                "destination's start) is wrong; FTW_VERBS_FALLBACK=%s",
                ftw_verbs_dev_name(), ftw_verbs_mtu_bytes(ftw_verbs.mtu), SELFTEST_LEN, bad,
                fbname);
    else
        ftw_log(loud ? FTW_LOG_WARN : FTW_LOG_INFO, "verbs: ODP refused on "
                "%s at active MTU %d: the self-test READ failed (%s); "
                "FTW_VERBS_FALLBACK=%s", ftw_verbs_dev_name(), ftw_verbs_mtu_bytes(ftw_verbs.mtu),
                ftw_status_string(st), fbname);
    ftw_verbs_md_close();
    ftw_verbs.mem = fb;
}

/* The memory mode: ODP (implicit, else explicit) when the device offers
 * it for RC READ and the self-test reads right, else the fallback.  A
 * device that gets page-aligned READs right but misplaces the others
 * (rxe in Linux 7.3 ignores the offset into a page of an ODP access)
 * keeps ODP with every READ page-aligned (odp_aligned, see pull_aligned). */
void ftw_verbs_mem_choose(int loud)
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
                ftw_verbs_dev_name(), ftw_verbs_mtu_bytes(ftw_verbs.mtu), ftw_status_string(st),
                bad);
    ftw_info("verbs: %s, active MTU %d, GID index %d: %s ODP%s",
             ftw_verbs_dev_name(), ftw_verbs_mtu_bytes(ftw_verbs.mtu), ftw_verbs.gid_index,
             ftw_verbs.mem == FTW_VERBS_MEM_IMPLICIT ? "implicit"
                                                     : "explicit",
             ftw_verbs.odp_aligned ? ", page-aligned READs" : "");
}
