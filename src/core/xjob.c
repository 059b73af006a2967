/* Processes of other jobs: the exchange and the translation (xjob.h). */
#include "core/xjob.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "detect/detect.h"
#include "core/lock.h"
#include "core/revoke.h"
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

/* ---- the environment of spawned processes ------------------------------ */

#if defined(OPEN_MPI)
extern char **environ;

/* An environment entry a spawned process gets from its parent. */
static int spawn_passes(const char *e)
{
    return strncmp(e, "FTW_", 4) == 0 || strncmp(e, "LD_PRELOAD=", 11) == 0;
}

/* "NAME=VALUE\n" for LD_PRELOAD and each FTW_* variable, then the user's
 * "env" value; NULL if there is nothing of ours to pass or no memory. */
static char *spawn_env(MPI_Info user)
{
    const char *pre = getenv("LD_PRELOAD");
    size_t len = 1, at = 0;
    int ulen = 0, flag = 0;
    char *buf;

    if (pre == NULL || strstr(pre, "libftwrap") == NULL)
        return NULL;        /* linked, not preloaded: so is the child */
    for (char **e = environ; *e != NULL; e++)
        if (spawn_passes(*e))
            len += strlen(*e) + 1;
    if (user != MPI_INFO_NULL)
        PMPI_Info_get_valuelen(user, "env", &ulen, &flag);
    if (flag)
        len += (size_t)ulen + 1;
    buf = malloc(len);
    if (buf == NULL)
        return NULL;
    for (char **e = environ; *e != NULL; e++) {
        size_t n = strlen(*e);

        if (!spawn_passes(*e))
            continue;
        memcpy(buf + at, *e, n);
        at += n;
        buf[at++] = '\n';
    }
    buf[at] = '\0';
    if (flag)
        PMPI_Info_get(user, "env", ulen, buf + at, &flag);
    return buf;
}
#endif

MPI_Info ftw_spawn_info(MPI_Comm comm, int root, MPI_Info user)
{
#if defined(OPEN_MPI)
    MPI_Info info = MPI_INFO_NULL;
    char *env;
    int rank = -1;

    if (PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS || rank != root ||
        (env = spawn_env(user)) == NULL)
        return user;
    if ((user == MPI_INFO_NULL ? PMPI_Info_create(&info)
                               : PMPI_Info_dup(user, &info)) != MPI_SUCCESS ||
        PMPI_Info_set(info, "env", env) != MPI_SUCCESS) {
        ftw_warn("MPI_Comm_spawn: no \"env\" for the spawned processes: "
                 "they start without ftwrap unless they link it");
        if (info != MPI_INFO_NULL)
            PMPI_Info_free(&info);
        info = user;
    }
    free(env);
    return info;
#else
    (void)comm;
    (void)root;
    return user;
#endif
}

void ftw_spawn_info_free(MPI_Info info, MPI_Info user)
{
    if (info != user && info != MPI_INFO_NULL)
        PMPI_Info_free(&info);
}

const MPI_Info *ftw_spawn_infos(MPI_Comm comm, int root, int count,
                                const MPI_Info user[])
{
    MPI_Info *infos;
    int rank = -1;

    if (count <= 0 || user == NULL ||
        PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS || rank != root ||
        (infos = malloc(sizeof(*infos) * (size_t)count)) == NULL)
        return user;
    for (int i = 0; i < count; i++)
        infos[i] = ftw_spawn_info(comm, root, user[i]);
    return infos;
}

void ftw_spawn_infos_free(const MPI_Info *infos, int count,
                          const MPI_Info user[])
{
    if (infos == user || infos == NULL)
        return;
    for (int i = 0; i < count; i++)
        ftw_spawn_info_free(infos[i], user[i]);
    free((void *)infos);
}
