/* ftw-test: np=2 mode=ftwrap timeout=60 */
/*
 * p2p_status - single-completion calls leave status.MPI_ERROR alone.
 *
 * MPI lets only the calls that complete several requests at once
 * (MPI_Waitall, Testall, Waitsome, Testsome) write the MPI_ERROR field of
 * a status, and those only when they return MPI_ERR_IN_STATUS.  Rank 1
 * sends rank 0 one message per call; rank 0 sets MPI_ERROR to a sentinel
 * before each of MPI_Recv, MPI_Wait, MPI_Test, MPI_Probe, MPI_Iprobe,
 * MPI_Mprobe, MPI_Improbe, MPI_Mrecv, MPI_Imrecv + MPI_Wait, MPI_Sendrecv,
 * MPI_Sendrecv_replace, MPI_Waitany, MPI_Testany and
 * MPI_Request_get_status, and asserts that the call succeeded, that the
 * sentinel is still there, and that source, tag and count are the
 * message's (its payload checksummed).  Messages are 16 B and 256 KiB, so
 * large ones go through ftwrap's rendezvous when it is on.
 *
 * MPI_Request_get_status of MPI_REQUEST_NULL gives the MPI's own empty
 * status (compared with PMPI_Request_get_status).
 *
 * Under ftwrap only: MPICH 4.0 itself writes MPI_ERROR (0) in MPI_Probe,
 * MPI_Iprobe and MPI_Sendrecv_replace; ftwrap keeps the caller's value on
 * both MPIs, as MPI says.
 */
#include "tap.h"

#define SMALL 16
#define LARGE (256 * 1024)
#define SENTINEL (-4242)

enum { C_RECV, C_WAIT, C_TEST, C_PROBE, C_IPROBE, C_MPROBE, C_IMPROBE,
       C_IMRECV, C_SENDRECV, C_REPLACE, C_WAITANY, C_TESTANY, C_GETSTATUS,
       NCALLS };

static const char *const names[NCALLS] = {
    "MPI_Recv", "MPI_Wait", "MPI_Test", "MPI_Probe + MPI_Recv",
    "MPI_Iprobe + MPI_Recv", "MPI_Mprobe + MPI_Mrecv",
    "MPI_Improbe + MPI_Mrecv", "MPI_Mprobe + MPI_Imrecv + MPI_Wait",
    "MPI_Sendrecv", "MPI_Sendrecv_replace", "MPI_Waitany", "MPI_Testany",
    "MPI_Request_get_status + MPI_Wait",
};

static int tag_of(int call, int large)
{
    return 100 + 2 * call + large;
}

static uint64_t seed_of(int call, int large)
{
    return 0x57A7u + (uint64_t)tag_of(call, large);
}

static MPI_Status *fresh(MPI_Status *st)
{
    st->MPI_ERROR = SENTINEL;
    st->MPI_SOURCE = -7;
    st->MPI_TAG = -7;
    return st;
}

/* The status describes message (call, large) and kept the sentinel. */
static int status_ok(const MPI_Status *st, int call, int large, size_t len)
{
    int n = -1;

    MPI_Get_count(st, MPI_BYTE, &n);
    if (st->MPI_ERROR != SENTINEL)
        tap_diag("%s (%zu B): MPI_ERROR is %d", names[call], len,
                 st->MPI_ERROR);
    return st->MPI_ERROR == SENTINEL && st->MPI_SOURCE == 1 &&
           st->MPI_TAG == tag_of(call, large) && n == (int)len;
}

/* Rank 0's side of one call: receive the message with it; 1 if every
 * return code and status field is right and the data intact. */
static int receive_with(int call, int large, char *buf)
{
    size_t len = large ? LARGE : SMALL;
    int tag = tag_of(call, large), ok = 1, flag = 0, idx = -1, rc;
    MPI_Status st, st2;
    MPI_Request req = MPI_REQUEST_NULL, reqs[2];
    MPI_Message msg;

    memset(buf, 0, len);
    switch (call) {
    case C_RECV:
        rc = MPI_Recv(buf, (int)len, MPI_BYTE, 1, tag, MPI_COMM_WORLD,
                      fresh(&st));
        break;
    case C_WAIT:
        MPI_Irecv(buf, (int)len, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &req);
        rc = MPI_Wait(&req, fresh(&st));
        break;
    case C_TEST:
        MPI_Irecv(buf, (int)len, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &req);
        do
            rc = MPI_Test(&req, &flag, fresh(&st));
        while (rc == MPI_SUCCESS && !flag);
        break;
    case C_PROBE:
        rc = MPI_Probe(1, tag, MPI_COMM_WORLD, fresh(&st));
        ok &= rc == MPI_SUCCESS && status_ok(&st, call, large, len);
        rc = MPI_Recv(buf, (int)len, MPI_BYTE, 1, tag, MPI_COMM_WORLD,
                      fresh(&st));
        break;
    case C_IPROBE:
        do
            rc = MPI_Iprobe(1, tag, MPI_COMM_WORLD, &flag, fresh(&st));
        while (rc == MPI_SUCCESS && !flag);
        ok &= rc == MPI_SUCCESS && status_ok(&st, call, large, len);
        rc = MPI_Recv(buf, (int)len, MPI_BYTE, 1, tag, MPI_COMM_WORLD,
                      fresh(&st));
        break;
    case C_MPROBE:
    case C_IMPROBE:
        if (call == C_MPROBE)
            rc = MPI_Mprobe(1, tag, MPI_COMM_WORLD, &msg, fresh(&st));
        else
            do
                rc = MPI_Improbe(1, tag, MPI_COMM_WORLD, &flag, &msg,
                                 fresh(&st));
            while (rc == MPI_SUCCESS && !flag);
        ok &= rc == MPI_SUCCESS && status_ok(&st, call, large, len);
        rc = MPI_Mrecv(buf, (int)len, MPI_BYTE, &msg, fresh(&st));
        break;
    case C_IMRECV:
        rc = MPI_Mprobe(1, tag, MPI_COMM_WORLD, &msg, fresh(&st));
        ok &= rc == MPI_SUCCESS && status_ok(&st, call, large, len);
        MPI_Imrecv(buf, (int)len, MPI_BYTE, &msg, &req);
        rc = MPI_Wait(&req, fresh(&st));
        break;
    case C_SENDRECV:
        rc = MPI_Sendrecv(buf + len, 1, MPI_BYTE, 1, tag, buf, (int)len,
                          MPI_BYTE, 1, tag, MPI_COMM_WORLD, fresh(&st));
        break;
    case C_REPLACE:
        rc = MPI_Sendrecv_replace(buf, (int)len, MPI_BYTE, 1, tag, 1, tag,
                                  MPI_COMM_WORLD, fresh(&st));
        break;
    case C_WAITANY:
    case C_TESTANY:
        reqs[0] = MPI_REQUEST_NULL;
        MPI_Irecv(buf, (int)len, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &reqs[1]);
        if (call == C_WAITANY)
            rc = MPI_Waitany(2, reqs, &idx, fresh(&st));
        else
            do
                rc = MPI_Testany(2, reqs, &idx, &flag, fresh(&st));
            while (rc == MPI_SUCCESS && !flag);
        ok &= idx == 1;
        break;
    case C_GETSTATUS:
        MPI_Irecv(buf, (int)len, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &req);
        do
            rc = MPI_Request_get_status(req, &flag, fresh(&st));
        while (rc == MPI_SUCCESS && !flag);
        ok &= rc == MPI_SUCCESS && status_ok(&st, call, large, len);
        rc = MPI_Wait(&req, fresh(&st2));
        st = st2;
        break;
    default:
        return 0;
    }
    ok &= rc == MPI_SUCCESS && status_ok(&st, call, large, len) &&
          tap_check(buf, len, seed_of(call, large));
    return ok;
}

/* Rank 1's side: send the message (and take part in the exchanges). */
static void send_for(int call, int large, char *buf)
{
    size_t len = large ? LARGE : SMALL;
    int tag = tag_of(call, large);

    tap_fill(buf, len, seed_of(call, large));
    if (call == C_SENDRECV)
        MPI_Sendrecv(buf, (int)len, MPI_BYTE, 0, tag, buf + len, 1, MPI_BYTE,
                     0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else if (call == C_REPLACE)
        MPI_Sendrecv_replace(buf, (int)len, MPI_BYTE, 0, tag, 0, tag,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        MPI_Send(buf, (int)len, MPI_BYTE, 0, tag, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    char *buf;
    int rank;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    tap_plan(2 * NCALLS + 1);
    buf = malloc(2 * LARGE);
    for (int call = 0; call < NCALLS; call++) {
        for (int large = 0; large < 2; large++) {
            int ok = 1;

            if (rank == 0)
                ok = receive_with(call, large, buf);
            else
                send_for(call, large, buf);
            tap_ok(ok, "%s, %s message: success, MPI_ERROR untouched, "
                   "source/tag/count right, data intact", names[call],
                   large ? "256 KiB" : "16 B");
        }
    }
    {
        /* A null request's empty status: the MPI's own, field by field
         * (MPICH writes MPI_ERROR = MPI_SUCCESS there, Open MPI does not). */
        MPI_Status mine, native;
        int f1 = 0, f2 = 0;

        mine.MPI_ERROR = native.MPI_ERROR = SENTINEL;
        mine.MPI_SOURCE = native.MPI_SOURCE = 7;
        mine.MPI_TAG = native.MPI_TAG = 7;
        MPI_Request_get_status(MPI_REQUEST_NULL, &f1, &mine);
        PMPI_Request_get_status(MPI_REQUEST_NULL, &f2, &native);
        tap_ok(f1 == f2 && mine.MPI_ERROR == native.MPI_ERROR &&
               mine.MPI_SOURCE == native.MPI_SOURCE &&
               mine.MPI_TAG == native.MPI_TAG,
               "MPI_Request_get_status(MPI_REQUEST_NULL): the MPI's own "
               "empty status (flag %d, error %d, source %d, tag %d)", f1,
               mine.MPI_ERROR, mine.MPI_SOURCE, mine.MPI_TAG);
    }
    free(buf);
    MPI_Finalize();
    return tap_status();
}
