/*
 * The detector's UDP socket.  Every datagram carries the job cookie; a
 * datagram without it (another job's, a stray one) is dropped.
 *
 *   HB    heartbeat, every hb_period, to the ring successor (next live
 *         rank, wrapping).  Each process watches its ring predecessor and
 *         declares it failed after hb_timeout of silence.
 *   FAIL  notice: "rank f failed", passed down a binomial tree over the
 *         ranks rooted at f: with v = (rank - f) mod n, f itself at 0,
 *         rank v's children are v + 2^k for 2^k below v's lowest set bit
 *         (every 2^k < n for the root).  Whoever learns f's failure first
 *         hand sends it for the root, to the root's children, and twice
 *         to f itself; every process, the first time it learns of f (first
 *         hand or from a notice, live or departed f alike), sends it to its
 *         own children.  A child held failed or departed is passed over:
 *         its children get it instead, and so on down.  Each notice is
 *         acknowledged (FACK) and sent again, at doubling intervals, until
 *         it is; a child that never answers, or is found failed meanwhile,
 *         is passed over the same way.  So a failure reaches every process
 *         in about log2(n) hops with n - 1 notices and as many
 *         acknowledgements when nothing is lost (at most 2 log2(n) + 2
 *         from any one process, and a few copies more per child lost or
 *         passed over), past lost datagrams and dead relays.
 *         A process named in a notice was declared failed while alive
 *         (stopped, starved, cut off) and exits with status 75.
 *         Suspects (declared failed without proof of their exit: on
 *         another host, or under FTW_DETECT=heartbeat) are told again, a
 *         few per heartbeat period, for as long as this process runs: a
 *         partitioned host hears it when its link heals.
 *
 * Every datagram carries the sender's side: the lowest rank it holds live,
 * itself included.  Datagrams from a process this one holds failed are
 * ignored, but for heartbeats (answered with a notice) and a notice naming
 * this process: across a healed partition both sides hold the other
 * failed, and the side of the lower lowest rank (the one holding rank 0,
 * if it lives) goes on; the other exits with status 75.
 *   BYE   sent by ftw_detect_quiesce: this process is finalizing; its
 *         exit is no failure.  Sent in every mode (pidfd peers use it too).
 *   BELL  "a revoke notice waits for you on a control communicator"
 *         (core/revoke.c); the notice itself travels through the MPI.
 *   PING  "answer with a heartbeat".  When a heartbeat timeout declares a
 *         rank on another host, every other live rank of that host is
 *         pinged and declared failed too unless a datagram from it comes
 *         within the probe grace (3 heartbeat periods, at least 0.2 s):
 *         a crashed host's ranks are found together, one timeout after
 *         the crash, not one timeout per rank along the ring.
 *         A process whose predecessor failed pings its new
 *         predecessor too, whose own watcher that was: silent for half a
 *         timeout (at least the probe grace), it is declared failed.  So
 *         k neighbours on the ring that fail together are found within
 *         one timeout and k - 1 half timeouts, not k timeouts.
 */
#define _GNU_SOURCE
#include "detect/detect_int.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/config.h"
#include "util/log.h"
#include "util/stats.h"

/* Exit status of a process that learns it was declared failed. */
#define FTW_DET_EXIT_DECLARED 75
#define FTW_DET_RCVBUF (1 << 20)
/* Suspects told again per heartbeat period. */
#define FTW_DET_SUSPECT_PINGS 4

enum { MSG_HB = 1, MSG_FAIL = 2, MSG_BYE = 3, MSG_ABORT = 4, MSG_BELL = 5,
       MSG_PING = 6, MSG_FACK = 7 };

/* A notice sent down the tree and not yet acknowledged. */
struct ftw_det_notice {
    int failed;             /* the rank it names */
    int to;                 /* the child it went to */
    int sends;              /* copies sent so far */
    double rto;             /* the wait before the next copy */
    double at;              /* when to send it again */
};

/* Copies of a notice to one child before it is passed over. */
#define FTW_DET_NOTICE_SENDS 6

typedef struct {
    uint64_t cookie;        /* big endian on the wire, as the ints */
    uint32_t type;
    int32_t sender;
    int32_t failed;         /* MSG_FAIL; MSG_ABORT: the exit status */
    int32_t side;           /* lowest rank the sender holds live */
} ftw_det_msg_t;

/* Bound to every address on an ephemeral port: peers on this host send to
 * 127.0.0.1, the others to the exchanged host address. */
ftw_status_t ftw_det_sock_open(uint16_t *port_p)
{
    struct sockaddr_in sin = { .sin_family = AF_INET };
    socklen_t len = sizeof(sin);
    int fd, rcvbuf = FTW_DET_RCVBUF;

    fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ftw_error("socket(AF_INET, SOCK_DGRAM): %m");
        return FTW_ST_IO_ERROR;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) < 0)
        ftw_debug("setsockopt(SO_RCVBUF): %m");
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
        getsockname(fd, (struct sockaddr *)&sin, &len) < 0) {
        ftw_error("bind/getsockname of the heartbeat socket: %m");
        close(fd);
        return FTW_ST_IO_ERROR;
    }
    ftw_det.sock = fd;
    *port_p = sin.sin_port;
    return FTW_OK;
}

/* Where to send to each rank, from the exchange. */
void ftw_det_sock_dests(void)
{
    const ftw_det_peer_t *me = &ftw_det.peers[ftw_det.rank];

    for (int r = 0; r < ftw_det.size; r++) {
        const ftw_det_peer_t *p = &ftw_det.peers[r];
        struct sockaddr_in *d = &ftw_det.dest[r];

        d->sin_family = AF_INET;
        d->sin_port = p->port;
        d->sin_addr.s_addr = p->host == me->host ? htonl(INADDR_LOOPBACK)
                                                 : p->addr;
    }
}

/* The lowest rank this process holds live, itself included; after each
 * change of a peer's state. */
void ftw_det_side_update(void)
{
    int r = 0;

    while (r < ftw_det.rank && ftw_det.state[r] != FTW_PEER_LIVE)
        r++;
    __atomic_store_n(&ftw_det.side, r, __ATOMIC_RELAXED); /* finalize reads */
}

/* One datagram; quiet: no warning when it cannot leave (a suspect's host
 * may be gone). */
static int msg_send_to(int to, uint32_t type, int failed)
{
    ftw_det_msg_t m = {
        .cookie = htobe64(ftw_det.cookie),
        .type = htonl(type),
        .sender = (int32_t)htonl((uint32_t)ftw_det.rank),
        .failed = (int32_t)htonl((uint32_t)failed),
        .side = (int32_t)htonl((uint32_t)__atomic_load_n(&ftw_det.side,
                                                         __ATOMIC_RELAXED)),
    };

    if (to == ftw_det.rank || ftw_det.dest[to].sin_port == 0)
        return 0;
    return sendto(ftw_det.sock, &m, sizeof(m), MSG_DONTWAIT,
                  (struct sockaddr *)&ftw_det.dest[to],
                  sizeof(ftw_det.dest[to])) < 0 ? -errno : 0;
}

static void msg_send(int to, uint32_t type, int failed)
{
    int rc = msg_send_to(to, type, failed);

    if (rc < 0)
        ftw_warn_sparse("sendto rank %d: %s", to, strerror(-rc));
}

/* Tell a few suspects again that they were declared failed. */
static void suspects_ping(void)
{
    int n = ftw_det.size, sent = 0;

    for (int i = 0; i < n && sent < FTW_DET_SUSPECT_PINGS; i++) {
        int r = (ftw_det.suspect_next + i) % n;

        if (ftw_det.state[r] != FTW_PEER_FAILED || !ftw_det.suspect[r])
            continue;
        (void)msg_send_to(r, MSG_FAIL, r);
        ftw_stat_add(FTW_STAT_DET_FAIL_RETOLD, 1);
        ftw_det.suspect_next = (r + 1) % n;
        sent++;
    }
}

/* The next (dir = +1) or previous (dir = -1) live rank on the ring. */
static int ring_next(int dir)
{
    for (int i = 1; i < ftw_det.size; i++) {
        int r = (ftw_det.rank + dir * i + ftw_det.size) % ftw_det.size;

        if (ftw_det.state[r] == FTW_PEER_LIVE)
            return r;
    }
    return -1;
}

void ftw_det_hb_send(void)
{
    int succ;

    if (!ftw_det.use_hb)
        return;
    succ = ring_next(+1);
    if (succ >= 0)
        msg_send(succ, MSG_HB, 0);
    suspects_ping();
    ftw_det.next_hb = ftw_det_now() + ftw_cfg.hb_period;
}

static double probe_grace(void)
{
    double g = 3 * ftw_cfg.hb_period;

    return g < 0.2 ? 0.2 : g;
}

/* The wait for a new predecessor's answer to its ping. */
static double ring_probe_grace(void)
{
    double g = ftw_cfg.hb_timeout / 2;

    return g < probe_grace() ? probe_grace() : g;
}

/* After a ring change: a new predecessor gets a fresh, full timeout; if
 * the old one failed, nobody watched the new one meanwhile: it is pinged,
 * and must answer within the ring probe grace.  (One that left said
 * goodbye in its MPI_Finalize and watched until then.) */
void ftw_det_hb_ring_update(double now)
{
    int pred = ring_next(-1), old = ftw_det.pred;

    if (pred != old && pred >= 0) {
        ftw_det.heard[pred] = now;
        ftw_debug("now watching rank %d", pred);
        if (old >= 0 && ftw_det.state[old] == FTW_PEER_FAILED) {
            ftw_det.rprobe = pred;
            ftw_det.rprobe_at = now;
            msg_send(pred, MSG_PING, 0);
            msg_send(pred, MSG_PING, 0);
        }
    }
    ftw_det.pred = pred;
}

/* The new predecessor pinged: answered (any datagram), gone, or silent
 * past the grace. */
static void ring_probe_check(double now)
{
    int r = ftw_det.rprobe;

    if (r < 0)
        return;
    if (r != ftw_det.pred || ftw_det.state[r] != FTW_PEER_LIVE ||
        ftw_det.heard[r] > ftw_det.rprobe_at) {
        ftw_det.rprobe = -1;
        return;
    }
    if (now < ftw_det.rprobe_at + ring_probe_grace())
        return;
    ftw_det.rprobe = -1;
    ftw_det_declare(r, "silent when pinged as the new ring predecessor");
}

/* After this thread was stopped or starved: silence is our fault. */
void ftw_det_hb_reset_pred(double now)
{
    if (ftw_det.pred >= 0)
        ftw_det.heard[ftw_det.pred] = now;
    if (ftw_det.rprobe >= 0)
        ftw_det.rprobe_at = now;
}

/* rank, on another host, missed its heartbeats: ping the other live ranks
 * of its host. */
static void host_probe(int rank)
{
    uint64_t host = ftw_det.peers[rank].host;
    double now = ftw_det_now();    /* after the ring update's heard[] */

    if (host == ftw_det.peers[ftw_det.rank].host)
        return;
    for (int r = 0; r < ftw_det.size; r++) {
        if (r == ftw_det.rank || ftw_det.state[r] != FTW_PEER_LIVE ||
            ftw_det.peers[r].host != host || ftw_det.probe_at[r] > 0)
            continue;
        ftw_det.probe_at[r] = now;
        ftw_det.probes++;
        msg_send(r, MSG_PING, 0);
        msg_send(r, MSG_PING, 0);
    }
}

/* Pinged ranks that answered are cleared, silent ones past the grace
 * declared failed. */
static void host_probe_check(double now)
{
    for (int r = 0; r < ftw_det.size && ftw_det.probes > 0; r++) {
        double at = ftw_det.probe_at[r];

        if (at == 0)
            continue;
        if (ftw_det.heard[r] <= at && now < at + probe_grace() &&
            ftw_det.state[r] == FTW_PEER_LIVE)
            continue;
        ftw_det.probe_at[r] = 0;
        ftw_det.probes--;
        if (ftw_det.heard[r] <= at)
            ftw_det_declare(r, "silent after its host's heartbeat timeout");
    }
}

double ftw_det_hb_deadline(void)
{
    double d = ftw_det.next_hb;

    if (ftw_det.pred >= 0 &&
        ftw_det.heard[ftw_det.pred] + ftw_cfg.hb_timeout < d)
        d = ftw_det.heard[ftw_det.pred] + ftw_cfg.hb_timeout;
    for (int r = 0; r < ftw_det.size && ftw_det.probes > 0; r++)
        if (ftw_det.probe_at[r] > 0 &&
            ftw_det.probe_at[r] + probe_grace() < d)
            d = ftw_det.probe_at[r] + probe_grace();
    if (ftw_det.rprobe >= 0 && ftw_det.rprobe_at + ring_probe_grace() < d)
        d = ftw_det.rprobe_at + ring_probe_grace();
    for (int i = 0; i < ftw_det.nnotices; i++)
        if (ftw_det.notices[i].at < d)
            d = ftw_det.notices[i].at;
    return d;
}

void ftw_det_hb_check(double now)
{
    int pred = ftw_det.pred;

    if (now >= ftw_det.next_hb)
        ftw_det_hb_send();
    if (ftw_det.probes > 0)
        host_probe_check(now);
    if (ftw_det.nnotices > 0)
        ftw_det_notice_check(now);
    ring_probe_check(now);
    if (pred >= 0 && now - ftw_det.heard[pred] > ftw_cfg.hb_timeout) {
        ftw_det_declare(pred, "heartbeat timeout");
        host_probe(pred);
    }
}

/* ---- failure notices down the tree ------------------------------------ */

static int notice_vrank(int rank, int failed)
{
    return (rank - failed + ftw_det.size) % ftw_det.size;
}

/* The wait for a notice's first acknowledgement: a few periods, at most
 * half the timeout. */
static double notice_rto(void)
{
    double rto = 2 * ftw_cfg.hb_period;

    if (rto < 0.05)
        rto = 0.05;
    if (rto > ftw_cfg.hb_timeout / 2)
        rto = ftw_cfg.hb_timeout / 2;
    return rto;
}

static void notice_children(int failed, int v);

static void notice_pend(int failed, int to)
{
    struct ftw_det_notice *n;

    if (ftw_det.nnotices == ftw_det.notices_cap) {
        int cap = ftw_det.notices_cap ? 2 * ftw_det.notices_cap : 64;
        struct ftw_det_notice *p =
            realloc(ftw_det.notices, (size_t)cap * sizeof(*p));

        if (p == NULL) {
            /* Unacknowledged, then: the copy sent is all it gets. */
            ftw_warn_sparse("out of memory for pending notices");
            return;
        }
        ftw_det.notices = p;
        ftw_det.notices_cap = cap;
    }
    n = &ftw_det.notices[ftw_det.nnotices++];
    n->failed = failed;
    n->to = to;
    n->sends = 1;
    n->rto = notice_rto();
    n->at = ftw_det_now() + n->rto;
}

/* Give the notice of failed to tree position v: to its process if live,
 * else to its children.  This process has passed it down its own
 * subtree already. */
static void notice_give(int failed, int v)
{
    int r = (v + failed) % ftw_det.size;

    if (r == ftw_det.rank)
        return;
    if (ftw_det.state[r] != FTW_PEER_LIVE) {
        notice_children(failed, v);
        return;
    }
    msg_send(r, MSG_FAIL, failed);
    ftw_stat_add(FTW_STAT_DET_FAIL_SENT, 1);
    notice_pend(failed, r);
}

/* Tree position v's children, the largest subtree first. */
static void notice_children(int failed, int v)
{
    int n = ftw_det.size, span = v & -v;

    if (v == 0)
        for (span = 1; span < n; span <<= 1)
            ;
    for (int k = span >> 1; k >= 1; k >>= 1)
        if (v + k < n)
            notice_give(failed, v + k);
}

/* This process learned of failed's failure: pass the notice down its
 * subtree, once. */
void ftw_det_notice_relay(int failed)
{
    if (failed < 0 || failed >= ftw_det.size || ftw_det.relayed[failed])
        return;
    ftw_det.relayed[failed] = 1;
    notice_children(failed, notice_vrank(ftw_det.rank, failed));
}

/* This process found failed's failure first hand: its own subtree, the
 * root's children, and failed itself (twice: if it lives on, it must
 * hear that it was declared failed). */
void ftw_det_notice_start(int failed)
{
    ftw_det_notice_relay(failed);
    notice_children(failed, 0);
    for (int copy = 0; copy < 2; copy++) {
        msg_send(failed, MSG_FAIL, failed);
        ftw_stat_add(FTW_STAT_DET_FAIL_SENT, 1);
    }
}

/* An acknowledgement from rank. */
static void notice_acked(int rank, int failed)
{
    for (int i = 0; i < ftw_det.nnotices; i++)
        if (ftw_det.notices[i].to == rank &&
            ftw_det.notices[i].failed == failed) {
            ftw_det.notices[i] = ftw_det.notices[--ftw_det.nnotices];
            return;
        }
}

/* Send again the notices whose wait is over; pass over children that are
 * no longer live or never answered.  Passing over appends, but only
 * entries not yet due. */
void ftw_det_notice_check(double now)
{
    int i = 0;

    while (i < ftw_det.nnotices) {
        struct ftw_det_notice *n = &ftw_det.notices[i];
        int live = ftw_det.state[n->to] == FTW_PEER_LIVE;

        if (live && now < n->at) {
            i++;
            continue;
        }
        if (live && n->sends < FTW_DET_NOTICE_SENDS) {
            msg_send(n->to, MSG_FAIL, n->failed);
            ftw_stat_add(FTW_STAT_DET_FAIL_SENT, 1);
            ftw_stat_add(FTW_STAT_DET_FAIL_RESENT, 1);
            n->sends++;
            n->rto = n->rto * 2 < ftw_cfg.hb_timeout ? n->rto * 2
                                                     : ftw_cfg.hb_timeout;
            n->at = now + n->rto;
            i++;
            continue;
        }
        {
            int failed = n->failed, to = n->to;

            if (live)
                ftw_debug("rank %d never acknowledged the notice of rank "
                          "%d; passing it over", to, failed);
            ftw_det.notices[i] = ftw_det.notices[--ftw_det.nnotices];
            notice_children(failed, notice_vrank(to, failed));
        }
    }
}

void ftw_det_bye_send(void)
{
    for (int copy = 0; copy < 2; copy++)
        for (int r = 0; r < ftw_det.size; r++)
            msg_send(r, MSG_BYE, 0);
}

/* A revoke bell: count it; the first one takes this process off the
 * wrappers' fast path for good. */
static void bell_rung(void)
{
    if (atomic_fetch_add_explicit(&ftw_det_bells, 1,
                                  memory_order_release) == 0)
        atomic_fetch_add_explicit(&ftw_noisy, 1, memory_order_relaxed);
}

void ftw_detect_bell(int world_rank)
{
    if (ftw_det.sock < 0 || ftw_det.dest == NULL || world_rank < 0 ||
        world_rank >= ftw_det.size)
        return;
    for (int copy = 0; copy < 2; copy++)
        msg_send(world_rank, MSG_BELL, 0);
}

/* A notice names this process: the others have gone on without it. */
static FTW_NORETURN void declared_exit(int by)
{
    ftw_error("this process (rank %d) was declared failed by rank %d; "
              "exiting", ftw_det.rank, by);
    _exit(FTW_DET_EXIT_DECLARED);
}

/* A process this one holds failed names this one failed (a healed
 * partition): whether this side gives way. */
static int side_yields(int sender, int side)
{
    return side < ftw_det.side ||
           (side == ftw_det.side && sender < ftw_det.rank);
}

/* A datagram from a process held failed: heartbeats get a notice back,
 * a notice naming this process is weighed; the rest is ignored. */
static void msg_from_failed(int sender, uint32_t type, int failed, int side)
{
    int names_me = type == MSG_FAIL && failed == ftw_det.rank;

    if (names_me && side_yields(sender, side))
        declared_exit(sender);
    if (type == MSG_FAIL)
        ftw_stat_add(FTW_STAT_DET_FAIL_RECV, 1);
    if (names_me || type == MSG_HB) {
        msg_send(sender, MSG_FAIL, sender);
        ftw_stat_add(FTW_STAT_DET_FAIL_SENT, 1);
    }
}

static void msg_handle(const ftw_det_msg_t *m)
{
    int sender = (int32_t)ntohl((uint32_t)m->sender);
    int failed = (int32_t)ntohl((uint32_t)m->failed);
    int side = (int32_t)ntohl((uint32_t)m->side);
    uint32_t type = ntohl(m->type);
    char why[48];

    if (be64toh(m->cookie) != ftw_det.cookie || sender < 0 ||
        sender >= ftw_det.size || sender == ftw_det.rank)
        return;
    ftw_det.heard[sender] = ftw_det_now();
    if (ftw_det.state[sender] == FTW_PEER_FAILED) {
        msg_from_failed(sender, type, failed, side);
        return;
    }
    switch (type) {
    case MSG_HB:
        break;
    case MSG_PING:
        msg_send(sender, MSG_HB, 0);
        break;
    case MSG_FAIL:
        ftw_stat_add(FTW_STAT_DET_FAIL_RECV, 1);
        if (failed == ftw_det.rank)
            declared_exit(sender);
        if (failed < 0 || failed >= ftw_det.size)
            break;
        msg_send(sender, MSG_FACK, failed);
        ftw_stat_add(FTW_STAT_DET_FAIL_ACKS, 1);
        ftw_det_notice_relay(failed);
        snprintf(why, sizeof(why), "notice from rank %d", sender);
        ftw_det_declare_heard(failed, why);
        break;
    case MSG_FACK:
        notice_acked(sender, failed);
        break;
    case MSG_BYE:
        ftw_det_depart(sender);
        break;
    case MSG_BELL:
        bell_rung();
        break;
    case MSG_ABORT:
        ftw_error("rank %d aborted the job; exiting with status %d", sender,
                  failed);
        _exit(failed);
    }
}

void ftw_detect_abort_job(int status)
{
    if (ftw_det.sock < 0 || ftw_det.dest == NULL)
        return;
    for (int round = 0; round < 2; round++)
        for (int r = 0; r < ftw_det.size; r++)
            msg_send(r, MSG_ABORT, status);
}

/* Read and handle every pending datagram. */
void ftw_det_sock_drain(void)
{
    ftw_det_msg_t m;
    ssize_t n;

    if (ftw_det.sock < 0)
        return;
    for (;;) {
        n = recv(ftw_det.sock, &m, sizeof(m), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                ftw_warn_sparse("recv on the heartbeat socket: %m");
            return;
        }
        if (n == (ssize_t)sizeof(m))
            msg_handle(&m);
    }
}
