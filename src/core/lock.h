/*
 * Locks only MPI_THREAD_MULTIPLE needs.  Under the other thread levels
 * one thread at a time calls MPI, so ftwrap's tables (requests,
 * communicators, the control channel, agreements) have one user at a
 * time; ftwrap's own threads (the detector, the finalize watchdog) touch
 * none of them.
 */
#ifndef FTW_FT_LOCK_H
#define FTW_FT_LOCK_H

#include <pthread.h>

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

#endif
