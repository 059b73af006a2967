/*
 * Processes of other jobs: the other side of an MPI_Comm_spawn, accept,
 * connect or join.  Each gets an id of its own past the world ranks
 * (ftw_det.size + index), unique in this process only: ids never travel.
 * A process of another job on this host is watched by a pidfd in the
 * detector's epoll set like a local peer; one on another host is not
 * watched (no heartbeat ring reaches it).
 *
 * Entries are added by application threads under foreign_lock and never
 * removed; the detector thread reads an entry only after its pidfd was
 * added to the epoll set, which orders the two.
 */
#define _GNU_SOURCE
#include "detect/detect_int.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/config.h"
#include "util/log.h"

typedef struct {
    uint64_t host;
    int32_t pid;
    int pidfd;              /* -1: not watched, or exited */
} foreign_t;

static foreign_t foreign[FTW_DET_FOREIGN_MAX];
static int nforeign;
static pthread_mutex_t foreign_lock = PTHREAD_MUTEX_INITIALIZER;

/* The world rank of the process (host, pid) of this job, or -1. */
static int own_rank_of(uint64_t host, int pid)
{
    for (int r = 0; r < ftw_det.size; r++)
        if (ftw_det.peers[r].pid == pid && ftw_det.peers[r].host == host)
            return r;
    return -1;
}

/* Watch entry i (id) on this host; one gone already is failed now. */
static void foreign_watch(int i, int id)
{
    int fd = (int)syscall(SYS_pidfd_open, (pid_t)foreign[i].pid, 0);

    if (fd < 0) {
        if (errno == ESRCH)
            ftw_det_publish(id, "a process of another job, gone before "
                                "it was watched");
        else
            ftw_warn("pidfd_open(pid %d of another job): %m; its failure "
                     "will not be noticed", (int)foreign[i].pid);
        return;
    }
    foreign[i].pidfd = fd;
    if (ftw_det_epoll_add(fd, FTW_EV_FOREIGN, id) != FTW_OK) {
        foreign[i].pidfd = -1;
        close(fd);
    }
}

int ftw_detect_foreign(uint64_t host, int pid)
{
    int id = -1, i;

    if (ftw_det.peers == NULL)
        return -1;
    pthread_mutex_lock(&foreign_lock);
    id = own_rank_of(host, pid);
    for (i = 0; id < 0 && i < nforeign; i++)
        if (foreign[i].host == host && foreign[i].pid == pid)
            id = ftw_det.size + i;
    if (id < 0 && nforeign < FTW_DET_FOREIGN_MAX) {
        i = nforeign++;
        id = ftw_det.size + i;
        foreign[i] = (foreign_t){ .host = host, .pid = pid, .pidfd = -1 };
        if (ftw_det.mode != FTW_DETECT_OFF && ftw_det.epfd >= 0 &&
            host == ftw_det.peers[ftw_det.rank].host)
            foreign_watch(i, id);
        else
            ftw_debug("pid %d of another job runs on another host: its "
                      "failure will not be noticed", pid);
    } else if (id < 0) {
        ftw_warn_sparse("more than %d processes of other jobs: pid %d is "
                        "not watched", FTW_DET_FOREIGN_MAX, pid);
    }
    pthread_mutex_unlock(&foreign_lock);
    return id;
}

/* The pidfd of id is readable: that process exited (detector thread).
 * One that ended after a clean MPI_Finalize is no failure, but nothing
 * tells them apart here: the communicators that still hold it are the
 * program's to free before (MPI_Comm_disconnect). */
void ftw_det_foreign_event(int id)
{
    int i = id - ftw_det.size, fd;

    if (i < 0 || i >= FTW_DET_FOREIGN_MAX)
        return;
    pthread_mutex_lock(&foreign_lock);
    fd = foreign[i].pidfd;
    foreign[i].pidfd = -1;
    pthread_mutex_unlock(&foreign_lock);
    if (fd < 0)
        return;
    epoll_ctl(ftw_det.epfd, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
    ftw_det_publish(id, "pidfd exit of a process of another job");
}

void ftw_det_foreign_close(void)
{
    pthread_mutex_lock(&foreign_lock);
    for (int i = 0; i < nforeign; i++) {
        if (foreign[i].pidfd >= 0) {
            epoll_ctl(ftw_det.epfd, EPOLL_CTL_DEL, foreign[i].pidfd, NULL);
            close(foreign[i].pidfd);
            foreign[i].pidfd = -1;
        }
    }
    pthread_mutex_unlock(&foreign_lock);
}
