/*
 * Peers on this host: a pidfd per peer, in the detector's epoll set.  A
 * pidfd becomes readable when its process has exited, however it ended;
 * there are no false positives.
 */
#define _GNU_SOURCE
#include "detect/detect_int.h"

#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/config.h"
#include "util/log.h"

static int pidfd_open(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int pidfd_watched(int rank)
{
    const ftw_det_peer_t *me = &ftw_det.peers[ftw_det.rank];

    return rank != ftw_det.rank && ftw_det.mode != FTW_DETECT_HEARTBEAT &&
           ftw_det.peers[rank].host == me->host;
}

/* Open and watch the pidfd of one local peer; a peer already gone
 * (ESRCH) is declared failed at once. */
static ftw_status_t pidfd_watch(int rank)
{
    int fd = pidfd_open(ftw_det.peers[rank].pid);

    if (fd < 0 && errno == ESRCH) {
        ftw_det_declare(rank, "gone before the detector started");
        return FTW_OK;
    }
    if (fd < 0) {
        ftw_error("pidfd_open(pid %d of rank %d): %m",
                  (int)ftw_det.peers[rank].pid, rank);
        return errno == ENOSYS ? FTW_ST_UNSUPPORTED : FTW_ST_IO_ERROR;
    }
    ftw_det.pidfds[rank] = fd;
    if (ftw_det_epoll_add(fd, FTW_EV_PIDFD, rank) != FTW_OK) {
        ftw_det_pidfd_drop(rank);
        return FTW_ST_IO_ERROR;
    }
    return FTW_OK;
}

ftw_status_t ftw_det_pidfd_open_all(void)
{
    ftw_status_t status;

    for (int r = 0; r < ftw_det.size; r++) {
        if (!pidfd_watched(r))
            continue;
        status = pidfd_watch(r);
        if (status != FTW_OK)
            return status;      /* the caller closes what is open */
    }
    return FTW_OK;
}

void ftw_det_pidfd_drop(int rank)
{
    int fd = ftw_det.pidfds[rank];

    if (fd < 0)
        return;
    epoll_ctl(ftw_det.epfd, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
    ftw_det.pidfds[rank] = -1;
}

/* rank's pidfd is readable: it exited.  Pending datagrams are read first,
 * in case it said goodbye (a clean MPI_Finalize) before leaving. */
void ftw_det_pidfd_event(int rank)
{
    ftw_det_pidfd_drop(rank);
    ftw_det_sock_drain();
    ftw_det_declare(rank, "pidfd exit");
}

/* Poll every pidfd now (on a launcher's hint that a peer died). */
void ftw_det_pidfd_recheck(void)
{
    for (int r = 0; r < ftw_det.size; r++) {
        struct pollfd p = { .fd = ftw_det.pidfds[r], .events = POLLIN };

        if (p.fd >= 0 && poll(&p, 1, 0) > 0)
            ftw_det_pidfd_event(r);
    }
}
