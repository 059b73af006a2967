/*
 * Threads: the one lock abstraction, and the gate words.
 *
 * Locks.  Every table MPI calls share (requests, communicators, the probe
 * stash, matched messages, quarantine, cut buffers, the control channel,
 * agreements, failure handlers, windows, files, drain sinks) is guarded
 * by an ftw_mt_lock.  It locks only under MPI_THREAD_MULTIPLE, which
 * MPI_Init_thread chooses from the provided level (ftw_threaded); under
 * the other levels one thread at a time calls MPI, and ftwrap's own
 * threads (the detector, the finalize watchdog) touch none of these
 * tables, so the lock is one predictable branch.
 *
 * Gate words.  A count or flag read without a lock on every call to skip
 * a subsystem when it has nothing (ftw_req_count, ftw_cut_count,
 * ftw_p2p_moved, ...) is _Atomic: another thread may change it.  Readers
 * load it relaxed or acquire (a plain load on x86); a writer holding the
 * table's lock changes it with ftw_gate_add, a relaxed load and a release
 * store (a plain store on x86, where a ++ on an _Atomic would be a locked
 * instruction).  Seeing a stale value is harmless: a zero skips a table
 * another thread just filled for its own request, a nonzero takes the
 * lock and finds nothing.
 */
#ifndef FTW_FT_LOCK_H
#define FTW_FT_LOCK_H

#include <pthread.h>
#include <stdatomic.h>

extern int ftw_threaded;    /* set at MPI_Init for MPI_THREAD_MULTIPLE */

static inline void ftw_mt_lock(pthread_mutex_t *m)
{
    if (ftw_threaded)
        pthread_mutex_lock(m);
}

static inline void ftw_mt_unlock(pthread_mutex_t *m)
{
    if (ftw_threaded)
        pthread_mutex_unlock(m);
}

/* 0 if taken (always, with one thread), as pthread_mutex_trylock. */
static inline int ftw_mt_trylock(pthread_mutex_t *m)
{
    return ftw_threaded ? pthread_mutex_trylock(m) : 0;
}

/* A gate word's value, relaxed. */
#define ftw_gate_get(g) atomic_load_explicit(&(g), memory_order_relaxed)

/* Add d to gate word g; only with the lock of g's table held (one
 * writer at a time). */
#define ftw_gate_add(g, d)                                               \
    atomic_store_explicit(&(g),                                          \
                          atomic_load_explicit(&(g),                     \
                                               memory_order_relaxed) + (d), \
                          memory_order_release)

#endif
