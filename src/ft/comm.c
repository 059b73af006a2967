/* The per-communicator state table. */
#include "ft/comm.h"

#include <pthread.h>
#include <stdlib.h>

#include "util/log.h"
#include "util/stats.h"

static ftw_comm_t *comm_table;
static pthread_mutex_t comm_lock = PTHREAD_MUTEX_INITIALIZER;

static ftw_comm_t *comm_find_locked(MPI_Comm comm)
{
    ftw_comm_t *c;

    HASH_FIND(hh, comm_table, &comm, sizeof(comm), c);
    return c;
}

ftw_comm_t *ftw_comm_lookup(MPI_Comm comm)
{
    ftw_comm_t *c;

    pthread_mutex_lock(&comm_lock);
    c = comm_find_locked(comm);
    pthread_mutex_unlock(&comm_lock);
    return c;
}

ftw_status_t ftw_comm_track(MPI_Comm comm)
{
    ftw_comm_t *c;

    if (comm == MPI_COMM_NULL)
        return FTW_OK;
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        ftw_error("out of memory for a communicator record");
        return FTW_ST_NO_MEMORY;
    }
    c->user = comm;
    c->native = comm;
    PMPI_Comm_test_inter(comm, &c->is_inter);
    PMPI_Comm_size(comm, &c->size);
    PMPI_Comm_rank(comm, &c->rank);

    pthread_mutex_lock(&comm_lock);
    if (comm_find_locked(comm) != NULL) {
        pthread_mutex_unlock(&comm_lock);
        free(c);
        return FTW_OK;
    }
    HASH_ADD(hh, comm_table, user, sizeof(c->user), c);
    pthread_mutex_unlock(&comm_lock);
    ftw_stat_add(FTW_STAT_COMMS_CREATED, 1);
    return FTW_OK;
}

void ftw_comm_untrack(MPI_Comm comm)
{
    ftw_comm_t *c;

    pthread_mutex_lock(&comm_lock);
    c = comm_find_locked(comm);
    if (c != NULL)
        HASH_DEL(comm_table, c);
    pthread_mutex_unlock(&comm_lock);
    if (c == NULL)
        return;
    free(c);
    ftw_stat_add(FTW_STAT_COMMS_FREED, 1);
}

void ftw_comm_table_clear(void)
{
    ftw_comm_t *c, *tmp;

    pthread_mutex_lock(&comm_lock);
    HASH_ITER(hh, comm_table, c, tmp) {
        HASH_DEL(comm_table, c);
        free(c);
    }
    pthread_mutex_unlock(&comm_lock);
}
