/* What the processes of the job tell each other at init. */
#define _GNU_SOURCE
#include "detect/detect_int.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"

#define FNV_OFFSET 14695981039346656037ULL
#define FNV_PRIME  1099511628211ULL

static uint64_t fnv1a(uint64_t h, const void *buf, size_t len)
{
    const unsigned char *p = buf;

    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * FNV_PRIME;
    return h;
}

/* Identify this host (this boot of it): hash of the hostname and the
 * kernel's boot id.  Two containers with the same hostname on different
 * machines differ by boot id; a missing boot id only weakens that. */
uint64_t ftw_det_host_id(void)
{
    char name[256] = "", boot[64] = "";
    uint64_t h = FNV_OFFSET;
    int fd;

    if (gethostname(name, sizeof(name) - 1) < 0)
        ftw_warn("gethostname: %m");
    h = fnv1a(h, name, strlen(name) + 1);
    fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        ftw_warn("/proc/sys/kernel/random/boot_id: %m");
        return h;
    }
    if (read(fd, boot, sizeof(boot) - 1) < 0)
        ftw_warn("read boot_id: %m");
    close(fd);
    return fnv1a(h, boot, strlen(boot));
}

static int addr_is_loopback(uint32_t addr)
{
    return (ntohl(addr) >> 24) == 127;
}

/* The first non-loopback IPv4 address of an interface that is up. */
static uint32_t first_iface_addr(void)
{
    struct ifaddrs *ifs, *i;
    uint32_t addr = htonl(INADDR_LOOPBACK);

    if (getifaddrs(&ifs) < 0) {
        ftw_warn("getifaddrs: %m");
        return addr;
    }
    for (i = ifs; i; i = i->ifa_next) {
        const struct sockaddr_in *sin = (void *)i->ifa_addr;

        if (!sin || sin->sin_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
            addr_is_loopback(sin->sin_addr.s_addr))
            continue;
        addr = sin->sin_addr.s_addr;
        break;
    }
    freeifaddrs(ifs);
    return addr;
}

/* The address peers on other hosts send heartbeats to: the hostname's
 * IPv4 address, unless it is a loopback one (Debian maps the hostname to
 * 127.0.1.1), then an interface's.  Peers on this host use 127.0.0.1. */
uint32_t ftw_det_host_addr(void)
{
    struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM };
    struct addrinfo *res, *ai;
    char name[256] = "";
    uint32_t addr = 0;

    gethostname(name, sizeof(name) - 1);
    if (getaddrinfo(name, NULL, &hints, &res) == 0) {
        for (ai = res; ai && !addr; ai = ai->ai_next) {
            uint32_t a = ((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr;

            if (!addr_is_loopback(a))
                addr = a;
        }
        freeaddrinfo(res);
    }
    return addr ? addr : first_iface_addr();
}

/* Allgather every process's entry into ftw_det.peers.  Collective. */
ftw_status_t ftw_det_exchange(const ftw_det_peer_t *mine)
{
    int rc;

    rc = PMPI_Allgather(mine, (int)sizeof(*mine), MPI_BYTE, ftw_det.peers,
                        (int)sizeof(*mine), MPI_BYTE, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        ftw_error("MPI_Allgather of the detector addresses failed (%d)", rc);
        return FTW_ST_MPI_ERROR;
    }
    return FTW_OK;
}
