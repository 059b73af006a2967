/* ftw-test: np=3 mode=ftwrap timeout=40 expect-failed=1 fate=1:signal:KILL env=FTW_RNDV_THRESHOLD=2k env=FTW_EAGER_MAX=1k env=FTW_RNDV_FIRST=4k env=FTW_INJECT=rank=1,at=frag:1 env=FTW_XPORT=cma */
/*
 * rndv_first_frag_kill - a sender killed between its RTS and its first
 * fragment (FTW_INJECT at=frag:1), with the whole message in the
 * fragment (3 KiB, FTW_RNDV_FIRST=4k): its receiver has nothing to
 * pull and waits for the fragment alone.
 *
 * Asserts:
 *  - rank 0's MPI_Recv returns FTW_ERR_PROC_FAIL_STOP (never a hang),
 *    within 5 s, after meeting the RTS (the rendezvous counts the
 *    message as ended by a failure, "rndv_aborted");
 *  - afterwards rank 2 sends rank 0 a rendezvous message whose first
 *    bytes come as a fragment and an eager one, both intact (checksums),
 *    and rank 0 took that fragment ("rndv_first_frag");
 *  - MPI_Finalize returns on the survivors; no process or file is left
 *    behind (the runner checks).
 */
#include "tap.h"

#include <stdlib.h>

#include "ftwrap.h"
#include "killed_sender.h"

#ifndef LEN
#define LEN ((size_t)3 << 10)
#endif
#define NEXT ((size_t)(1 << 20) + 5)

int main(int argc, char **argv)
{
    size_t cap = LEN > NEXT ? LEN : NEXT;
    unsigned char *buf = malloc(cap);
    int rank, cls = -1, rc;
    double t0, dt = 0;

    rank = ks_start(&argc, &argv, buf);
    if (rank == 1)
        return ks_victim(buf, LEN, "fragment");
    if (rank == 2)
        return ks_bystander(buf, NEXT);
    tap_plan(5);
    t0 = MPI_Wtime();
    rc = MPI_Recv(buf, (int)LEN, MPI_BYTE, 1, KS_TAG_VICTIM, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    dt = MPI_Wtime() - t0;
    cls = tap_class(rc);
    tap_ok_local(cls == FTW_ERR_PROC_FAIL_STOP && tap_ftw_stat("rndv_aborted")
                 == 1, "receive from a sender killed before its fragment: "
                 "%s, after its RTS (rndv_aborted %lld)", class_name(cls),
                 tap_ftw_stat("rndv_aborted"));
    tap_ok_local(dt < 5.0, "... within 5 s (%.3f s)", dt);
    tap_ok_local(ks_bystander_intact(buf, NEXT, NEXT), "a later rendezvous "
                 "and eager message from rank 2 arrive intact");
    tap_ok_local(tap_ftw_stat("rndv_first_frag") == 1, "... the first with "
                 "its fragment (rndv_first_frag %lld)",
                 tap_ftw_stat("rndv_first_frag"));
    tap_ok_local(ks_bystander_verdict(), "rank 2's sends succeeded");
    free(buf);
    MPI_Finalize();
    return tap_status();
}
