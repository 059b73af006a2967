/* The completion calls, with the MPI's own signatures. */
#ifndef FTW_FT_COMPLETE_H
#define FTW_FT_COMPLETE_H

#include <mpi.h>

int ftw_wait(MPI_Request *req, MPI_Status *status);
int ftw_test(MPI_Request *req, int *flag, MPI_Status *status);
int ftw_waitall(int n, MPI_Request reqs[], MPI_Status sts[]);
int ftw_testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[]);
int ftw_waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status);
int ftw_testany(int n, MPI_Request reqs[], int *index, int *flag,
                MPI_Status *status);
int ftw_waitsome(int n, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status sts[]);
int ftw_testsome(int n, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status sts[]);
int ftw_start(MPI_Request *req);
int ftw_startall(int n, MPI_Request reqs[]);
int ftw_request_free(MPI_Request *req);
int ftw_cancel(MPI_Request *req);
int ftw_request_get_status(MPI_Request req, int *flag, MPI_Status *status);

#endif
