/* The failure detector: set-up, teardown and publication of failures. */
#define _GNU_SOURCE
#include "detect/detect_int.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/config.h"
#include "util/log.h"

_Atomic uint32_t ftw_fail_epoch;
_Atomic int ftw_noisy;
_Atomic uint32_t ftw_det_bells;
int ftw_idle_sleep;

ftw_det_t ftw_det = {
    .pub_lock = PTHREAD_MUTEX_INITIALIZER,
    .pred = -1,
    .rprobe = -1,
    .epfd = -1,
    .wakefd = -1,
    .earlyfd = -1,
    .sock = -1,
};

double ftw_det_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Make rank's failure visible to the application: log entry, failed
 * byte, then the epoch (release).  Once per rank, never after quiesce. */
void ftw_det_publish(int rank, const char *why)
{
    uint32_t n;

    pthread_mutex_lock(&ftw_det.pub_lock);
    if (ftw_det.quiesced ||
        atomic_load_explicit(&ftw_det.failed[rank], memory_order_relaxed)) {
        pthread_mutex_unlock(&ftw_det.pub_lock);
        return;
    }
    n = atomic_load_explicit(&ftw_fail_epoch, memory_order_relaxed);
    ftw_det.log[n] = rank;
    atomic_store_explicit(&ftw_det.failed[rank], 1, memory_order_relaxed);
    atomic_store_explicit(&ftw_fail_epoch, n + 1, memory_order_release);
    pthread_mutex_unlock(&ftw_det.pub_lock);
    if (ftw_idle_sleep)
        syscall(SYS_futex, &ftw_fail_epoch, FUTEX_WAKE_PRIVATE, INT_MAX,
                NULL, NULL, 0);
    ftw_info("rank %d failed (%s)", rank, why);
}

/* Mark rank failed and publish it; 0 if it was not live. */
static int det_mark_failed(int rank, const char *why)
{
    if (rank == ftw_det.rank || ftw_det.state[rank] != FTW_PEER_LIVE)
        return 0;
    /* Other threads read it (robust.c's sentinel, the finalize). */
    __atomic_store_n(&ftw_det.state[rank], FTW_PEER_FAILED, __ATOMIC_RELEASE);
    /* Only a pidfd or a robust futex, on this host, proves an exit. */
    ftw_det.suspect[rank] =
        ftw_det.mode == FTW_DETECT_HEARTBEAT ||
        ftw_det.peers[rank].host != ftw_det.peers[ftw_det.rank].host;
    ftw_det_side_update();
    ftw_det_publish(rank, why);
    ftw_det_pidfd_drop(rank);
    return 1;
}

/* The detector found, first hand, that rank failed (heartbeat timeout,
 * host probe, pidfd, robust futex): the first time, publish it, stop
 * watching it, and (with heartbeats) start its notice down the tree. */
void ftw_det_declare(int rank, const char *why)
{
    if (!det_mark_failed(rank, why))
        return;
    if (ftw_det.sock >= 0 && ftw_det.use_hb) {
        double now = ftw_det_now();

        ftw_det_notice_start(rank);
        ftw_det_hb_ring_update(now);
        ftw_det_notice_check(now);
    }
}

/* A notice said rank failed (heartbeat.c has passed it on already). */
void ftw_det_declare_heard(int rank, const char *why)
{
    if (!det_mark_failed(rank, why))
        return;
    if (ftw_det.sock >= 0 && ftw_det.use_hb) {
        double now = ftw_det_now();

        ftw_det_hb_ring_update(now);
        ftw_det_notice_check(now);
    }
}

/* rank said goodbye (its MPI_Finalize began): its exit is no failure. */
void ftw_det_depart(int rank)
{
    if (rank == ftw_det.rank || ftw_det.state[rank] != FTW_PEER_LIVE)
        return;
    ftw_debug("rank %d is finalizing; no longer watched", rank);
    __atomic_store_n(&ftw_det.state[rank], FTW_PEER_DEPARTED,
                     __ATOMIC_RELEASE);
    ftw_det_side_update();
    ftw_det_pidfd_drop(rank);
    if (ftw_det.use_hb) {
        ftw_det_hb_ring_update(ftw_det_now());
        ftw_det_notice_check(ftw_det_now());
    }
}

ftw_status_t ftw_det_epoll_add(int fd, int kind, int rank)
{
    struct epoll_event ev = {
        .events = EPOLLIN,
        .data.u64 = ((uint64_t)kind << 32) | (uint32_t)rank,
    };

    if (epoll_ctl(ftw_det.epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        ftw_error("epoll_ctl(ADD, fd %d): %m", fd);
        return FTW_ST_IO_ERROR;
    }
    return FTW_OK;
}

static void det_free_private(void)
{
    free(ftw_det.state);
    free(ftw_det.pidfds);
    free(ftw_det.heard);
    free(ftw_det.suspect);
    free(ftw_det.probe_at);
    free(ftw_det.dest);
    free(ftw_det.relayed);
    free(ftw_det.notices);
    free((void *)ftw_det.early);
    ftw_det.early = NULL;
    ftw_det.state = NULL;
    ftw_det.pidfds = NULL;
    ftw_det.heard = NULL;
    ftw_det.suspect = NULL;
    ftw_det.probe_at = NULL;
    ftw_det.dest = NULL;
    ftw_det.relayed = NULL;
    ftw_det.notices = NULL;
    ftw_det.nnotices = ftw_det.notices_cap = 0;
}

/* A failed det_alloc: nothing of the detector is left. */
static void det_free_all(void)
{
    det_free_private();
    free(ftw_det.peers);
    free((void *)ftw_det.failed);
    free(ftw_det.log);
    ftw_det.peers = NULL;
    ftw_det.failed = NULL;
    ftw_det.log = NULL;
}

/* The world-size arrays.  failed, log and peers stay allocated after
 * fini: the application may still ask about failures then. */
static ftw_status_t det_alloc(int size)
{
    ftw_det.peers = calloc((size_t)size, sizeof(*ftw_det.peers));
    ftw_det.failed = calloc((size_t)size + FTW_DET_FOREIGN_MAX,
                            sizeof(*ftw_det.failed));
    ftw_det.log = calloc((size_t)size + FTW_DET_FOREIGN_MAX,
                         sizeof(*ftw_det.log));
    ftw_det.state = calloc((size_t)size, sizeof(*ftw_det.state));
    ftw_det.pidfds = malloc((size_t)size * sizeof(*ftw_det.pidfds));
    ftw_det.heard = calloc((size_t)size, sizeof(*ftw_det.heard));
    ftw_det.suspect = calloc((size_t)size, sizeof(*ftw_det.suspect));
    ftw_det.probe_at = calloc((size_t)size, sizeof(*ftw_det.probe_at));
    ftw_det.dest = calloc((size_t)size, sizeof(*ftw_det.dest));
    ftw_det.relayed = calloc((size_t)size, sizeof(*ftw_det.relayed));
    ftw_det.early = calloc((size_t)size, sizeof(*ftw_det.early));
    if (!ftw_det.peers || !ftw_det.failed || !ftw_det.log ||
        !ftw_det.state || !ftw_det.pidfds || !ftw_det.heard ||
        !ftw_det.suspect || !ftw_det.probe_at ||
        !ftw_det.dest || !ftw_det.relayed || !ftw_det.early) {
        ftw_error("out of memory for %d ranks", size);
        det_free_all();
        return FTW_ST_NO_MEMORY;
    }
    for (int r = 0; r < size; r++)
        ftw_det.pidfds[r] = -1;
    return FTW_OK;
}

/* Fill this process's entry: pid, host, heartbeat port, cookie (rank 0).
 * A failure is reported, but the caller still takes part in the exchange
 * so that the other ranks do not hang in it. */
static ftw_status_t det_prepare(ftw_det_peer_t *mine)
{
    ftw_status_t status = FTW_OK;
    uint16_t port = 0;

    memset(mine, 0, sizeof(*mine));
    mine->pid = (int32_t)getpid();
    mine->memfd = -1;
    if (ftw_det.mode == FTW_DETECT_OFF)
        return FTW_OK;
    if (ftw_det.mode != FTW_DETECT_HEARTBEAT)
        ftw_det_robust_create(&mine->memfd);
    mine->host = ftw_det_host_id();
    mine->addr = ftw_det_host_addr();
    status = ftw_det_sock_open(&port);
    mine->port = port;
    if (ftw_det.rank == 0 &&
        getrandom(&mine->cookie, sizeof(mine->cookie), 0) !=
            (ssize_t)sizeof(mine->cookie)) {
        ftw_error("getrandom: %m");
        status = FTW_ST_IO_ERROR;
    }
    return status;
}

/* Whether any peer runs on another host. */
static int det_multi_host(void)
{
    for (int r = 0; r < ftw_det.size; r++)
        if (ftw_det.peers[r].host != ftw_det.peers[ftw_det.rank].host)
            return 1;
    return 0;
}

/* Pause a waiting thread for at most FTW_IDLE_PAUSE_NS, or until a
 * failure is published (ftw_det_publish wakes it). */
#define FTW_IDLE_PAUSE_NS 50000

void ftw_detect_pause(void)
{
    uint32_t e = atomic_load_explicit(&ftw_fail_epoch, memory_order_acquire);
    struct timespec ts = { .tv_sec = 0, .tv_nsec = FTW_IDLE_PAUSE_NS };

    syscall(SYS_futex, &ftw_fail_epoch, FUTEX_WAIT_PRIVATE, e, &ts, NULL, 0);
}

/* FTW_IDLE=auto sleeps when this host runs more ranks than it has CPUs:
 * a spinning waiter there takes the CPU from the rank it waits for, and
 * from a killed rank whose exit (what the detector sees) must run. */
static void det_choose_idle(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int local = 0;

    for (int r = 0; r < ftw_det.size; r++)
        local += ftw_det.peers[r].host == ftw_det.peers[ftw_det.rank].host;
    ftw_idle_sleep = ftw_cfg.idle == FTW_IDLE_SLEEP ||
                     (ftw_cfg.idle == FTW_IDLE_AUTO && cpus > 0 &&
                      local > cpus);
    ftw_debug("waiting calls %s (%d ranks on this host, %ld CPUs)",
              ftw_idle_sleep ? "sleep" : "spin", local, cpus);
}

/* Choose the mechanisms from FTW_DETECT and where the peers run; every
 * rank reaches the same heartbeat decision from the same exchange. */
static void det_choose(void)
{
    int multi = det_multi_host();

    ftw_det.use_hb = ftw_det.mode == FTW_DETECT_HEARTBEAT ||
                     (ftw_det.mode == FTW_DETECT_AUTO && multi);
    if (ftw_det.mode == FTW_DETECT_PIDFD && multi && ftw_det.rank == 0)
        ftw_warn("FTW_DETECT=pidfd but ranks run on several hosts: "
                 "ranks on other hosts are not watched");
    if (ftw_det.use_hb && !(ftw_cfg.hb_timeout > ftw_cfg.hb_period &&
                            ftw_cfg.hb_period > 0)) {
        ftw_warn("FTW_HB_TIMEOUT (%g) must exceed FTW_HB_PERIOD (%g) > 0; "
                 "using 0.1 and 1.0", ftw_cfg.hb_timeout, ftw_cfg.hb_period);
        ftw_cfg.hb_period = 0.1;
        ftw_cfg.hb_timeout = 1.0;
    }
    ftw_debug("detector: pidfd for this host, heartbeats %s",
              ftw_det.use_hb ? "on" : "off");
}

static ftw_status_t det_open_fds(void)
{
    ftw_det.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (ftw_det.epfd < 0) {
        ftw_error("epoll_create1: %m");
        return FTW_ST_IO_ERROR;
    }
    ftw_det.wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ftw_det.wakefd < 0) {
        ftw_error("eventfd: %m");
        return FTW_ST_IO_ERROR;
    }
    if (ftw_det_epoll_add(ftw_det.wakefd, FTW_EV_WAKE, 0) != FTW_OK)
        return FTW_ST_IO_ERROR;
    ftw_det.earlyfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ftw_det.earlyfd < 0) {
        ftw_error("eventfd: %m");
        return FTW_ST_IO_ERROR;
    }
    if (ftw_det_epoll_add(ftw_det.earlyfd, FTW_EV_EARLY, 0) != FTW_OK)
        return FTW_ST_IO_ERROR;
    return ftw_det_epoll_add(ftw_det.sock, FTW_EV_SOCK, 0);
}

static void det_close_fds(void)
{
    if (ftw_det.epfd >= 0)
        ftw_det_foreign_close();
    for (int r = 0; ftw_det.pidfds && r < ftw_det.size; r++)
        ftw_det_pidfd_drop(r);
    if (ftw_det.sock >= 0)
        close(ftw_det.sock);
    if (ftw_det.wakefd >= 0)
        close(ftw_det.wakefd);
    if (ftw_det.earlyfd >= 0)
        close(ftw_det.earlyfd);
    if (ftw_det.epfd >= 0)
        close(ftw_det.epfd);
    ftw_det.sock = ftw_det.wakefd = ftw_det.earlyfd = ftw_det.epfd = -1;
    ftw_det_robust_release();
}

/* Everything after the exchange: fds, pidfds, SIGUSR1, the thread. */
static ftw_status_t det_start(void)
{
    ftw_status_t status;

    det_choose();
    det_choose_idle();
    ftw_det_sock_dests();
    status = det_open_fds();
    if (status != FTW_OK)
        goto err_close_fds;
    status = ftw_det_pidfd_open_all();
    if (status != FTW_OK)
        goto err_close_fds;
    status = ftw_det_robust_start();
    if (status != FTW_OK)
        goto err_close_fds;
    status = ftw_det_hint_install();
    if (status != FTW_OK)
        goto err_stop_robust;
    status = ftw_det_thread_start();
    if (status != FTW_OK)
        goto err_restore_hint;
    return FTW_OK;

err_restore_hint:
    ftw_det_hint_restore();
err_stop_robust:
    ftw_det_robust_stop();
err_close_fds:
    det_close_fds();
    return status;
}

ftw_status_t ftw_detect_init(void)
{
    ftw_det_peer_t mine;
    ftw_status_t status, local;

    PMPI_Comm_size(MPI_COMM_WORLD, &ftw_det.size);
    PMPI_Comm_rank(MPI_COMM_WORLD, &ftw_det.rank);
    ftw_det.mode = ftw_cfg.detect;
    /* Out of memory for a few bytes per rank: the peers may hang in the
     * exchange, but this process cannot go on in any case. */
    status = det_alloc(ftw_det.size);
    if (status != FTW_OK)
        return status;
    local = det_prepare(&mine);
    status = ftw_det_exchange(&mine);
    if (status == FTW_OK)
        status = local;
    if (status != FTW_OK)
        goto err_close_fds;
    if (ftw_det.mode == FTW_DETECT_OFF) {
        det_free_private();
        return FTW_OK;
    }
    ftw_det.cookie = ftw_det.peers[0].cookie;
    return det_start();

err_close_fds:
    det_close_fds();
    return status;
}

void ftw_detect_quiesce(void)
{
    int was;

    pthread_mutex_lock(&ftw_det.pub_lock);
    was = ftw_det.quiesced;
    ftw_det.quiesced = 1;
    pthread_mutex_unlock(&ftw_det.pub_lock);
    if (!was && ftw_det.sock >= 0)
        ftw_det_bye_send();
}

void ftw_detect_fini(void)
{
    if (ftw_det.mode == FTW_DETECT_OFF || !ftw_det.state)
        return;
    ftw_detect_quiesce();
    ftw_det_hint_restore();
    ftw_det_robust_stop();
    ftw_det_thread_stop();
    det_close_fds();
    det_free_private();
}

int ftw_detect_is_failed(int world_rank)
{
    if (world_rank < 0 || world_rank >= ftw_det.size + FTW_DET_FOREIGN_MAX ||
        !ftw_det.failed)
        return 0;
    return atomic_load_explicit(&ftw_det.failed[world_rank],
                                memory_order_relaxed);
}

int ftw_detect_failure(uint32_t i)
{
    return ftw_det.log[i];
}

int ftw_detect_world_size(void)
{
    return ftw_det.size;
}

uint64_t ftw_detect_host(void)
{
    return ftw_det.peers ? ftw_det.peers[ftw_det.rank].host : 0;
}

uint64_t ftw_detect_cookie(void)
{
    return ftw_det.cookie;
}

int ftw_detect_pid(int world_rank)
{
    if (world_rank < 0 || world_rank >= ftw_det.size || !ftw_det.peers)
        return -1;
    return ftw_det.peers[world_rank].pid;
}

int ftw_detect_local_pid(int world_rank)
{
    if (world_rank < 0 || world_rank >= ftw_det.size || !ftw_det.peers ||
        ftw_det.peers[world_rank].host != ftw_det.peers[ftw_det.rank].host)
        return -1;
    return ftw_det.peers[world_rank].pid;
}

int ftw_detect_local_rank_of(int pid)
{
    if (!ftw_det.peers || pid <= 0)
        return -1;
    for (int r = 0; r < ftw_det.size; r++)
        if (ftw_det.peers[r].pid == pid &&
            ftw_det.peers[r].host == ftw_det.peers[ftw_det.rank].host)
            return r == ftw_det.rank ? -1 : r;
    return -1;
}

void ftw_detect_gone(int world_rank, const char *why)
{
    if (world_rank >= 0 && world_rank < ftw_det.size && ftw_det.peers)
        ftw_det_publish(world_rank, why);
}
