/*
 * What recover registers into core's hooks at MPI_Init (life/init.c):
 * the progress steps of nonblocking validates and of the drain sinks,
 * and the sinks' forgetting of a freed communicator record.
 */
#ifndef FTW_RECOVER_RECOVER_H
#define FTW_RECOVER_RECOVER_H

#include <stdatomic.h>

#include "core/comm.h"

/* Nonblocking validates in progress (validate.c). */
extern _Atomic int ftw_validates_pending;
void ftw_validate_progress(void);

/*
 * The drain sink: the native communicators a drain left behind keep
 * being emptied (drain.c): every message that arrives on them is
 * received into scratch memory and dropped, so a sender's request from
 * before the drain ends instead of waiting for a receive that will never
 * come.  Progress calls it while any exists.
 */
extern _Atomic int ftw_drain_sinks;
void ftw_drain_sink_progress(void);
/* The record c is freed: stop emptying its communicators. */
void ftw_drain_sink_forget(const ftw_comm_t *c);

#endif
