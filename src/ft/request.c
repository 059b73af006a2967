/* The request table and the graveyard. */
#include "ft/request.h"

#include <pthread.h>
#include <stdlib.h>

#include "ft/quarantine.h"
#include "util/log.h"
#include "util/stats.h"

int ftw_req_count;
static ftw_req_t *req_table;
static ftw_req_t *req_free_list;   /* recycled entries, linked by hh.next */
static pthread_mutex_t req_lock = PTHREAD_MUTEX_INITIALIZER;

void ftw_req_add(MPI_Request req, const ftw_reqinfo_t *info)
{
    ftw_req_t *e, *old;

    if (req == MPI_REQUEST_NULL)
        return;
    pthread_mutex_lock(&req_lock);
    e = req_free_list;
    if (e != NULL)
        req_free_list = e->hh.next;
    else
        e = malloc(sizeof(*e));
    if (e == NULL) {
        pthread_mutex_unlock(&req_lock);
        ftw_warn_sparse("out of memory: a request will not be watched for "
                        "peer failures");
        return;
    }
    e->key = req;
    e->info = *info;
    HASH_FIND(hh, req_table, &req, sizeof(req), old);
    if (old != NULL) {
        /* The MPI reused a handle whose completion ftwrap did not see. */
        HASH_DEL(req_table, old);
        ftw_req_count--;
        free(old->info.owned);
        free(old);
    }
    HASH_ADD(hh, req_table, key, sizeof(e->key), e);
    ftw_req_count++;
    pthread_mutex_unlock(&req_lock);
}

ftw_req_t *ftw_req_find(MPI_Request req)
{
    ftw_req_t *e;

    if (ftw_req_count == 0 || req == MPI_REQUEST_NULL)
        return NULL;
    pthread_mutex_lock(&req_lock);
    HASH_FIND(hh, req_table, &req, sizeof(req), e);
    pthread_mutex_unlock(&req_lock);
    return e;
}

static void req_del_locked(MPI_Request req)
{
    ftw_req_t *e;

    HASH_FIND(hh, req_table, &req, sizeof(req), e);
    if (e == NULL)
        return;
    free(e->info.owned);
    HASH_DEL(req_table, e);
    ftw_req_count--;
    e->hh.next = req_free_list;
    req_free_list = e;
}

void ftw_req_del(MPI_Request req)
{
    if (ftw_req_count == 0 || req == MPI_REQUEST_NULL)
        return;
    pthread_mutex_lock(&req_lock);
    req_del_locked(req);
    pthread_mutex_unlock(&req_lock);
}

void ftw_req_reap(int n, const MPI_Request before[], const MPI_Request after[])
{
    if (ftw_req_count == 0)
        return;
    pthread_mutex_lock(&req_lock);
    for (int i = 0; i < n; i++)
        if (before[i] != MPI_REQUEST_NULL && after[i] == MPI_REQUEST_NULL)
            req_del_locked(before[i]);
    pthread_mutex_unlock(&req_lock);
}

void ftw_req_foreach(void (*fn)(ftw_req_t *e, void *arg), void *arg)
{
    ftw_req_t *e, *tmp;

    pthread_mutex_lock(&req_lock);
    HASH_ITER(hh, req_table, e, tmp)
        fn(e, arg);
    pthread_mutex_unlock(&req_lock);
}

/* ---- graveyard ---------------------------------------------------------- */

typedef struct {
    MPI_Request req;
    void *owned;
    unsigned qid;       /* quarantined range, released when it ends */
} grave_t;

static grave_t *grave;
static int grave_n, grave_cap;

static void grave_add_locked(MPI_Request req, void *owned)
{
    grave_t *g;

    if (grave_n == grave_cap) {
        int cap = grave_cap ? 2 * grave_cap : 16;

        g = realloc(grave, sizeof(*g) * (size_t)cap);
        if (g == NULL) {
            /* Its memory stays allocated: the MPI may still use it. */
            ftw_warn_sparse("out of memory: an abandoned request is "
                            "dropped without being completed");
            return;
        }
        grave = g;
        grave_cap = cap;
    }
    grave[grave_n].req = req;
    grave[grave_n].qid = 0;
    grave[grave_n++].owned = owned;
    ftw_stat_add(FTW_STAT_GRAVEYARD, 1);
}

void ftw_grave_add(MPI_Request req)
{
    ftw_req_t *e;
    void *owned = NULL;

    pthread_mutex_lock(&req_lock);
    HASH_FIND(hh, req_table, &req, sizeof(req), e);
    if (e != NULL) {
        owned = e->info.owned;
        e->info.owned = NULL;
    }
    grave_add_locked(req, owned);
    pthread_mutex_unlock(&req_lock);
}

void ftw_grave_add_quarantined(MPI_Request req, unsigned qid)
{
    ftw_grave_add(req);
    pthread_mutex_lock(&req_lock);
    if (grave_n > 0 && grave[grave_n - 1].req == req)
        grave[grave_n - 1].qid = qid;
    pthread_mutex_unlock(&req_lock);
}

void ftw_grave_add_owned(MPI_Request req, void *owned)
{
    pthread_mutex_lock(&req_lock);
    grave_add_locked(req, owned);
    pthread_mutex_unlock(&req_lock);
}

void ftw_grave_progress(void)
{
    if (grave_n == 0)
        return;
    pthread_mutex_lock(&req_lock);
    for (int i = 0; i < grave_n;) {
        int flag = 0;

        PMPI_Test(&grave[i].req, &flag, MPI_STATUS_IGNORE);
        if (flag) {
            free(grave[i].owned);
            ftw_quarantine_release(grave[i].qid);
            grave[i] = grave[--grave_n];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&req_lock);
}

int ftw_grave_count(void)
{
    return grave_n;
}
