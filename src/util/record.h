/*
 * Records to ftwrun over TCP: one line per connection to the first
 * address of a spec "addr[,addr...]:port" that answers.  Header-only, for
 * ftw-supervise (built on its own) and libftwrap.so (MPI_Finalize's
 * "failed" records) alike.
 */
#ifndef FTW_UTIL_RECORD_H
#define FTW_UTIL_RECORD_H

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Write all len bytes of buf to fd; the bytes written. */
static inline size_t ftw_write_all(int fd, const char *buf, size_t len)
{
    size_t off = 0;

    while (off < len) {
        ssize_t w = write(fd, buf + off, len - off);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    return off;
}

/* Connect to host:port within timeout_ms; a blocking socket or -1. */
static inline int ftw_dial(const char *host, const char *port, int timeout_ms)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM }, *res, *ai;
    int fd = -1;

    if (getaddrinfo(host, port, &hints, &res) != 0)
        return -1;
    for (ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        struct pollfd p;
        int err = 0;
        socklen_t len = sizeof(err);

        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
                                   SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            p = (struct pollfd){ .fd = fd, .events = POLLOUT };
            if (errno != EINPROGRESS || poll(&p, 1, timeout_ms) != 1 ||
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
                err != 0) {
                close(fd);
                fd = -1;
                continue;
            }
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    }
    freeaddrinfo(res);
    return fd;
}

/* Send one record line (with its newline) to the first address of spec
 * that takes it whole; that connection, still open, or -1 if none did. */
static inline int ftw_record_open(const char *spec, const char *line)
{
    const char *colon = spec != NULL ? strrchr(spec, ':') : NULL;
    char hosts[1024], *save = NULL, *h;
    size_t len = strlen(line);

    if (colon == NULL || (size_t)(colon - spec) >= sizeof(hosts))
        return -1;
    memcpy(hosts, spec, (size_t)(colon - spec));
    hosts[colon - spec] = '\0';
    for (h = strtok_r(hosts, ",", &save); h != NULL;
         h = strtok_r(NULL, ",", &save)) {
        int fd = ftw_dial(h, colon + 1, 2000);

        if (fd < 0)
            continue;
        if (ftw_write_all(fd, line, len) == len)
            return fd;
        close(fd);
    }
    return -1;
}

/* Send one record line to spec; 0 once one address took it whole, -1 if
 * none did. */
static inline int ftw_record_send(const char *spec, const char *line)
{
    int fd = ftw_record_open(spec, line);

    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

#endif
