/*
 * The detector's internal state, shared by the files of src/detect only.
 *
 *   detect.c     init, quiesce, fini, publication, the public accessors
 *   exchange.c   what each process tells the others at init (pid, host,
 *                heartbeat address, job cookie)
 *   pidfd.c      peers on this host: pidfd_open + epoll
 *   heartbeat.c  the UDP socket: heartbeats along a ring, failure notices,
 *                goodbyes
 *   robust.c     peers on this host, earlier: robust futexes + a sentinel
 *   hint.c       SIGUSR1 (a launcher's hint that a peer died) -> eventfd
 *   thread.c     the detector thread's loop
 *   inject.c     FTW_INJECT
 *   foreign.c    processes of other jobs (spawn, accept, connect, join)
 *
 * Threading: the arrays below marked "thread" are touched by the detector
 * thread only once it runs (and by ftw_detect_init before it starts).
 * Published state (failed, log, ftw_fail_epoch) is written under pub_lock.
 */
#ifndef FTW_DETECT_DETECT_INT_H
#define FTW_DETECT_DETECT_INT_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "detect/detect.h"

/* What each process contributes to the exchange at init. */
typedef struct {
    uint64_t cookie;        /* the job cookie; rank 0's entry is the one used */
    uint64_t host;          /* hash of hostname and boot id */
    int32_t pid;
    uint32_t addr;          /* IPv4 address for other hosts, network order */
    uint16_t port;          /* heartbeat UDP port, network order; 0: none */
    uint16_t pad;
    int32_t memfd;          /* exit futex page (robust.c), or -1 */
} ftw_det_peer_t;

/* What the detector thread knows of a peer (thread). */
typedef enum {
    FTW_PEER_LIVE = 0,
    FTW_PEER_FAILED,        /* declared or learned failed */
    FTW_PEER_DEPARTED,      /* said goodbye after its MPI_Finalize began */
} ftw_peer_state_t;

/* epoll tags: kind in the high 32 bits of data.u64, rank in the low. */
enum {
    FTW_EV_WAKE = 1,
    FTW_EV_SOCK = 2,
    FTW_EV_PIDFD = 3,
    FTW_EV_EARLY = 4,
    FTW_EV_FOREIGN = 5,     /* a process of another job (foreign.c) */
};

/* Processes of other jobs watched at most (ids ftw_det.size + 0..max-1). */
#define FTW_DET_FOREIGN_MAX 1024

typedef struct {
    int size;
    int rank;
    int mode;                       /* ftw_detect_mode_t */
    int use_hb;                     /* heartbeat ring over every rank */
    uint64_t cookie;
    ftw_det_peer_t *peers;          /* [size], read-only after init */

    /* Published. */
    _Atomic uint8_t *failed;        /* [size + FTW_DET_FOREIGN_MAX] */
    int *log;                       /* [size + FTW_DET_FOREIGN_MAX] */
    pthread_mutex_t pub_lock;
    int quiesced;                   /* under pub_lock */

    /* Thread. */
    uint8_t *state;                 /* [size] ftw_peer_state_t */
    int *pidfds;                    /* [size], -1 when not watched */
    double *heard;                  /* [size] last datagram, monotonic s */
    uint8_t *suspect;               /* [size] declared failed with no proof
                                     * of its exit (heartbeats, notices):
                                     * it may live on across a partition */
    int side;                       /* lowest rank held live, this one
                                     * included: the side of a partition */
    int suspect_next;               /* round-robin cursor of the pings */
    double *probe_at;               /* [size] when a host probe was sent,
                                     * 0: none pending */
    int probes;                     /* pending host probes */
    struct sockaddr_in *dest;       /* [size] where to send to each rank */
    uint8_t *relayed;               /* [size] this process passed the
                                     * notice of that rank's failure down
                                     * its subtree (heartbeat.c) */
    struct ftw_det_notice *notices; /* sent down the tree, unacknowledged */
    int nnotices, notices_cap;
    int pred;                       /* ring predecessor watched, or -1 */
    int rprobe;                     /* a new predecessor pinged because
                                     * the old one failed, or -1 */
    double rprobe_at;               /* when it was pinged */
    double next_hb;                 /* when to send the next heartbeat */

    int epfd;
    int wakefd;                     /* eventfd: SIGUSR1 hints, stop */
    int earlyfd;                    /* eventfd: the robust sentinel */
    _Atomic uint8_t *early;         /* [size] set by the sentinel */
    int sock;                       /* UDP, -1 if none */
    _Atomic int stop;
    int thread_started;
    pthread_t thread;
} ftw_det_t;

extern ftw_det_t ftw_det;

/* detect.c */
double ftw_det_now(void);
void ftw_det_publish(int rank, const char *why);
void ftw_det_declare(int rank, const char *why);
void ftw_det_declare_heard(int rank, const char *why);
void ftw_det_depart(int rank);
ftw_status_t ftw_det_epoll_add(int fd, int kind, int rank);

/* exchange.c */
ftw_status_t ftw_det_exchange(const ftw_det_peer_t *mine);
uint64_t ftw_det_host_id(void);
uint32_t ftw_det_host_addr(void);

/* pidfd.c */
ftw_status_t ftw_det_pidfd_open_all(void);
void ftw_det_pidfd_event(int rank);
void ftw_det_pidfd_recheck(void);
void ftw_det_pidfd_drop(int rank);

/* foreign.c */
void ftw_det_foreign_event(int id);
void ftw_det_foreign_close(void);

/* heartbeat.c */
ftw_status_t ftw_det_sock_open(uint16_t *port_p);
void ftw_det_sock_dests(void);
void ftw_det_sock_drain(void);
void ftw_det_hb_send(void);
void ftw_det_hb_check(double now);
void ftw_det_hb_reset_pred(double now);
void ftw_det_hb_ring_update(double now);
void ftw_det_notice_start(int failed_rank);
void ftw_det_notice_relay(int failed_rank);
void ftw_det_notice_check(double now);
void ftw_det_bye_send(void);
void ftw_det_side_update(void);
double ftw_det_hb_deadline(void);

/* robust.c */
void ftw_det_robust_create(int32_t *fd_p);
void ftw_det_robust_arm(void);
void ftw_det_robust_disarm(void);
ftw_status_t ftw_det_robust_start(void);
void ftw_det_robust_stop(void);
void ftw_det_robust_release(void);
void ftw_det_early_event(void);

/* hint.c */
ftw_status_t ftw_det_hint_install(void);
void ftw_det_hint_restore(void);

/* thread.c */
ftw_status_t ftw_det_thread_start(void);
void ftw_det_thread_stop(void);

#endif
