/* The native transport: the MPI moves the message; ftwrap pulls nothing. */
#include "xport/xport.h"

/* Every peer is reachable through the MPI itself. */
static ftw_status_t native_reach(int peer, const ftw_xport_peer_t *p)
{
    (void)peer;
    (void)p;
    return FTW_OK;
}

/* The stub for what native cannot do: ftwrap never pulls over it. */
static ftw_status_t native_pull(int pid, uint64_t addr, void *local,
                                size_t len)
{
    (void)pid;
    (void)addr;
    (void)local;
    (void)len;
    return FTW_ST_UNSUPPORTED;
}

const ftw_xport_ops_t ftw_xport_native_ops = {
    .name = "native",
    .reach = native_reach,
    .pull = native_pull,
    .expose = ftw_xport_expose_none,
    .release = ftw_xport_release_none,
    .pull_key = ftw_xport_pull_key_none,
};
