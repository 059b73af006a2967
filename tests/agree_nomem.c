/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap env=FTW_INJECT=rank=2,at=nomem:1 */
/*
 * agree_nomem - a process whose allocation for an agreement fails still
 * takes part: every member returns MPI_ERR_NO_MEM, none hangs.
 *
 * FTW_INJECT makes rank 2's first allocation for an agreement fail (as
 * malloc returning NULL; ftwrap gives back its reserve and goes on).
 * OP (validate here; agree_nomem_agree.c: MPIX_Comm_agree,
 * agree_nomem_shrink.c: MPIX_Comm_shrink) runs on MPI_COMM_WORLD on all
 * four ranks without any failure: it must return an error of class
 * MPI_ERR_NO_MEM on every rank within 5 s.  The same call again returns
 * MPI_SUCCESS everywhere (validate: an empty group; agree: the AND of the
 * flags; shrink: a communicator of 4), and a checksummed MPI_Bcast and an
 * MPI_Allreduce over MPI_COMM_WORLD (and over the shrunken communicator)
 * give the right bytes.  A watchdog ends a rank stuck for 20 s.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftwrap.h"
#include "tap.h"

#define NP 4
#define BOUND 5.0
#define LEN 4096

#ifndef OP
#define OP 0                    /* 0 validate, 1 agree, 2 shrink */
#endif

static const char *const op_name[] = {
    "FTW_Comm_validate", "MPIX_Comm_agree", "MPIX_Comm_shrink",
};

static const char *volatile step = "start";

static void *watchdog(void *arg)
{
    (void)arg;
    sleep(20);
    fprintf(stderr, "# WATCHDOG: still in \"%s\" after 20 s\n", step);
    fflush(stderr);
    _exit(3);
    return NULL;
}

/* One call of OP on MPI_COMM_WORLD; *out: validate's group size, agree's
 * flag, shrink's size (the communicator in *sc). */
static int run_op(int rank, int *out, MPI_Comm *sc)
{
    MPI_Group g;
    int rc, flag;

    *out = -1;
    switch (OP) {
    case 0:
        rc = FTW_Comm_validate(MPI_COMM_WORLD, &g);
        if (rc == MPI_SUCCESS) {
            MPI_Group_size(g, out);
            if (g != MPI_GROUP_EMPTY)
                MPI_Group_free(&g);
        }
        return rc;
    case 1:
        flag = 0xff & ~(1 << (rank + 1));
        rc = MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
        *out = flag;
        return rc;
    default:
        rc = MPIX_Comm_shrink(MPI_COMM_WORLD, sc);
        if (rc == MPI_SUCCESS)
            MPI_Comm_size(*sc, out);
        return rc;
    }
}

static int op_want(void)
{
    return OP == 0 ? 0 : OP == 1 ? 0xe1 : NP;
}

int main(int argc, char **argv)
{
    int rank, size, rc, cls = -1, out, sum = -1, all_cls;
    MPI_Comm sc = MPI_COMM_NULL;
    double t;
    char *buf;
    pthread_t wd;

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != NP) {
        if (rank == 0)
            printf("1..0 # SKIP needs %d ranks\n", NP);
        MPI_Finalize();
        return 0;
    }
    pthread_create(&wd, NULL, watchdog, NULL);
    pthread_detach(wd);
    tap_plan(7);

    step = "first call";
    MPI_Barrier(MPI_COMM_WORLD);
    t = MPI_Wtime();
    rc = run_op(rank, &out, &sc);
    t = MPI_Wtime() - t;
    MPI_Error_class(rc, &cls);
    if (rc == MPI_SUCCESS && sc != MPI_COMM_NULL)
        MPI_Comm_free(&sc);
    tap_ok(cls == MPI_ERR_NO_MEM, "%s with rank 2 short of memory: "
           "MPI_ERR_NO_MEM on every rank (here class %d)", op_name[OP], cls);
    all_cls = -1;
    MPI_Allreduce(&cls, &all_cls, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    tap_ok(all_cls == cls, "the same error class everywhere");
    tap_ok(t < BOUND, "it returned in %.3f s (bound %.0f s)", t, BOUND);

    step = "second call";
    rc = run_op(rank, &out, &sc);
    tap_ok(rc == MPI_SUCCESS && out == op_want(),
           "%s again: MPI_SUCCESS and %d (got %d, %d)", op_name[OP],
           op_want(), rc, out);

    step = "traffic";
    buf = malloc(LEN);
    if (rank == 1)
        tap_fill(buf, LEN, 77);
    else
        memset(buf, 0, LEN);
    rc = MPI_Bcast(buf, LEN, MPI_BYTE, 1, MPI_COMM_WORLD);
    tap_ok(rc == MPI_SUCCESS && tap_check(buf, LEN, 77),
           "checksummed MPI_Bcast of %d bytes over MPI_COMM_WORLD", LEN);
    rc = MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    tap_ok(rc == MPI_SUCCESS && sum == 6, "MPI_Allreduce: %d (want 6)", sum);
    sum = -1;
    if (sc != MPI_COMM_NULL) {
        rc = MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, sc);
        MPI_Comm_free(&sc);
    } else {
        sum = 6;
    }
    tap_ok(rc == MPI_SUCCESS && sum == 6,
           "MPI_Allreduce over the shrunken communicator, if any: %d", sum);
    free(buf);
    step = "MPI_Finalize";
    MPI_Finalize();
    return tap_status();
}
