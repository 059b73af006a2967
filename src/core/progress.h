/*
 * Waiting: every blocking call of ftwrap's loops over ftw_poll_changed
 * (did failures, drains or revocations happen?) and ftw_poll_idle (one
 * idle turn).
 */
#ifndef FTW_CORE_PROGRESS_H
#define FTW_CORE_PROGRESS_H

#include <stdatomic.h>
#include <stdint.h>

/* The waiting side shared by every blocking call. */
typedef struct {
    uint32_t epoch;         /* failure epoch at the last check */
    uint32_t drains;        /* ftw_drain_seq at the last check */
    uint32_t revokes;       /* ftw_revoke_gen at the last check */
    unsigned spins;
} ftw_poll_t;

static inline void ftw_poll_init(ftw_poll_t *p)
{
    p->epoch = 0;
    p->drains = 0;
    p->revokes = 0;
    p->spins = 0;
}

/* Nonzero when failures, drains or revocations happened since the last
 * call. */
int ftw_poll_changed(ftw_poll_t *p);

/* One idle turn: run pending work, back off when waiting long. */
void ftw_poll_idle(ftw_poll_t *p);

/* Back off after spins idle turns: yield, or sleep (FTW_IDLE). */
void ftw_poll_backoff(unsigned spins);

/* A window was made (+1) or freed (-1) here: while any exists, waiting
 * calls do not sleep (FTW_IDLE). */
void ftw_win_count(int delta);

/* A subsystem's progress step: run by waiting loops (ftw_poll_idle) once
 * every `every` idle turns (a power of two) while *active is nonzero
 * (active NULL: always), and by each MPI_Test's single pass if on_test.
 * Registered at MPI_Init, before the program's threads call MPI. */
typedef struct ftw_progress_ops {
    const char *name;
    void (*progress)(void);
    const _Atomic int *active;
    unsigned every;
    int on_test;
} ftw_progress_ops_t;

void ftw_progress_register(const ftw_progress_ops_t *ops);

/* MPI_Test's pass: the on_test steps that are active. */
void ftw_progress_test(void);

#endif
