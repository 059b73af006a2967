/* Processes of other jobs: the exchange and the translation (xjob.h). */
#include "ft/xjob.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "detect/detect.h"
#include "ft/lock.h"
#include "ft/ulfm.h"
#include "util/log.h"

/* Seconds an exchange waits for the other job. */
#define FTW_XJOB_WAIT 30.0

typedef struct {
    uint64_t host;
    int32_t pid;
    int32_t pad;
} xjob_entry_t;

/* The remote group of each exchange, with the ids of its members. */
typedef struct xgroup {
    struct xgroup *next;
    MPI_Group group;
    int n;
    int ids[];
} xgroup_t;

static xgroup_t *xgroups;
static _Atomic int xgroups_any;
static pthread_mutex_t xjob_lock = PTHREAD_MUTEX_INITIALIZER;

/* Wait for req, at most FTW_XJOB_WAIT seconds; 1 if it completed. */
static int xjob_wait(MPI_Request *req)
{
    double until = PMPI_Wtime() + FTW_XJOB_WAIT;
    int flag = 0, spins = 0;

    while (PMPI_Test(req, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && !flag) {
        if (PMPI_Wtime() > until)
            return 0;
        if (++spins > 1000)
            ftw_detect_pause();
    }
    return flag;
}

static void xgroup_add(MPI_Comm inter, const xjob_entry_t *remote, int n)
{
    xgroup_t *g = malloc(sizeof(*g) + sizeof(int) * (size_t)n);

    if (g == NULL) {
        ftw_error("out of memory for %d processes of another job: their "
                  "failures will not be noticed", n);
        return;
    }
    g->n = n;
    for (int i = 0; i < n; i++)
        g->ids[i] = ftw_detect_foreign(remote[i].host, remote[i].pid);
    PMPI_Comm_remote_group(inter, &g->group);
    ftw_mt_lock(&xjob_lock);
    g->next = xgroups;
    xgroups = g;
    ftw_mt_unlock(&xjob_lock);
    /* Revocations may come on a communicator's own channel, with no
     * bell: waiting calls look for them from now on, for good. */
    if (atomic_exchange(&xgroups_any, 1) == 0)
        atomic_fetch_add_explicit(&ftw_noisy, 1, memory_order_relaxed);
    ftw_revoke_listening = 1;
}

void ftw_xjob_exchange(MPI_Comm inter, const char *name)
{
    xjob_entry_t mine = { .host = ftw_detect_host(),
                          .pid = (int32_t)getpid() };
    xjob_entry_t *remote;
    MPI_Request req = MPI_REQUEST_NULL;
    int is_inter = 0, n = 0;

    if (inter == MPI_COMM_NULL ||
        PMPI_Comm_test_inter(inter, &is_inter) != MPI_SUCCESS || !is_inter)
        return;
    PMPI_Comm_remote_size(inter, &n);
    remote = calloc((size_t)(n ? n : 1), sizeof(*remote));
    if (remote == NULL) {
        /* The others wait for this process's part: it still sends it. */
        ftw_error("%s: out of memory for the other job's %d processes",
                  name, n);
        n = 0;
    }
    if (PMPI_Iallgather(&mine, (int)sizeof(mine), MPI_BYTE,
                        remote, remote != NULL ? (int)sizeof(*remote) : 0,
                        MPI_BYTE, inter, &req) != MPI_SUCCESS) {
        ftw_warn("%s: ftwrap's exchange with the other job failed: its "
                 "processes are not watched", name);
        free(remote);
        return;
    }
    if (!xjob_wait(&req)) {
        /* The buffers stay with the request, which may never complete. */
        ftw_warn("%s: the other job made no exchange with this one within "
                 "%g s (does it run under ftwrap?): its processes are not "
                 "watched", name, FTW_XJOB_WAIT);
        return;
    }
    if (remote != NULL)
        xgroup_add(inter, remote, n);
    free(remote);
}

void ftw_xjob_translate(MPI_Group group, int n, int *out)
{
    int small[64], *ranks, *got, missing = 0;

    if (!atomic_load_explicit(&xgroups_any, memory_order_acquire))
        return;
    for (int i = 0; i < n; i++)
        missing += out[i] < 0;
    if (missing == 0)
        return;
    ranks = n <= 32 ? small : malloc(sizeof(int) * 2 * (size_t)n);
    if (ranks == NULL)
        return;
    got = ranks + n;
    for (int i = 0; i < n; i++)
        ranks[i] = i;
    ftw_mt_lock(&xjob_lock);
    for (xgroup_t *g = xgroups; g != NULL && missing > 0; g = g->next) {
        PMPI_Group_translate_ranks(group, n, ranks, g->group, got);
        for (int i = 0; i < n; i++) {
            if (out[i] < 0 && got[i] >= 0 && got[i] < g->n &&
                g->ids[got[i]] >= 0) {
                out[i] = g->ids[got[i]];
                missing--;
            }
        }
    }
    ftw_mt_unlock(&xjob_lock);
    if (ranks != small)
        free(ranks);
}

void ftw_xjob_fini(void)
{
    ftw_mt_lock(&xjob_lock);
    while (xgroups != NULL) {
        xgroup_t *g = xgroups;

        xgroups = g->next;
        PMPI_Group_free(&g->group);
        free(g);
    }
    ftw_mt_unlock(&xjob_lock);
}
