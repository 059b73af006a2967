/* ftw-test: np=4 mode=both timeout=60 */
/*
 * errhandlers - error handlers behave as without ftwrap.
 *
 * Asserts that with MPI_ERRORS_RETURN an erroneous call returns a code of
 * the right class (send to rank == size: MPI_ERR_RANK; count -1:
 * MPI_ERR_COUNT; negative tag: MPI_ERR_TAG; bcast root == size:
 * MPI_ERR_ROOT) with a non-empty MPI_Error_string; that a handler made by
 * MPI_Comm_create_errhandler is called once per erroneous call with the
 * communicator handle the call used and the code the call then returns;
 * that MPI_Comm_get_errhandler returns the handler set; that
 * MPI_Comm_call_errhandler invokes it with the given code; that
 * MPI_Comm_dup inherits it; that it stays in force after
 * MPI_Errhandler_free; and that the communicators still work afterwards.
 * MPI_ERRORS_ARE_FATAL is not exercised.
 */
#include "tap.h"

#define PLAN 15

static int rank, size;

/* What the user handler saw, per process. */
static int handler_calls;
static int handler_code;
static MPI_Comm handler_comm = MPI_COMM_NULL;

static void count_errors(MPI_Comm *comm, int *code, ...)
{
    handler_calls++;
    handler_code = *code;
    handler_comm = *comm;
}

static void handler_reset(void)
{
    handler_calls = 0;
    handler_code = MPI_SUCCESS;
    handler_comm = MPI_COMM_NULL;
}

/* Class of an error code, or -1 when MPI_Error_class itself fails. */

/* 1 when MPI_Error_string succeeds on code with a non-empty string. */
static int has_string(int code)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = -1;

    memset(msg, 0, sizeof msg);
    if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS)
        return 0;
    return len > 0 && len < MPI_MAX_ERROR_STRING && strlen(msg) == (size_t)len;
}

/* 1 when rc is an error of class want; logs a mismatch. */
static int is_class(int rc, int want, const char *call)
{
    int cls = class_of(rc);

    if (rc == MPI_SUCCESS || cls != want)
        tap_diag("%s returned %d (class %d), expected class %d", call, rc, cls,
                 want);
    return rc != MPI_SUCCESS && cls == want;
}

/* --- MPI_ERRORS_RETURN on MPI_COMM_WORLD --------------------------------- */

static void test_errors_return(void)
{
    int buf[4] = { 1, 2, 3, 4 }, rc;

    rc = MPI_Send(buf, 1, MPI_INT, size, 0, MPI_COMM_WORLD);
    tap_ok(is_class(rc, MPI_ERR_RANK, "MPI_Send") && has_string(rc),
           "MPI_ERRORS_RETURN: MPI_Send to rank == size returns MPI_ERR_RANK "
           "with a non-empty MPI_Error_string");

    rc = MPI_Send(buf, -1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);
    tap_ok(is_class(rc, MPI_ERR_COUNT, "MPI_Send") && has_string(rc),
           "MPI_ERRORS_RETURN: MPI_Send with count -1 returns MPI_ERR_COUNT "
           "with a non-empty MPI_Error_string");

    rc = MPI_Recv(buf, 1, MPI_INT, (rank + 1) % size, -5, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    tap_ok(is_class(rc, MPI_ERR_TAG, "MPI_Recv") && has_string(rc),
           "MPI_ERRORS_RETURN: MPI_Recv with tag -5 returns MPI_ERR_TAG with "
           "a non-empty MPI_Error_string");

    /* Every rank passes the same bad root, so none waits for the others. */
    rc = MPI_Bcast(buf, 4, MPI_INT, size, MPI_COMM_WORLD);
    tap_ok(is_class(rc, MPI_ERR_ROOT, "MPI_Bcast") && has_string(rc),
           "MPI_ERRORS_RETURN: MPI_Bcast with root == size returns "
           "MPI_ERR_ROOT with a non-empty MPI_Error_string");
}

/* --- a user handler ------------------------------------------------------ */

/* 1 when the handler was called `calls` times in all, last with code rc
 * of class cls on comm. */
static int handler_saw(int calls, MPI_Comm comm, int rc, int cls)
{
    int ok = handler_calls == calls && handler_comm == comm
             && handler_code == rc && class_of(rc) == cls;

    if (!ok)
        tap_diag("handler: %d calls (want %d), code %d (call returned %d, "
                 "class %d, want %d), comm %s", handler_calls, calls,
                 handler_code, rc, class_of(rc), cls,
                 handler_comm == comm ? "as used" : "differs");
    return ok;
}

/* 1 when comm's errhandler is the handle want. */
static int errhandler_is(MPI_Comm comm, MPI_Errhandler want)
{
    MPI_Errhandler got = MPI_ERRHANDLER_NULL;
    int ok;

    if (MPI_Comm_get_errhandler(comm, &got) != MPI_SUCCESS)
        return 0;
    ok = got == want;
    if (got != MPI_ERRHANDLER_NULL && got != MPI_ERRORS_RETURN
        && got != MPI_ERRORS_ARE_FATAL)
        MPI_Errhandler_free(&got);
    return ok;
}

int main(int argc, char **argv)
{
    MPI_Comm dup = MPI_COMM_NULL, dup2 = MPI_COMM_NULL;
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    int ok, rc, buf[2] = { 0, 0 }, sum = -1;

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tap_plan(PLAN);

    test_errors_return();

    tap_ok(errhandler_is(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
           "MPI_Comm_get_errhandler on MPI_COMM_WORLD returns "
           "MPI_ERRORS_RETURN, as set");

    /* A handler on a dup of MPI_COMM_WORLD, so the TAP traffic on
     * MPI_COMM_WORLD never goes through it. */
    ok = MPI_Comm_dup(MPI_COMM_WORLD, &dup) == MPI_SUCCESS;
    ok = ok && MPI_Comm_create_errhandler(count_errors, &eh) == MPI_SUCCESS;
    ok = ok && MPI_Comm_set_errhandler(dup, eh) == MPI_SUCCESS;
    ok = ok && errhandler_is(dup, eh);
    ok = tap_ok(ok, "MPI_Comm_get_errhandler returns the handler "
                "MPI_Comm_create_errhandler made and MPI_Comm_set_errhandler "
                "set");
    if (!ok) {
        MPI_Finalize();
        return tap_status();
    }

    handler_reset();
    rc = MPI_Send(buf, 1, MPI_INT, size, 0, dup);
    tap_ok(handler_saw(1, dup, rc, MPI_ERR_RANK),
           "MPI_Send to rank == size calls the user handler once with the "
           "comm and the MPI_ERR_RANK code the call returns");

    rc = MPI_Send(buf, -1, MPI_INT, (rank + 1) % size, 0, dup);
    tap_ok(handler_saw(2, dup, rc, MPI_ERR_COUNT),
           "MPI_Send with count -1 calls the user handler again with the "
           "MPI_ERR_COUNT code the call returns");

    rc = MPI_Comm_call_errhandler(dup, MPI_ERR_OTHER);
    tap_ok(rc == MPI_SUCCESS && handler_saw(3, dup, MPI_ERR_OTHER,
                                            MPI_ERR_OTHER),
           "MPI_Comm_call_errhandler invokes the user handler with the given "
           "code and returns MPI_SUCCESS");

    ok = MPI_Comm_dup(dup, &dup2) == MPI_SUCCESS && errhandler_is(dup2, eh);
    tap_ok(ok, "MPI_Comm_dup of a comm with a user handler inherits it");

    handler_reset();
    rc = dup2 == MPI_COMM_NULL ? MPI_SUCCESS
         : MPI_Send(buf, 1, MPI_INT, size, 0, dup2);
    tap_ok(handler_saw(1, dup2, rc, MPI_ERR_RANK),
           "an erroneous call on the dup calls the inherited handler with "
           "the dup's handle");

    ok = MPI_Errhandler_free(&eh) == MPI_SUCCESS && eh == MPI_ERRHANDLER_NULL;
    handler_reset();
    rc = MPI_Recv(buf, 1, MPI_INT, (rank + 1) % size, -5, dup,
                  MPI_STATUS_IGNORE);
    tap_ok(ok && handler_saw(1, dup, rc, MPI_ERR_TAG),
           "after MPI_Errhandler_free the handler stays attached and is "
           "called for MPI_ERR_TAG");

    /* Every rank errs identically, so the handler runs once on each. */
    handler_reset();
    rc = MPI_Bcast(buf, 2, MPI_INT, size, dup);
    tap_ok(handler_saw(1, dup, rc, MPI_ERR_ROOT),
           "MPI_Bcast with root == size calls the handler with MPI_ERR_ROOT");

    handler_reset();
    ok = MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, dup) == MPI_SUCCESS
         && sum == size * (size - 1) / 2;
    ok = ok && dup2 != MPI_COMM_NULL
         && MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_MAX, dup2)
            == MPI_SUCCESS && sum == size - 1;
    tap_ok(ok && handler_calls == 0, "after the errors MPI_Allreduce on both "
           "comms succeeds without calling the handler");

    ok = MPI_Comm_free(&dup2) == MPI_SUCCESS
         && MPI_Comm_free(&dup) == MPI_SUCCESS;
    tap_ok(ok && handler_calls == 0,
           "MPI_Comm_free releases both comms without calling the handler");

    MPI_Finalize();
    return tap_status();
}
