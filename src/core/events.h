/*
 * Events the application side learns between calls.
 *
 *   failures     ftw_wrap_check (core/ft.h) sees the detector's epoch move
 *                and calls ftw_failure_catch_up: each failure is logged
 *                once, then every failure hook runs, in the order they
 *                registered (agreements, revocation, failure handlers)
 *   releases     the program freed a communicator: ftwrap forgets its
 *                record, then every release hook runs with its handle and
 *                its id
 *
 * Subsystems above core register their hooks once, at MPI_Init.
 */
#ifndef FTW_CORE_EVENTS_H
#define FTW_CORE_EVENTS_H

#include <mpi.h>
#include <stdint.h>

typedef void ftw_failure_hook_t(void);
typedef void ftw_released_hook_t(MPI_Comm comm, uint64_t id);

void ftw_on_failure(ftw_failure_hook_t *fn);
void ftw_on_comm_released(ftw_released_hook_t *fn);

#endif
