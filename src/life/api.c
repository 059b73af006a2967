/* ftwrap's own calls (FTW_*) and MPI calls ftwrap answers itself. */
#include "mpi-ext.h"
#include "core/comm.h"
#include "core/ft.h"
#include "op/op.h"
#include "util/log.h"

/* The failed processes of comm's group (remote: its remote group, for an
 * intercommunicator only). */
static int group_failed(MPI_Comm comm, MPI_Group *failed_group, int remote)
{
    ftw_comm_t *c;
    int n;

    ftw_wrap_check();
    if (failed_group == NULL)
        return MPI_ERR_ARG;
    c = ftw_comm_get(comm);
    if (c == NULL || (remote && !c->is_inter))
        return MPI_ERR_COMM;
    if (c->is_inter && !remote)
        return ftw_comm_failed_local_group(c, failed_group) == FTW_OK ?
               MPI_SUCCESS : MPI_ERR_NO_MEM;
    if (ftw_comm_failed_group(c, failed_group, &n) != FTW_OK)
        return MPI_ERR_NO_MEM;
    return MPI_SUCCESS;
}

FTW_EXPORT int FTW_Comm_group_failed(MPI_Comm comm, MPI_Group *failed_group)
{
    return group_failed(comm, failed_group, 0);
}

FTW_EXPORT int FTW_Comm_remote_group_failed(MPI_Comm comm,
                                            MPI_Group *failed_group)
{
    return group_failed(comm, failed_group, 1);
}

FTW_EXPORT int FTW_Comm_reenable_any_source(MPI_Comm comm,
                                            MPI_Group *failed_group)
{
    ftw_comm_t *c;
    int n;

    ftw_wrap_check();
    if (failed_group == NULL)
        return MPI_ERR_ARG;
    c = ftw_comm_get(comm);
    if (c == NULL)
        return MPI_ERR_COMM;
    if (ftw_comm_failed_group(c, failed_group, &n) != FTW_OK)
        return MPI_ERR_NO_MEM;
    c->nacked = n;
    return MPI_SUCCESS;
}

/* MPIX_FT (mpi-ext.h) is ftwrap's attribute; every other key is the
 * MPI's. */
static int attr_ft(MPI_Comm comm, void *value, int *flag)
{
    static int yes = 1;
    void *ub;
    int has, rc;

    /* The MPI checks comm as for any key (and raises as it would). */
    rc = PMPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &has);
    if (rc != MPI_SUCCESS)
        return rc;
    if (value == NULL || flag == NULL)
        return ftw_raise(comm, MPI_ERR_ARG, "MPI_Comm_get_attr", -1);
    *(int **)value = &yes;
    *flag = 1;
    return MPI_SUCCESS;
}

int ftw_comm_get_attr(MPI_Comm comm, int keyval, void *value, int *flag)
{
    if (keyval == MPIX_FT)
        return attr_ft(comm, value, flag);
    return PMPI_Comm_get_attr(comm, keyval, value, flag);
}

int ftw_error_class(int code, int *cls)
{
    if (ftw_is_own_error(code) && cls != NULL) {
        *cls = code;
        return MPI_SUCCESS;
    }
    return PMPI_Error_class(code, cls);
}
