/*
 * Transports of the rendezvous: how a receiver reads a sender's memory.
 * One ops table per transport (cma.c, native.c), filled with designated
 * initializers; an entry a transport cannot do points to a stub that
 * returns FTW_ST_UNSUPPORTED.  native moves nothing itself: a message
 * whose peer only native reaches goes through the MPI unchanged.
 *
 * The table of peers (pid, host, probe address) is gathered once at
 * MPI_Init; a transport is probed for a peer the first time a message
 * goes to it, with a real, data-checked read.
 */
#ifndef FTW_XPORT_XPORT_H
#define FTW_XPORT_XPORT_H

#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

typedef enum {
    FTW_XPORT_ID_NATIVE = 0,
    FTW_XPORT_ID_CMA = 1,
    FTW_XPORT_ID_VERBS = 2,
    FTW_XPORT_ID_COUNT
} ftw_xport_id_t;

/* What a transport needs to know of a peer (one per world rank). */
typedef struct {
    int32_t pid;
    int32_t pad;
    uint64_t host;          /* host id: same value, same host */
    uint64_t probe_addr;    /* address of the peer's probe word */
} ftw_xport_peer_t;

typedef struct ftw_xport_ops {
    const char *name;
    /* FTW_OK if this transport can move data from world rank peer to
     * this process (probed with a real read; called once per peer). */
    ftw_status_t (*reach)(int peer, const ftw_xport_peer_t *p);
    /* Read len bytes at addr in process pid into local.  A dead process
     * gives FTW_ST_PEER_FAILED. */
    ftw_status_t (*pull)(int pid, uint64_t addr, void *local, size_t len);
    /* Sender side: make len bytes at addr readable by world rank peer.
     * *key_p goes into the RTS; *mem_p, unless NULL, is handed to
     * release once the receiver is done with the message. */
    ftw_status_t (*expose)(int peer, const void *addr, size_t len,
                           uint64_t *key_p, void **mem_p);
    void (*release)(void *mem);
    /* Receiver side of a keyed transport: read len bytes at addr (key
     * from the RTS) of world rank peer into local.  FTW_ST_UNSUPPORTED:
     * use pull instead. */
    ftw_status_t (*pull_key)(int peer, uint64_t addr, uint64_t key,
                             void *local, size_t len);
} ftw_xport_ops_t;

extern const ftw_xport_ops_t ftw_xport_native_ops;
extern const ftw_xport_ops_t ftw_xport_cma_ops;
extern const ftw_xport_ops_t ftw_xport_verbs_ops;

/* Stubs for transports without keys: expose gives key 0 and nothing to
 * release, pull_key says FTW_ST_UNSUPPORTED. */
ftw_status_t ftw_xport_expose_none(int peer, const void *addr, size_t len,
                                   uint64_t *key_p, void **mem_p);
void ftw_xport_release_none(void *mem);
ftw_status_t ftw_xport_pull_key_none(int peer, uint64_t addr, uint64_t key,
                                     void *local, size_t len);

/* The verbs transport's device, QPs and memory (xport/verbs.c).  Init is
 * collective over MPI_COMM_WORLD: every process calls it or none.  A
 * process without a usable device still takes part and reaches nobody. */
ftw_status_t ftw_xport_verbs_init(const ftw_xport_peer_t *peers, int npeers,
                                  int self);
void ftw_xport_verbs_fini(void);
/* Nonzero if verbs is up here but its memory (ODP refused, no pinning
 * allowed) sends its messages through the MPI. */
int ftw_xport_verbs_native(void);

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

/* The ops table of a transport id; native for an unknown id. */
const ftw_xport_ops_t *ftw_xport_ops(int id);

/* This process's pid (cached). */
int ftw_xport_self_pid(void);

#endif
