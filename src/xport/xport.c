/* The peer table and the choice of a transport per peer. */
#include "xport/xport.h"

#include <mpi.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "detect/detect.h"
#include "util/config.h"
#include "util/log.h"

static const ftw_xport_ops_t *const xport_table[FTW_XPORT_ID_COUNT] = {
    [FTW_XPORT_ID_NATIVE] = &ftw_xport_native_ops,
    [FTW_XPORT_ID_CMA] = &ftw_xport_cma_ops,
    [FTW_XPORT_ID_SHM] = &ftw_xport_shm_ops,
    [FTW_XPORT_ID_VERBS] = &ftw_xport_verbs_ops,
};

/* FTW_XPORT=auto: messages of at least this size go by shm, smaller ones
 * by cma.  scripts/bench/rndv --rounds 3 (pingpong --bw-only, 2 ranks
 * bound to the 2 cores of an otherwise idle build machine, best of 3
 * interleaved rounds, GB/s; "best" is the MPI's fastest configuration
 * here, see the script):
 *
 *              Open MPI 4.1.4                 MPICH 4.0.2
 *   size       native  best    cma    shm     native  best    cma    shm
 *   256 KiB    11.05  16.74   7.67  13.89     10.01  13.25  10.52  13.26
 *   1 MiB       8.61  12.97   6.03  13.79      8.09  11.75  10.42  14.18
 *   4 MiB       8.07  12.57   8.29  15.67      7.99  11.71   8.69  15.76
 *   16 MiB      7.89  12.48   8.19  17.21      8.24  11.85   8.67  17.18
 *   64 MiB      7.96  12.98   8.36  16.70      8.30  10.01   8.54  16.89
 *
 * shm, two copies overlapped, beats cma, one copy, from 256 KiB on both
 * MPIs; at 128 KiB too (the same bench, median of 3: Open MPI cma 8.2,
 * shm 9.7; MPICH 5.3 and 9.1 GB/s), the default threshold; below it
 * (a threshold set lower) the handshake per fragment weighs more and
 * cma, which needs nothing from the sender, is kept.  Sends of bytes
 * still in cache are the exception (SHM_HOT_MAX), and blocking ones
 * (SHM_BLOCKING_MIN). */
#define SHM_AUTO_MIN ((uint64_t)128 << 10)

/* Blocking sends from this size take the shm pipeline under auto.
 * Blocking ping-pong, 2 ranks bound to this host's 2 cores, median of 3
 * interleaved rounds, us, cma against shm: Open MPI 10.0/12.7 at
 * 128 KiB, 29.8/28.1 at 512 KiB, 52.0/41.2 at 768 KiB, 72.1/48.4 at
 * 1 MiB, 145/89 at 2 MiB, 334/166 at 4 MiB; MPICH 10.9/13.2,
 * 30.3/33.5, 52.6/39.9, 85.6/52.6, 154/110, 316/168. */
#define SHM_BLOCKING_MIN ((uint64_t)768 << 10)

/* Below this size a nonblocking send from the very bytes of this
 * thread's previous rendezvous send (a window from one buffer, a
 * nonblocking ping-pong), and every round of a persistent send (its
 * bytes are the last round's), takes cma under auto: both buffers are
 * in cache, where the receiver's one copy beats the pipeline's two.
 * Windows of 64 messages, 2 ranks bound to this host's 2 cores, GB/s,
 * cma against shm: from one buffer Open MPI 15.0/9.8 at 128 KiB,
 * 18.6/15.2 at 256 KiB, 21.6/20.7 at 512 KiB, MPICH 10.2/8.6,
 * 14.4/14.8, 13.6/17.7; a buffer per message Open MPI 8.2/9.7,
 * 6.0/14.1, MPICH 5.3/9.1, 3.9/13.9.  Persistent ping-pong, us, cma
 * against shm: Open MPI 11.1/15.3, 18.3/19.7, 39.9/30.5; MPICH
 * 12.6/13.5, 19.1/16.3, 40.3/28.2. */
#define SHM_HOT_MAX ((uint64_t)512 << 10)

_Atomic int ftw_xport_exposing;

static int xport_exposed(const ftw_xport_ops_t *x)
{
    return x->exposed != NULL &&
           atomic_load_explicit(x->exposed, memory_order_relaxed) != 0;
}

void ftw_xport_progress_slow(void)
{
    for (int id = 0; id < FTW_XPORT_ID_COUNT; id++) {
        const ftw_xport_ops_t *x = xport_table[id];

        if (x->progress != NULL && xport_exposed(x))
            x->progress();
    }
}

void ftw_xport_release(const void *owner)
{
    for (int id = 0; id < FTW_XPORT_ID_COUNT; id++) {
        const ftw_xport_ops_t *x = xport_table[id];

        if (xport_exposed(x))
            x->release(owner);
    }
}

void ftw_xport_release_none(const void *owner)
{
    (void)owner;
}

/* Read by peers' probes: it must live as long as the process.  Alone on
 * its page: verbs opens that whole page to remote reads. */
static volatile uint64_t probe_page[4096 / sizeof(uint64_t)]
    __attribute__((aligned(4096)));
#define probe_word (probe_page[0])

static ftw_xport_peer_t *peers;
static signed char *chosen;     /* [world size] ftw_xport_id_t, -1 unknown */
static signed char *shm_ok;     /* [world size] shm reaches it: 1, 0, -1 */
static int npeers, self_pid, self_world, verbs_up;
static uint64_t self_host;
/* A peer's first message probes its transports once, whichever threads
 * send to it at the same time; the choice is read without the lock. */
static pthread_mutex_t choose_lock = PTHREAD_MUTEX_INITIALIZER;

const ftw_xport_ops_t *ftw_xport_ops(int id)
{
    if (id < 0 || id >= FTW_XPORT_ID_COUNT)
        return &ftw_xport_native_ops;
    return xport_table[id];
}

int ftw_xport_self_pid(void)
{
    return self_pid;
}

/* This host's id: hostname and boot id hashed (FNV-1a). */
static uint64_t host_id(void)
{
    char name[256] = "";
    uint64_t h = 14695981039346656037ULL;

    gethostname(name, sizeof(name) - 1);
    for (const char *s = name; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h ? h : 1;
}

/* Verbs is wanted when told, or (auto) when some process runs on another
 * host: the same answer everywhere, as ftw_xport_verbs_init is collective.
 * Connections are made here, with one MPI_Allgather, not lazily: see
 * verbs.c. */
static ftw_status_t xport_verbs_start(void)
{
    int remote = 0;

    for (int i = 0; i < npeers; i++)
        remote |= peers[i].host != self_host;
    if (ftw_cfg.xport != FTW_XPORT_VERBS &&
        !(ftw_cfg.xport == FTW_XPORT_AUTO && remote))
        return FTW_OK;
    verbs_up = ftw_xport_verbs_init(peers, npeers, self_world) == FTW_OK;
    return FTW_OK;
}

/* The peer table and the per-peer choices. */
static void peers_free(void)
{
    free(peers);
    free(chosen);
    free(shm_ok);
    peers = NULL;
    chosen = NULL;
    shm_ok = NULL;
}

ftw_status_t ftw_xport_init(void)
{
    ftw_xport_peer_t mine = { 0 };

    PMPI_Comm_size(MPI_COMM_WORLD, &npeers);
    PMPI_Comm_rank(MPI_COMM_WORLD, &self_world);
    self_pid = (int)getpid();
    self_host = host_id();
    probe_word = ftw_xport_probe_value(self_pid);
    peers = calloc((size_t)npeers, sizeof(*peers));
    chosen = malloc((size_t)npeers);
    shm_ok = malloc((size_t)npeers);
    if (peers == NULL || chosen == NULL || shm_ok == NULL) {
        ftw_error("out of memory for %d peers", npeers);
        goto err_free;
    }
    for (int i = 0; i < npeers; i++)
        chosen[i] = shm_ok[i] = -1;
    mine.pid = self_pid;
    mine.host = self_host;
    mine.probe_addr = (uint64_t)(uintptr_t)&probe_word;
    if (PMPI_Allgather(&mine, (int)sizeof(mine), MPI_BYTE, peers,
                       (int)sizeof(mine), MPI_BYTE, MPI_COMM_WORLD) !=
        MPI_SUCCESS) {
        ftw_error("MPI_Allgather of the transport addresses failed");
        goto err_free;
    }
    return xport_verbs_start();

err_free:
    peers_free();
    return FTW_ST_MPI_ERROR;
}

void ftw_xport_fini(void)
{
    ftw_xport_shm_fini();
    if (verbs_up)
        ftw_xport_verbs_fini();
    verbs_up = 0;
    peers_free();
}

/* Verbs for a peer if wanted (told, or auto and another host) and a real
 * read works; a device whose memory cannot be used sends natively. */
static int xport_verbs_try(int peer, ftw_xport_id_t *id_p)
{
    if (!verbs_up || peer == self_world ||
        (ftw_cfg.xport != FTW_XPORT_VERBS && peers[peer].host == self_host))
        return 0;
    if (ftw_xport_verbs_native())
        *id_p = FTW_XPORT_ID_NATIVE;
    else if (ftw_xport_verbs_ops.reach(peer, &peers[peer]) == FTW_OK)
        *id_p = FTW_XPORT_ID_VERBS;
    else
        return 0;
    return 1;
}

/* The first choice a peer gets: verbs if wanted and working, else cma on
 * this host unless told native. */
static ftw_xport_id_t xport_choose(int peer)
{
    ftw_xport_id_t id;

    if (ftw_cfg.xport == FTW_XPORT_NATIVE)
        return FTW_XPORT_ID_NATIVE;
    if (xport_verbs_try(peer, &id))
        return id;
    if (peers[peer].host != self_host)
        return FTW_XPORT_ID_NATIVE;
    if (ftw_xport_cma_ops.reach(peer, &peers[peer]) != FTW_OK)
        return FTW_XPORT_ID_NATIVE;
    return FTW_XPORT_ID_CMA;
}

ftw_xport_id_t ftw_xport_for(int peer)
{
    signed char c;

    if (peers == NULL || peer < 0 || peer >= npeers)
        return FTW_XPORT_ID_NATIVE;
    c = __atomic_load_n(&chosen[peer], __ATOMIC_ACQUIRE);
    if (c < 0) {
        pthread_mutex_lock(&choose_lock);
        c = chosen[peer];
        if (c < 0) {
            c = (signed char)xport_choose(peer);
            __atomic_store_n(&chosen[peer], c, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&choose_lock);
    }
    return (ftw_xport_id_t)c;
}

/* Under auto with the shm pipeline, a send that takes cma although shm
 * reaches its peer: a blocking one below SHM_BLOCKING_MIN (one message
 * in flight, its sender only waits: the receiver reads it alone as fast
 * as the pipeline, whose speed hangs on both processes holding a core),
 * and the same bytes sent again below SHM_HOT_MAX; but none the push
 * slots take whole: its sender copies it in from its RTS on, and the
 * receiver copies out behind it, before it would have read one byte
 * with cma (blocking ping-pong on an idle host, 2026-12-05, us, cma
 * against shm with push slots, median of 5 interleaved rounds: Open MPI
 * 8.9/7.4 at 128 KiB, 14.0/13.0 at 256 KiB, 25.9/20.3 at 512 KiB; MPICH
 * 9.3/7.2, 14.3/11.9, 27.1/22.0; nonblocking and persistent ping-pong
 * alike).  A split pull takes the sender's help where it comes.  But
 * while this process also has rendezvous receives pending (both_ways:
 * osu_bibw's windows, a halo exchange), each process copies in as many
 * messages as it sends, and the pipeline's second copy costs a core that
 * has its own to make: cma for every message the push slots would take
 * (unmodified osu_bibw, Open MPI, 2026-12-06, GB/s, two runs: ftwrap's
 * shm 21.0-22.0 / 25.4-25.5 / 26.7-28.2 / 29.3-30.2 at 128 KiB / 256 KiB
 * / 512 KiB / 1 MiB, cma 26.6-29.2 / 38.4-40.0 / 37.9-42.7 / 30.0-38.6,
 * the MPI's own 26.7-27.2 / 33.7-40.4 / 42.4-46.4 / 31.5-35.9; from 2 MiB
 * the two were within 10 %, and from 16 MiB the pipeline's streamed
 * copy-out won, 24.5-25.4 against 17.4-18.6). */
static int auto_keeps_cma(uint64_t size, int blocking, int again,
                          int both_ways)
{
    if (ftw_cfg.xport != FTW_XPORT_AUTO ||
        ftw_cfg.shm_pull != FTW_SHM_PULL_PIPE)
        return 0;
    if (size <= ftw_xport_shm_push_bytes())
        return both_ways;
    return blocking ? size < SHM_BLOCKING_MIN
                    : again && size < SHM_HOT_MAX;
}

ftw_xport_id_t ftw_xport_for_send(int peer, uint64_t size, int blocking,
                                  int again, int both_ways)
{
    ftw_xport_id_t id = ftw_xport_for(peer);
    signed char ok;

    /* auto: shm needs the sender's copies, which stop while it sleeps
     * between polls (FTW_IDLE, a host with more ranks than CPUs): cma
     * then, as below SHM_AUTO_MIN. */
    if (id != FTW_XPORT_ID_CMA || ftw_cfg.xport == FTW_XPORT_CMA ||
        (ftw_cfg.xport == FTW_XPORT_AUTO &&
         (size < SHM_AUTO_MIN || ftw_idle_sleep)) ||
        auto_keeps_cma(size, blocking, again, both_ways))
        return id;
    ok = __atomic_load_n(&shm_ok[peer], __ATOMIC_ACQUIRE);
    if (ok < 0) {
        pthread_mutex_lock(&choose_lock);
        ok = shm_ok[peer];
        if (ok < 0) {
            ok = ftw_xport_shm_ops.reach(peer, &peers[peer]) == FTW_OK;
            __atomic_store_n(&shm_ok[peer], ok, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&choose_lock);
    }
    return ok ? FTW_XPORT_ID_SHM : id;
}
