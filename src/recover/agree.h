/*
 * Fault-tolerant agreement among the members of a communicator.
 *
 * A tree agreement with early return for a perfect failure detector
 * (ftwrap's is, from the survivors' point of view: pidfds never suspect a
 * live process, and a process wrongly suspected by heartbeat is forced to
 * exit).  The members form a binomial tree over their indices (the parent
 * of i is i with its lowest set bit cleared); a member known failed is
 * skipped, its children hanging from its nearest live ancestor, and a
 * member whose ancestors all failed hangs from the lowest live member,
 * the root.  Each process sends UP to its parent the fold of its proposal
 * and of the UPs of its children, once it has them all (or knows the
 * missing ones failed); the root decides on its fold and the decision
 * goes DOWN the tree.  A process has its decision, and returns, as soon as
 * its parent's DOWN comes; it forwards it to its children first.
 * Without failures: 2 (n - 1) messages in all, 2 log2 n hops.
 *
 * Failures during an agreement reshape each process's tree as it learns
 * of them: an UP goes again to the new parent (a process that already
 * decided sends the decision UP instead, so that a new root takes it), a
 * decided process sends DOWN to each new child and answers any UP that
 * comes late with its decision, and a process takes a DOWN only from its
 * current parent (its contribution went there; a decision from a root
 * that failed and reached no live process is not final).  Every live
 * decided process thus holds the one decision every other survivor gets.
 *
 * The value agreed is the bitwise OR of the proposed failed bytes (one
 * per member; bit 0 means failed, callers may use other bits), with bit
 * 0 set for every member known failed at a process when its UP leaves or
 * the root decides, and the bitwise AND of the proposed int flags.
 * Messages travel on ftwrap's control channel (ctl.h) and carry the
 * communicator's id and the agreement's 64-bit number on it (the failure
 * handlers' agreements are numbered apart), so they never meet user
 * traffic or another agreement's.  A decided agreement stays, to answer,
 * until a later agreement on the same communicator decides with every
 * live member past it (each UP carries the lowest agreement number its
 * subtree has not decided), for 30 s after its communicator is freed, or
 * until MPI_Finalize.
 */
#ifndef FTW_FT_AGREE_H
#define FTW_FT_AGREE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "core/comm.h"

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

/* The communicator of id is being freed: its agreements kept to answer
 * go some time later. */
void ftw_agree_comm_freed(uint64_t id);

/* This process learned of a failure: the agreements kept to answer send
 * their decision to their new children and parents now. */
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

/* The failure handlers' agreement (SUBSET mode) for the nfailed-th
 * failure among c's members (nfailed >= 1): numbered by that count, apart
 * from c's other agreements, so that every member runs the same ones
 * (one per failure, however the failures were learned) and none takes a
 * message of an agreement another member runs meanwhile; only the flag
 * comes back. */
int ftw_agree_handler(ftw_comm_t *c, int nfailed, int *flag_out);

/* Blocking: start, progress until decided, give the result, free. */
int ftw_agree(ftw_comm_t *c, const uint8_t *failed_in, int flag_in,
              uint8_t *failed_out, int *flag_out);

/* ftw_agree for a call that then makes a communicator of the survivors
 * (the members the decision does not mark failed), blocking: when one is
 * to be made (always, or the decision marks a member failed, or the flag
 * AND is 0), a second agreement confirms that every survivor is still
 * live everywhere (each proposes whether it knows of none failed, and
 * the second decision must name none of them); if not, both run again.
 * Every member makes the same choice.  A member dying after its
 * contribution to the second agreement still leaves the others in the
 * MPI's creation. */
int ftw_agree_settled(ftw_comm_t *c, int flag_in, int always,
                      uint8_t *failed_out, int *flag_out);

/* ftw_agree in two steps, so that the caller can work while the
 * proposals travel: post starts it (nothing else may start an agreement
 * on c before the wait); wait progresses it until decided, gives the
 * result and frees it. */
int ftw_agree_post(ftw_comm_t *c, const uint8_t *failed_in, int flag_in,
                   ftw_agree_t **agree_p);
int ftw_agree_wait(ftw_agree_t *a, uint8_t *failed_out, int *flag_out);

/* Out of memory: a member whose allocation for an agreement fails still
 * takes part and proposes the shortage; the decision then carries it to
 * every member, and ftw_agree, ftw_agree_wait and ftw_agree_settled
 * return MPI_ERR_NO_MEM everywhere (failed_out and flag_out are still
 * filled in).  ftw_agree_error gives that of a decided agreement.
 * ftw_agree_malloc is malloc for what a caller needs before it starts an
 * agreement: on failure ftwrap's reserve is given back and the
 * allocation tried again, and the next agreement this thread starts
 * proposes the shortage (the memory, if then found, is the caller's all
 * the same).  ftw_agree_malloc_after is the same for what is needed
 * after the decision (no proposal left to carry it). */
int ftw_agree_error(const ftw_agree_t *a);
void *ftw_agree_malloc(size_t len);
void *ftw_agree_malloc_after(size_t len);

#endif
