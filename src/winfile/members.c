/* The processes of a window or a file (see members.h). */
#include "winfile/members.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "detect/detect.h"
#include "core/comm.h"
#include "ftwrap.h"

static int native_size(MPI_Comm comm)
{
    int n = -1;

    PMPI_Comm_size(comm, &n);
    return n;
}

MPI_Comm ftw_members_dup(ftw_coll_t *co, int *lost)
{
    MPI_Comm dup = MPI_COMM_NULL;
    int rc;

    *lost = 0;
    /* co->native holds the members of co->c (no failed one excluded:
     * windows and files are made on communicators without). */
    if (co->c == NULL || co->c->is_inter ||
        co->c->size != native_size(co->native)) {
        if (PMPI_Comm_dup(co->native, &dup) != MPI_SUCCESS)
            return MPI_COMM_NULL;
    } else if ((rc = ftw_comm_dup_watched(co->native, co->c->peer_world,
                                          co->c->size, &dup)) !=
               MPI_SUCCESS) {
        *lost = rc == FTW_ERR_PROC_FAIL_STOP;
        return MPI_COMM_NULL;
    }
    PMPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    ftw_comm_track(dup, co->child_id, co->c);
    return dup;
}

int ftw_members_invalid(MPI_Comm members, const int *surv_of,
                        uint32_t *epoch_checked, int *invalid)
{
    uint32_t epoch = atomic_load_explicit(&ftw_fail_epoch,
                                          memory_order_acquire);
    ftw_comm_t *c;

    if (epoch == *epoch_checked)
        return *invalid;
    c = ftw_comm_get(members);
    if (c == NULL)
        return 1;
    ftw_comm_refresh(c);
    *invalid = 0;
    for (int r = 0; r < c->size && !*invalid; r++)
        *invalid = (surv_of == NULL || surv_of[r] >= 0) &&
                   ftw_comm_peer_failed(c, r);
    *epoch_checked = epoch;
    return *invalid;
}

int ftw_members_moved(MPI_Comm members, int nsurv, int *remake,
                      int **surv_of_p, int *nsurv_p, MPI_Comm *survivors)
{
    ftw_comm_t *c = ftw_comm_get(members);

    *remake = 0;
    if (c == NULL || c->surv_of == NULL || c->nsurv == nsurv)
        return MPI_SUCCESS;
    *surv_of_p = malloc(sizeof(int) * (size_t)c->size);
    if (*surv_of_p == NULL)
        return MPI_ERR_NO_MEM;
    memcpy(*surv_of_p, c->surv_of, sizeof(int) * (size_t)c->size);
    *nsurv_p = c->nsurv;
    *survivors = c->coll;
    *remake = 1;
    return MPI_SUCCESS;
}

int ftw_members_validate(MPI_Comm members, int nsurv,
                         MPI_Group *failed_group, int *remake,
                         int **surv_of_p, int *nsurv_p,
                         MPI_Comm *survivors)
{
    int rc = FTW_Comm_validate(members, failed_group);

    *remake = 0;
    if (rc != MPI_SUCCESS)
        return rc;
    rc = ftw_members_moved(members, nsurv, remake, surv_of_p, nsurv_p,
                           survivors);
    if (rc != MPI_SUCCESS)
        PMPI_Group_free(failed_group);
    return rc;
}
