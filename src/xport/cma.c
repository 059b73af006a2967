/*
 * The cma transport: the receiver reads the sender's memory with
 * process_vm_readv (Linux cross-memory attach), one copy, no help from
 * the sender.  Same host only; ptrace permission is needed (same user
 * and a Yama ptrace_scope that allows it), which the probe checks.
 */
#define _GNU_SOURCE
#include "xport/xport.h"

#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/log.h"

/* A failed read: the peer's death, a missing permission, or else. */
static ftw_status_t cma_error(int pid, int err)
{
    if (err == ESRCH || (kill(pid, 0) < 0 && errno == ESRCH))
        return FTW_ST_PEER_FAILED;
    if (err == EPERM)
        return FTW_ST_UNSUPPORTED;
    errno = err;
    ftw_warn_sparse("process_vm_readv from pid %d: %m", pid);
    return FTW_ST_IO_ERROR;
}

/* Read len bytes, looping on partial reads. */
static ftw_status_t cma_read(int pid, uint64_t addr, void *local, size_t len)
{
    size_t done = 0;

    while (done < len) {
        struct iovec l = { (char *)local + done, len - done };
        struct iovec r = { (void *)(uintptr_t)(addr + done), len - done };
        /* The system call itself: the libc name is ftwrap's
         * interposer (buf/cut.h), which is for the MPI's copies. */
        ssize_t n = syscall(SYS_process_vm_readv, pid, &l, 1, &r, 1, 0UL);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return cma_error(pid, n < 0 ? errno : EFAULT);
        done += (size_t)n;
    }
    return FTW_OK;
}

/* One real read of the peer's probe word, its value checked.  A refusal
 * (EPERM: another user, or Yama) is said once, at info level. */
static ftw_status_t cma_reach(int peer, const ftw_xport_peer_t *p)
{
    uint64_t word = 0;
    ftw_status_t st;

    if (p->host != 0 && p->pid > 0 && p->probe_addr != 0)
        st = cma_read(p->pid, p->probe_addr, &word, sizeof(word));
    else
        st = FTW_ST_UNSUPPORTED;
    if (st == FTW_OK && word != ftw_xport_probe_value(p->pid))
        st = FTW_ST_IO_ERROR;
    if (st != FTW_OK)
        ftw_log_sparse(FTW_LOG_INFO, "cma cannot read world rank %d "
                       "(pid %d): %s; its large messages go through the "
                       "MPI", peer, p->pid, ftw_status_string(st));
    return st;
}

static ftw_status_t cma_pull(const ftw_xport_src_t *src, uint64_t addr,
                             void *local, size_t len)
{
    return cma_read(src->pid, addr, local, len);
}

/* Nothing to do: the receiver reads the sender's memory as it is. */
static ftw_status_t cma_expose(int peer, uint64_t addr, size_t len,
                               const void *owner, int32_t *key_p)
{
    (void)peer;
    (void)addr;
    (void)len;
    (void)owner;
    *key_p = 0;
    return FTW_OK;
}

const ftw_xport_ops_t ftw_xport_cma_ops = {
    .name = "cma",
    .reach = cma_reach,
    .pull = cma_pull,
    .expose = cma_expose,
    .release = ftw_xport_release_none,
    .fallback = FTW_XPORT_ID_NATIVE,
};
