/*
 * Transports of the rendezvous: how a receiver reads a sender's memory.
 * One ops table per transport (cma.c, shm.c, native.c), filled with
 * designated initializers; an entry a transport cannot do points to a
 * stub that returns FTW_ST_UNSUPPORTED.  native moves nothing itself: a
 * message whose peer only native reaches goes through the MPI unchanged.
 * cma reads the sender's memory directly; shm needs the sender to expose
 * the range and to serve the receiver's requests from its progress
 * (ftw_xport_progress).
 *
 * The table of peers (pid, host, probe address) is gathered once at
 * MPI_Init; a transport is probed for a peer the first time a message
 * goes to it, with a real, data-checked read.
 */
#ifndef FTW_XPORT_XPORT_H
#define FTW_XPORT_XPORT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

typedef enum {
    FTW_XPORT_ID_NATIVE = 0,
    FTW_XPORT_ID_CMA = 1,
    FTW_XPORT_ID_SHM = 2,
    FTW_XPORT_ID_VERBS = 3,
    FTW_XPORT_ID_COUNT
} ftw_xport_id_t;

/* What a transport needs to know of a peer (one per world rank). */
typedef struct {
    int32_t pid;
    int32_t pad;
    uint64_t host;          /* host id: same value, same host */
    uint64_t probe_addr;    /* address of the peer's probe word */
} ftw_xport_peer_t;

/* The sender of a message, as its RTS describes it to the receiver. */
typedef struct {
    int32_t world;          /* its world rank */
    int32_t pid;
    int32_t key;            /* what expose gave it (shm: its segment fd) */
} ftw_xport_src_t;

typedef struct ftw_xport_ops {
    const char *name;
    /* FTW_OK if this transport can move data from world rank peer to
     * this process (probed with a real read; called once per peer). */
    ftw_status_t (*reach)(int peer, const ftw_xport_peer_t *p);
    /* Receiver: read len bytes at addr in the sender src into local.  A
     * dead sender gives FTW_ST_PEER_FAILED; FTW_ST_UNSUPPORTED means
     * nothing was read and another transport may try. */
    ftw_status_t (*pull)(const ftw_xport_src_t *src, uint64_t addr,
                         void *local, size_t len);
    /* Sender: let world rank peer pull [addr, addr + len) until
     * release(owner); *key_p goes into the RTS. */
    ftw_status_t (*expose)(int peer, uint64_t addr, size_t len,
                           const void *owner, int32_t *key_p);
    /* Sender: the ranges exposed with owner are no longer readable (the
     * send ended, whatever way); a no-op for an unknown owner. */
    void (*release)(const void *owner);

    /* Sender: what every wait loop does for receivers (shm serves its
     * pipeline); NULL if the transport needs nothing of the sender. */
    void (*progress)(void);

    /* Nonzero while the transport holds ranges exposed: progress and
     * release run only then.  NULL: it exposes nothing to release. */
    const _Atomic int *exposed;

    /* Receiver: pull moves a whole message in one call and checks the
     * sender itself (shm's pipeline); else the rendezvous pulls chunk by
     * chunk and checks the sender between chunks. */
    int pulls_whole;

    /* The transport that pulls instead when pull answers
     * FTW_ST_UNSUPPORTED (nothing read). */
    int fallback;
} ftw_xport_ops_t;

/* release for a transport that exposes nothing to release. */
void ftw_xport_release_none(const void *owner);

extern const ftw_xport_ops_t ftw_xport_native_ops;
extern const ftw_xport_ops_t ftw_xport_cma_ops;
extern const ftw_xport_ops_t ftw_xport_shm_ops;

/* Ranges the shm transport exposes now (relaxed reads). */
extern _Atomic int ftw_xport_shm_exposed;

/* Sender side of shm: answer the receivers' waiting requests, staying a
 * little while they keep coming. */
void ftw_xport_shm_serve(void);
void ftw_xport_shm_fini(void);

/* The bytes of a message the sender's push slots take whole (0: none). */
uint64_t ftw_xport_shm_push_bytes(void);

/* Ranges all transports expose now: the sum of their exposed words. */
extern _Atomic int ftw_xport_exposing;

/* A transport exposes delta more ranges (less, if negative): its own
 * word and the sum. */
static inline void ftw_xport_exposed_add(_Atomic int *own, int delta)
{
    atomic_fetch_add_explicit(own, delta, memory_order_relaxed);
    atomic_fetch_add_explicit(&ftw_xport_exposing, delta,
                              memory_order_relaxed);
}

void ftw_xport_progress_slow(void);

/* Progress of the transports, from every wait loop: each transport's
 * progress op while it exposes anything.  One relaxed load otherwise. */
static inline void ftw_xport_progress(void)
{
    if (__builtin_expect(atomic_load_explicit(&ftw_xport_exposing,
                                              memory_order_relaxed) != 0, 0))
        ftw_xport_progress_slow();
}

/* A send ended, whatever way: every transport that exposes anything
 * releases what it exposed for owner. */
void ftw_xport_release(const void *owner);

extern const ftw_xport_ops_t ftw_xport_verbs_ops;

/* What verbs holds for sends in flight (a window, a pinned registration),
 * plus one while verbs is up (its progress answers reconnections): while
 * nonzero, a send's end is told to verbs as well. */
extern _Atomic int ftw_xport_verbs_held;

/* The verbs transport's device, QPs and memory (xport/verbs.c).  Init is
 * collective over MPI_COMM_WORLD: every process calls it or none.  A
 * process without a usable device still takes part and reaches nobody. */
ftw_status_t ftw_xport_verbs_init(const ftw_xport_peer_t *peers, int npeers,
                                  int self);
void ftw_xport_verbs_fini(void);
/* Nonzero if verbs is up here but its memory (ODP refused, no pinning
 * allowed) sends its messages through the MPI. */
int ftw_xport_verbs_native(void);

/* FTW_Verbs_reread: READ again (at most 4 KiB of) the last message this
 * process pulled from world rank peer, with the key its RTS gave;
 * *refused_p: 1 if the READ failed (the QP then reconnects), 0 if it
 * read.  FTW_ST_INVALID_PARAM: nothing pulled from peer over verbs. */
ftw_status_t ftw_xport_verbs_reread(int peer, int *refused_p);

/* The word a peer's probe read must find: derived from the pid. */
static inline uint64_t ftw_xport_probe_value(int32_t pid)
{
    return 0x6674777270726f62ull ^ ((uint64_t)(uint32_t)pid << 17);
}

/* Collective over MPI_COMM_WORLD (in MPI_Init): gather every process's
 * pid, host and probe address. */
ftw_status_t ftw_xport_init(void);
void ftw_xport_fini(void);

/* The transport for messages from this process's view to and from world
 * rank peer (probed on first use, then cached). */
ftw_xport_id_t ftw_xport_for(int peer);

/* The transport for a rendezvous send of size bytes to world rank peer:
 * what FTW_XPORT asks for, or with auto the faster one for that send
 * (blocking: its sender waits for it alone; again: the same bytes as
 * the thread's previous send, or a persistent send's next round;
 * both_ways: this process has rendezvous receives pending as well, so
 * it copies in as many messages as it sends). */
ftw_xport_id_t ftw_xport_for_send(int peer, uint64_t size, int blocking,
                                  int again, int both_ways);

/* The ops table of a transport id; native for an unknown id. */
const ftw_xport_ops_t *ftw_xport_ops(int id);

/* This process's pid (cached). */
int ftw_xport_self_pid(void);

#endif
