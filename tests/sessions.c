/* ftw-test: np=1 mode=both timeout=60 mpi=mpich */
/*
 * sessions - a program of MPI sessions alone (MPI-4: no MPI_Init, so no
 * MPI_COMM_WORLD) runs under ftwrap as it does natively: ftwrap stays out
 * of the way, every call is the MPI's own.
 *
 * Each process opens a session, makes a communicator from the
 * "mpi://WORLD" process set and one from "mpi://SELF", and checks: a ring
 * of checksummed 64 KiB messages (MPI_Sendrecv), MPI_Irecv + MPI_Send to
 * itself on the SELF communicator, MPI_Allreduce of the ranks, the
 * statuses' source and tag, then frees both and finalizes the session.
 * One process: MPICH crashes when a wrapper that waits in MPI_Test
 * loops (ftwrap's blocking send) runs on a session's communicator alone.
 * (mpi=mpich: Open MPI 4.1 has no sessions.)
 */
#include "tap.h"

#if MPI_VERSION >= 4
#define LEN 65536

static int world_ring(MPI_Comm comm, int rank, int size)
{
    unsigned char *out = malloc(LEN), *in = malloc(LEN);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, ok = 1;
    MPI_Status st;

    tap_fill(out, LEN, (uint64_t)rank);
    ok &= MPI_Sendrecv(out, LEN, MPI_BYTE, next, 3, in, LEN, MPI_BYTE, prev,
                       3, comm, &st) == MPI_SUCCESS;
    ok &= tap_check(in, LEN, (uint64_t)prev);
    ok &= st.MPI_SOURCE == prev && st.MPI_TAG == 3;
    free(out);
    free(in);
    return ok;
}

static int self_message(MPI_Comm self)
{
    int sent = 4242, got = -1, ok = 1;
    MPI_Request req;
    MPI_Status st;

    ok &= MPI_Irecv(&got, 1, MPI_INT, 0, 9, self, &req) == MPI_SUCCESS;
    ok &= MPI_Send(&sent, 1, MPI_INT, 0, 9, self) == MPI_SUCCESS;
    ok &= MPI_Wait(&req, &st) == MPI_SUCCESS;
    return ok && got == sent && st.MPI_SOURCE == 0 && st.MPI_TAG == 9;
}

int main(void)
{
    MPI_Session s;
    MPI_Group gw, gs;
    MPI_Comm world, self;
    int rank, size, sum = -1, ok_ring, ok_self, ok_sum, ok_free = 1;
    int flag = 1;

    if (MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s) !=
            MPI_SUCCESS ||
        MPI_Group_from_session_pset(s, "mpi://WORLD", &gw) != MPI_SUCCESS ||
        MPI_Group_from_session_pset(s, "mpi://SELF", &gs) != MPI_SUCCESS ||
        MPI_Comm_create_from_group(gw, "ftwrap.sessions.world",
                                   MPI_INFO_NULL, MPI_ERRORS_RETURN,
                                   &world) != MPI_SUCCESS ||
        MPI_Comm_create_from_group(gs, "ftwrap.sessions.self",
                                   MPI_INFO_NULL, MPI_ERRORS_RETURN,
                                   &self) != MPI_SUCCESS) {
        printf("not ok 1 - sessions, process sets and communicators\n");
        return 1;
    }
    MPI_Group_free(&gw);
    MPI_Group_free(&gs);
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &size);
    tap_rank_ = rank;       /* there is no MPI_COMM_WORLD to ask */

    ok_ring = world_ring(world, rank, size);
    ok_self = self_message(self);
    ok_sum = MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, world) ==
             MPI_SUCCESS && sum == size * (size - 1) / 2;
    MPI_Initialized(&flag);

    tap_plan(5);
    tap_ok_comm(world, flag == 0, "MPI_Initialized says 0: no MPI_Init");
    tap_ok_comm(world, ok_ring, "ring of 64 KiB messages on the WORLD "
                "set's communicator: bytes, source and tag right");
    tap_ok_comm(world, ok_self, "message to itself on the SELF set's "
                "communicator");
    tap_ok_comm(world, ok_sum, "MPI_Allreduce of the ranks: %d", sum);
    ok_free &= MPI_Comm_free(&self) == MPI_SUCCESS;
    ok_free &= MPI_Barrier(world) == MPI_SUCCESS;
    ok_free &= MPI_Comm_free(&world) == MPI_SUCCESS;
    ok_free &= MPI_Session_finalize(&s) == MPI_SUCCESS;
    /* The communicators are gone: rank 0 reports on its own. */
    tap_ok_local(ok_free, "communicators freed, session finalized");
    return tap_status();
}
#else
int main(void)
{
    printf("1..0 # SKIP no MPI sessions in this MPI\n");
    return 0;
}
#endif
