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
static ftw_status_t native_pull(const ftw_xport_src_t *src, uint64_t addr,
                                void *local, size_t len)
{
    (void)src;
    (void)addr;
    (void)local;
    (void)len;
    return FTW_ST_UNSUPPORTED;
}

static ftw_status_t native_expose(int peer, uint64_t addr, size_t len,
                                  const void *owner, int32_t *key_p)
{
    (void)peer;
    (void)addr;
    (void)len;
    (void)owner;
    (void)key_p;
    return FTW_ST_UNSUPPORTED;
}

const ftw_xport_ops_t ftw_xport_native_ops = {
    .name = "native",
    .reach = native_reach,
    .pull = native_pull,
    .expose = native_expose,
    .release = ftw_xport_release_none,
    .fallback = FTW_XPORT_ID_NATIVE,
};
