/*
 * The failure detector.
 *
 * One detector thread per process watches every peer: pidfd_open + epoll
 * for peers on this host, heartbeats over UDP along a ring for the others
 * (or for every peer with FTW_DETECT=heartbeat).  It publishes a failure by
 * appending the world rank to the failure log, setting its byte in the
 * failed set, and then bumping ftw_fail_epoch (release).  ftw_fail_epoch is
 * therefore the number of failures published so far, and entries
 * [0, epoch) of the log are valid after an acquire load of it.
 *
 * Peers on this host are also watched through a robust futex each (a
 * small sentinel thread waits on them): the kernel releases it before it
 * tears down the dead process's memory, so the notice comes in well under
 * a millisecond instead of the several milliseconds a pidfd waits.
 *
 * A process that learns it was declared failed while alive (stopped or
 * starved past FTW_HB_TIMEOUT) prints why and exits with status 75.
 *
 * The application side never blocks on the detector: the wrappers' fast
 * path is one relaxed load of ftw_fail_epoch.  The detector thread makes no
 * MPI calls; only ftw_detect_init does (collective over MPI_COMM_WORLD).
 */
#ifndef FTW_DETECT_DETECT_H
#define FTW_DETECT_DETECT_H

#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>

#include "util/status.h"

extern _Atomic uint32_t ftw_fail_epoch;

/* For threads that wait in a loop: notice a local peer's death from its
 * exit futex directly (published as the sentinel would), without waiting
 * for a detector thread to be scheduled.  Cheap: a load per local peer. */
void ftw_detect_peek(void);

/* Waiting calls sleep rather than spin once they have waited a while
 * (FTW_IDLE; set at MPI_Init).  ftw_detect_pause() is one such sleep: at
 * most 50 us, cut short when a failure is published. */
extern int ftw_idle_sleep;
void ftw_detect_pause(void);

/* Reasons for the wrappers to leave their fast path (ftw_quiet in
 * op/op.h): fault injection armed, traffic moved by a drain, agreements in
 * flight, a revoke bell heard.  Read with one relaxed load. */
extern _Atomic int ftw_noisy;

/* Revoke bells: a process that revoked a communicator (core/revoke.c) rings
 * the bell of every other member over the detector's socket after sending
 * the notice itself on the communicator's control communicator.  The
 * detector thread counts the bells it hears in ftw_det_bells and, on the
 * first, adds one to ftw_noisy for good, so blocked calls and every later
 * call take the watched path and look for the notice. */
extern _Atomic uint32_t ftw_det_bells;

/* Ring world rank r's bell (twice, like failure notices); no-op for this
 * process, a departed one or without a detector socket. */
void ftw_detect_bell(int world_rank);

/* Collective over MPI_COMM_WORLD (inside MPI_Init): exchange pids, host
 * ids and heartbeat addresses, open the pidfds and start the thread.
 * With FTW_DETECT=off it only records the world size. */
ftw_status_t ftw_detect_init(void);

/* Stop declaring failures: processes leaving after a clean MPI_Finalize
 * are not failures.  Returns once the thread has stopped publishing.  It
 * also tells every peer that this process is finalizing, so that its exit
 * is no failure for them either. */
void ftw_detect_quiesce(void);

/* Stop the thread and release its resources. */
void ftw_detect_fini(void);

/* 1 if world rank r (or the id of a process of another job) is known
 * to have failed (relaxed load). */
int ftw_detect_is_failed(int world_rank);

/* World rank of the i-th failure published, i < ftw_fail_epoch. */
int ftw_detect_failure(uint32_t i);

/* Tell every other process of the job to exit now with status (1..255):
 * what MPI_Abort means, carried out even where the launcher was told to
 * keep survivors alive.  Called by the aborting process before it aborts
 * itself. */
void ftw_detect_abort_job(int status);

/* Number of processes in MPI_COMM_WORLD. */
int ftw_detect_world_size(void);

/* This host's id (hostname and boot id) and this job's cookie (random,
 * the same in every process of the job); 0 before ftw_detect_init. */
uint64_t ftw_detect_host(void);
uint64_t ftw_detect_cookie(void);

/* The id of the process pid on host, of another job (core/xjob.c learned
 * of it): its world rank if it is of this job after all, else an id of
 * its own past the world ranks (the same on every call, valid in this
 * process only), which ftw_detect_is_failed and the failure log use like
 * a world rank.  On this host it is watched by a pidfd from now on;
 * elsewhere it is not watched.  -1 past 1024 such processes. */
int ftw_detect_foreign(uint64_t host, int pid);

/* pid of world rank r (for tests and diagnostics), or -1. */
int ftw_detect_pid(int world_rank);

/* The world rank of the process pid of this host, or -1. */
int ftw_detect_local_rank_of(int pid);

/* Publish world rank r's failure, proved by why (the kernel said the
 * process is gone). */
void ftw_detect_gone(int world_rank, const char *why);

/* pid of world rank r if it runs on this host (a pidfd can watch it),
 * else -1. */
int ftw_detect_local_pid(int world_rank);

/* Fault injection (FTW_INJECT): count one call at a named point and kill
 * this process when the configured count is reached.  Costs one branch
 * when FTW_INJECT is unset. */
typedef enum {
    FTW_INJECT_SEND,
    FTW_INJECT_RECV,
    FTW_INJECT_WAIT,
    FTW_INJECT_PROBE,
    FTW_INJECT_COLL,
    FTW_INJECT_FINALIZE,
    FTW_INJECT_PULL,        /* a rendezvous chunk this process pulls */
    FTW_INJECT_AGREE_UP,    /* an agreement's message up its tree */
    FTW_INJECT_AGREE_DOWN,  /* an agreement's decision down its tree */
    FTW_INJECT_AGREED,      /* an agreement decided, before the survivors'
                             * communicator is made */
    FTW_INJECT_PULLED,      /* a chunk another process pulls from this
                             * one: the puller sends the signal */
    FTW_INJECT_SETTLED,     /* a settled agreement decided, before its
                             * confirming agreement (ftw_agree_settled) */
    FTW_INJECT_DUP,         /* a duplicate this process is about to make
                             * (ftw_comm_dup_watched, MPI_Comm_dup's) */
    FTW_INJECT_NOMEM,       /* an allocation for an agreement: the N-th
                             * fails as if out of memory (no signal) */
    FTW_INJECT_FRAG,        /* a rendezvous send's first fragment, about to
                             * go after its RTS (FTW_RNDV_FIRST) */
    FTW_INJECT_EXPOSE,      /* a persistent rendezvous round's exposure:
                             * the N-th is refused as if no transport
                             * could carry it now (no signal) */
    FTW_INJECT_NPOINTS
} ftw_inject_point_t;

extern int ftw_inject_armed;
int ftw_inject_hit(ftw_inject_point_t point);

static inline void ftw_inject(ftw_inject_point_t point)
{
    if (__builtin_expect(ftw_inject_armed, 0))
        ftw_inject_hit(point);
}

/* The points that fail a step instead of signalling (FTW_INJECT_NOMEM,
 * FTW_INJECT_EXPOSE): 1 when this one is to fail. */
static inline int ftw_inject_fails(ftw_inject_point_t point)
{
    return __builtin_expect(ftw_inject_armed, 0) && ftw_inject_hit(point);
}

static inline int ftw_inject_nomem(void)
{
    return ftw_inject_fails(FTW_INJECT_NOMEM);
}

/* FTW_INJECT_PULLED: this process is about to pull a chunk from world
 * rank peer (pid): if the spec names peer at pulled:N and this is the
 * N-th such chunk of the job seen here, signal peer.  One branch when
 * no spec names pulled. */
extern int ftw_inject_pulled_rank;
void ftw_inject_pulled_hit(int peer, int pid);

static inline void ftw_inject_pulled(int peer, int pid)
{
    if (__builtin_expect(ftw_inject_pulled_rank == peer, 0))
        ftw_inject_pulled_hit(peer, pid);
}

/* Parse FTW_INJECT for this world rank; a malformed value is an error
 * naming the problem. */
ftw_status_t ftw_inject_init(int world_rank);

#endif
