/*
 * Revocation (revoke.c): MPIX_Comm_revoke and what every waiting loop
 * looks at.
 *
 * MPIX_Comm_revoke sends a notice on the communicator's control
 * communicator to every live member, then rings their bells over the
 * detector's socket (detect.h).  A process learns of a revocation when it
 * looks for notices: on a bell, on a failure, and, once revocations are
 * about (ftw_revoke_listening), every few turns of any waiting loop.  The
 * first notice it finds for a communicator it forwards to every other
 * live member itself (flooding), so the revocation reaches everyone even
 * when the revoker dies half-way.
 */
#ifndef FTW_CORE_REVOKE_H
#define FTW_CORE_REVOKE_H

#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/comm.h"
#include "detect/detect.h"
#include "util/compiler.h"

/* Set once the process may receive revoke notices: it heard a bell,
 * revoked a communicator itself, or saw a failure (a revoker that died
 * may have left notices without bells).  Waiting loops then look for
 * notices now and then. */
extern _Atomic int ftw_revoke_listening;

/* Communicators known revoked in this process. */
extern _Atomic int ftw_revoked_count;

/* Bumped whenever a communicator of this process becomes revoked. */
extern _Atomic uint32_t ftw_revoke_gen;

/* Bells handled so far (ftw_det_bells when last looked). */
extern _Atomic uint32_t ftw_bells_seen;

/* Look for revoke notices on every control communicator, mark what they
 * name revoked and forward the first notice of each. */
void ftw_revoke_poll(void);

/* New bells: look for notices.  One relaxed load otherwise. */
static inline void ftw_revoke_check(void)
{
    if (ftw_unlikely(atomic_load_explicit(&ftw_det_bells,
                                          memory_order_relaxed) !=
                     atomic_load_explicit(&ftw_bells_seen,
                                          memory_order_relaxed)))
        ftw_revoke_poll();
}

/* The communicator with id was freed here: revoke notices for it that
 * arrive later are dropped. */
void ftw_revoke_comm_freed(uint64_t id);

/* 1 if comm is known revoked here (after looking for new bells). */
int ftw_comm_is_revoked_now(ftw_comm_t *c);

/* A failure hook (core/events.h): look for notices from now on. */
void ftw_revoke_failure_seen(void);

/* MPIX_Comm_revoke. */
int ftw_comm_revoke(MPI_Comm comm);

#endif
