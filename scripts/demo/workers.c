/*
 * A master-worker job that survives the death of a worker.
 *
 * Rank 0 hands out tasks (sum of i*i over a range) to ranks 1..N-1 and
 * collects results with MPI_Waitany.  Under ftwrap, a worker's death turns
 * the receive from it into FTW_ERR_PROC_FAIL_STOP instead of a hang; the
 * master hands the dead worker's task to another worker and the job still
 * computes the exact total.  Run with FTW_INJECT=rank=3,at=send:1 to kill
 * worker 3 when it sends its first result.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ftwrap.h"

#define NTASKS 48
#define TASK_LEN 100000
#define TAG_TASK 1
#define TAG_RESULT 2
#define TAG_STOP 3

static uint64_t task_sum(int task)
{
    uint64_t s = 0;

    for (uint64_t i = (uint64_t)task * TASK_LEN;
         i < (uint64_t)(task + 1) * TASK_LEN; i++)
        s += i * i;
    return s;
}

static void worker(void)
{
    for (;;) {
        MPI_Status st;
        int task;
        uint64_t s;

        MPI_Recv(&task, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        if (st.MPI_TAG == TAG_STOP)
            return;
        s = task_sum(task);
        MPI_Send(&s, 1, MPI_UINT64_T, 0, TAG_RESULT, MPI_COMM_WORLD);
    }
}

/* Give worker w the next task, if any; returns 1 if it got one. */
static int assign(int w, int *next, int *queue, int *nqueue, int *task_of,
                  MPI_Request *req, uint64_t *res)
{
    int task;

    if (*nqueue > 0)
        task = queue[--*nqueue];
    else if (*next < NTASKS)
        task = (*next)++;
    else
        return 0;
    task_of[w] = task;
    MPI_Send(&task, 1, MPI_INT, w, TAG_TASK, MPI_COMM_WORLD);
    MPI_Irecv(&res[w], 1, MPI_UINT64_T, w, TAG_RESULT, MPI_COMM_WORLD,
              &req[w]);
    return 1;
}

static int master(int size)
{
    MPI_Request req[64];
    uint64_t res[64], total = 0, expect = 0;
    int task_of[64], queue[64], nqueue = 0, next = 0, done = 0;
    int alive[64], stop = 0;

    for (int w = 0; w < size; w++) {
        req[w] = MPI_REQUEST_NULL;
        alive[w] = w > 0;
    }
    for (int w = 1; w < size; w++)
        assign(w, &next, queue, &nqueue, task_of, req, res);
    while (done < NTASKS) {
        MPI_Status st;
        int w, rc, cls;

        rc = MPI_Waitany(size, req, &w, &st);
        MPI_Error_class(rc, &cls);
        if (rc != MPI_SUCCESS && cls == FTW_ERR_PROC_FAIL_STOP) {
            printf("master: worker %d failed (FTW_ERR_PROC_FAIL_STOP); "
                   "task %d goes back to the queue\n", w, task_of[w]);
            alive[w] = 0;
            req[w] = MPI_REQUEST_NULL;
            queue[nqueue++] = task_of[w];
            for (int v = 1; v < size; v++)
                if (alive[v] && req[v] == MPI_REQUEST_NULL)
                    assign(v, &next, queue, &nqueue, task_of, req, res);
            continue;
        }
        if (rc != MPI_SUCCESS) {
            fprintf(stderr, "master: MPI_Waitany failed (%d)\n", rc);
            return 1;
        }
        total += res[w];
        done++;
        assign(w, &next, queue, &nqueue, task_of, req, res);
    }
    for (int w = 1; w < size; w++)
        if (alive[w])
            MPI_Send(&stop, 1, MPI_INT, w, TAG_STOP, MPI_COMM_WORLD);
    for (int t = 0; t < NTASKS; t++)
        expect += task_sum(t);
    printf("master: %d tasks done, total %llu, expected %llu: %s\n", done,
           (unsigned long long)total, (unsigned long long)expect,
           total == expect ? "correct" : "WRONG");
    return total == expect ? 0 : 1;
}

int main(int argc, char **argv)
{
    int rank, size, rc = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2 || size > 64) {
        if (rank == 0)
            fprintf(stderr, "run with 2 to 64 processes\n");
        MPI_Finalize();
        return 1;
    }
    if (rank == 0)
        rc = master(size);
    else
        worker();
    fflush(stdout);
    MPI_Finalize();
    return rc;
}
