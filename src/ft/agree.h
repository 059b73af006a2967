/*
 * Fault-tolerant agreement among the members of a communicator.
 *
 * The algorithm is Flooding Consensus for a perfect failure detector
 * (Cachin, Guerraoui and Rodrigues, "Introduction to Reliable and Secure
 * Distributed Programming", 2011, algorithm 5.1).  ftwrap's detector is
 * perfect from the survivors' point of view: pidfds never suspect a live
 * process, and a process wrongly suspected by heartbeat is forced to exit.
 * Each round every process floods the proposals it has seen to all others
 * and waits for the round's message of every process it does not know to
 * be dead; a process decides when a round brings messages from the same
 * set of processes as the round before (no failure in between), and then
 * floods DECIDED, which ends the agreement for everyone still in it.  It
 * was chosen over a coordinator-based commit because no process ever has
 * to answer for an agreement it has left: a decided process tells the
 * others the decision and goes.
 *
 * The value agreed is a deterministic function of the set of proposals:
 * the bitwise OR of the proposed failed bytes (one per rank; bit 0 means
 * failed, callers may use other bits) and the bitwise AND of the proposed
 * int flags.  Messages travel on ftwrap's control channel (ctl.h),
 * named by the communicator's id and the agreement's number on it, so
 * they never meet user traffic or another agreement's.  A process has
 * its decision as soon as it decides; the agreement is released once
 * DECIDED (each process's last message) came from every other live
 * process, in the background (later agreements finish what earlier ones
 * left), so nothing of it stays behind.
 */
#ifndef FTW_FT_AGREE_H
#define FTW_FT_AGREE_H

#include <mpi.h>
#include <stdint.h>

#include "ft/comm.h"

typedef struct ftw_agree ftw_agree_t;

/* The processes an agreement on c runs over: its members, or both groups
 * of an intercommunicator (of one job), the group holding the lowest
 * world rank first.  The failed arrays below have one byte per process in
 * that order. */
int ftw_agree_members(const ftw_comm_t *c);
/* Their world ranks into world[ftw_agree_members(c)]; this process's
 * index (its group starts at that minus its rank). */
int ftw_agree_member_list(const ftw_comm_t *c, int *world);

/* Start an agreement on c with this process's proposal: failed (one
 * byte per process, bit 0 = failed; NULL: what the detector knows now)
 * and flag. */
int ftw_agree_start(ftw_comm_t *c, const uint8_t *failed, int flag,
                    ftw_agree_t **agree_p);

/* Make progress without blocking; 1 once decided. */
int ftw_agree_test(ftw_agree_t *a);

/* The decision (valid once ftw_agree_test returned 1): failed is an array
 * of c->size bytes the caller provides. */
void ftw_agree_result(const ftw_agree_t *a, uint8_t *failed, int *flag);

/* Done with a: released now, or once its last messages are in. */
void ftw_agree_free(ftw_agree_t *a);

/* Finish what is still finishing, for at most a second, and release it
 * (at finalize, before the MPI's own). */
void ftw_agree_fini(void);

/* The communicator of id is being freed (collective): its agreements
 * kept to answer late askers send their DECIDED now, to be released once
 * every member's is in. */
void ftw_agree_comm_freed(uint64_t id);

/* This process learned of a failure: every agreement kept to answer late
 * askers sends its DECIDED now. */
void ftw_agree_failure_seen(void);

/* Agreements that end a nonblocking call (FTW_Icomm_validate,
 * FTW_Icomm_drain_all, MPIX_Comm_iagree, MPIX_Comm_ishrink): a generalized
 * request that ftwrap's waits and tests progress, started with the
 * proposal (proposal, flag) as ftw_agree_start; finish runs once decided,
 * with the decision and out, and its return value is the error the
 * request completes with.  They finish in the order they started, on
 * every process.  failed (c->size + 1 bytes, freed by ftwrap) receives
 * the decision. */
typedef int (*ftw_pending_finish_fn_t)(ftw_comm_t *c, const uint8_t *failed,
                                       int flag, void *out);
int ftw_pending_start(ftw_comm_t *c, ftw_pending_finish_fn_t finish,
                      uint8_t *failed, const uint8_t *proposal, int flag,
                      void *out, MPI_Request *request);

/* FTW_Comm_validate's end, after the agreement decided failed[]: the
 * collectives switch over to the survivors; out is the MPI_Group * for
 * the failed group. */
int ftw_validate_finish(ftw_comm_t *c, const uint8_t *failed, int flag,
                        void *out);

/* Finish every pending one first (blocking validate and drain). */
void ftw_pending_finish_all(void);

/* The communicator's record, checked fit for an agreement, and a
 * c->size + 1 byte array for its decision. */
int ftw_agree_prepare(MPI_Comm comm, ftw_comm_t **c_p, uint8_t **failed_p);
/* The same, also for an intercommunicator of one job, whose decision
 * array covers both groups (ftw_agree_members + 1 bytes). */
int ftw_agree_prepare_inter(MPI_Comm comm, ftw_comm_t **c_p,
                            uint8_t **failed_p);

/* Blocking: start, progress until decided, give the result, free. */
int ftw_agree(ftw_comm_t *c, const uint8_t *failed_in, int flag_in,
              uint8_t *failed_out, int *flag_out);

/* ftw_agree in two steps, so that the caller can work while the
 * proposals travel: post starts it (nothing else may start an agreement
 * on c before the wait); wait progresses it until decided, gives the
 * result and frees it. */
int ftw_agree_post(ftw_comm_t *c, const uint8_t *failed_in, int flag_in,
                   ftw_agree_t **agree_p);
void ftw_agree_wait(ftw_agree_t *a, uint8_t *failed_out, int *flag_out);

#endif
