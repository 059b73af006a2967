/* ftw-test: np=2 mode=ftwrap timeout=30 env=FTW_INITIAL_ERRHANDLER=mpi_errors_return */
/*
 * initial_errhandler - FTW_INITIAL_ERRHANDLER (ftwrun --initial-errhandler)
 * as MPI-4's initial error handler.
 *
 * With FTW_INITIAL_ERRHANDLER=mpi_errors_return and no call that sets an
 * error handler: MPI_Comm_get_errhandler gives MPI_ERRORS_RETURN on
 * MPI_COMM_WORLD and on MPI_COMM_SELF; MPI_INFO_ENV's
 * "mpi_initial_errhandler" reads "mpi_errors_return"; an erroneous call
 * (MPI_Send to rank size) returns an error of class MPI_ERR_RANK instead
 * of aborting the job, and the next call works (a checksummed exchange).
 */
#include <mpi.h>
#include <string.h>

#include "tap.h"

int main(int argc, char **argv)
{
    MPI_Errhandler eh;
    char value[MPI_MAX_INFO_VAL + 1] = "";
    int rank, size, flag = 0, rc, cls = -1, ok;
    char buf[1024];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tap_plan(5);

    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
    ok = eh == MPI_ERRORS_RETURN;
    MPI_Errhandler_free(&eh);
    MPI_Comm_get_errhandler(MPI_COMM_SELF, &eh);
    ok = ok && eh == MPI_ERRORS_RETURN;
    MPI_Errhandler_free(&eh);
    tap_ok(ok, "MPI_COMM_WORLD and MPI_COMM_SELF start with "
               "MPI_ERRORS_RETURN");

    MPI_Info_get(MPI_INFO_ENV, "mpi_initial_errhandler", MPI_MAX_INFO_VAL,
                 value, &flag);
    tap_ok(flag && strcmp(value, "mpi_errors_return") == 0,
               "MPI_INFO_ENV says mpi_initial_errhandler=%s (flag %d)",
               value, flag);

    rc = MPI_Send(buf, 1, MPI_BYTE, size, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    tap_ok(cls == MPI_ERR_RANK, "MPI_Send to rank %d returns "
               "MPI_ERR_RANK (got class %d)", size, cls);

    if (rank == 0) {
        tap_fill(buf, sizeof buf, 77);
        rc = MPI_Send(buf, sizeof buf, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
        tap_ok_local(rc == MPI_SUCCESS, "a send after the error works");
        rc = MPI_Recv(buf, sizeof buf, MPI_BYTE, 1, 2, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);
        tap_ok_local(rc == MPI_SUCCESS && tap_check(buf, sizeof buf, 78),
               "the reply arrives intact");
    } else if (rank == 1) {
        rc = MPI_Recv(buf, sizeof buf, MPI_BYTE, 0, 1, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || !tap_check(buf, sizeof buf, 77))
            memset(buf, 0, sizeof buf);
        else
            tap_fill(buf, sizeof buf, 78);
        MPI_Send(buf, sizeof buf, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return tap_status();
}
