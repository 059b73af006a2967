/*
 * ulfm_calls - a ULFM program as its authors write it: <mpi.h> and
 * <mpi-ext.h> only, every ULFM call, built with the line the README gives
 * (pkg-config ftwrap-<mpi>) against an installed ftwrap.  Run by
 * tests/install.sh under the installed ftwrun on 2 ranks, no failure:
 * prints one "ok"/"not ok" line per check on rank 0 and exits 0 only if
 * every check held on every rank.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdio.h>

static int rank, bad;

static void check(int cond, const char *what)
{
    int all = 0, mine = !cond;

    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    bad += all != 0;
    if (rank == 0)
        printf("%s - %s\n", all ? "not ok" : "ok", what);
}

int main(int argc, char **argv)
{
    MPI_Comm dup, shrunk, ishrunk;
    MPI_Request req;
    MPI_Group g;
    int *ft = NULL, flag = 0, size = -1, n = -1, v, rc;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    rc = MPI_Comm_get_attr(MPI_COMM_WORLD, MPIX_FT, &ft, &flag);
    check(rc == MPI_SUCCESS && flag && ft && *ft == 1,
          "MPI_Comm_get_attr(MPI_COMM_WORLD, MPIX_FT) is set to 1");
    check(MPIX_ERR_PROC_FAILED != MPIX_ERR_PROC_FAILED_PENDING &&
          MPIX_ERR_PROC_FAILED != MPIX_ERR_REVOKED,
          "the three MPIX_ERR_ classes are distinct");
    check(MPI_ERR_PROC_FAILED == MPIX_ERR_PROC_FAILED &&
          MPI_ERR_PROC_FAILED_PENDING == MPIX_ERR_PROC_FAILED_PENDING &&
          MPI_ERR_REVOKED == MPIX_ERR_REVOKED,
          "MPI_ERR_PROC_FAILED, _PENDING and MPI_ERR_REVOKED name them too");

    v = 0x3 & ~(1 << rank);
    rc = MPIX_Comm_agree(MPI_COMM_WORLD, &v);
    check(rc == MPI_SUCCESS && v == 0, "MPIX_Comm_agree ANDs the flags");
    v = 0x7;
    rc = MPIX_Comm_iagree(MPI_COMM_WORLD, &v, &req);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    check(rc == MPI_SUCCESS && v == 0x7, "MPIX_Comm_iagree + MPI_Wait");

    rc = MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk);
    if (rc == MPI_SUCCESS)
        MPI_Comm_size(shrunk, &size);
    check(rc == MPI_SUCCESS && size == 2, "MPIX_Comm_shrink: both ranks");
    size = -1;
    rc = MPIX_Comm_ishrink(MPI_COMM_WORLD, &ishrunk, &req);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS)
        MPI_Comm_size(ishrunk, &size);
    check(rc == MPI_SUCCESS && size == 2, "MPIX_Comm_ishrink + MPI_Wait");

    rc = MPIX_Comm_failure_ack(MPI_COMM_WORLD);
    check(rc == MPI_SUCCESS, "MPIX_Comm_failure_ack");
    size = -1;
    rc = MPIX_Comm_failure_get_acked(MPI_COMM_WORLD, &g);
    if (rc == MPI_SUCCESS) {
        MPI_Group_size(g, &size);
        MPI_Group_free(&g);
    }
    check(rc == MPI_SUCCESS && size == 0, "MPIX_Comm_failure_get_acked: none");
    size = -1;
    rc = MPIX_Comm_get_failed(MPI_COMM_WORLD, &g);
    if (rc == MPI_SUCCESS) {
        MPI_Group_size(g, &size);
        MPI_Group_free(&g);
    }
    check(rc == MPI_SUCCESS && size == 0, "MPIX_Comm_get_failed: none");
    rc = MPIX_Comm_ack_failed(MPI_COMM_WORLD, 4, &n);
    check(rc == MPI_SUCCESS && n == 0, "MPIX_Comm_ack_failed: 0 acknowledged");

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    if (rank == 0)
        rc = MPIX_Comm_revoke(dup);
    else
        rc = MPI_Recv(&v, 1, MPI_INT, 0, 5, dup, MPI_STATUS_IGNORE);
    flag = 0;
    MPIX_Comm_is_revoked(dup, &flag);
    check(rank == 0 ? rc == MPI_SUCCESS && flag
                    : rc == MPIX_ERR_REVOKED && flag,
          "MPIX_Comm_revoke reaches a blocked receive (MPIX_ERR_REVOKED), "
          "MPIX_Comm_is_revoked says so");

    MPI_Comm_free(&dup);
    MPI_Comm_free(&shrunk);
    MPI_Comm_free(&ishrunk);
    if (rank == 0)
        printf("1..13\n");
    MPI_Finalize();
    return bad != 0;
}
