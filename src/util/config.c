/* The FTW_* environment knobs: one table, parsed once. */
#include "util/config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"

ftw_config_t ftw_cfg;

static const char *const log_names[] = { "error", "warn", "info", "debug",
                                         NULL };
static const char *const shm_pull_names[] = { "split", "pipe", NULL };
static const char *const xport_names[] = { "auto", "cma", "shm", "native",
                                           "verbs", NULL };
static const char *const verbs_fallback_names[] = { "pin", "native", NULL };
static const char *const detect_names[] = { "auto", "pidfd", "heartbeat",
                                            "off", NULL };
static const char *const quarantine_names[] = { "error", "bounce", NULL };
static const char *const idle_names[] = { "auto", "spin", "sleep", NULL };
const char *const ftw_errh_names[] = {
    "none", "mpi_errors_are_fatal", "mpi_errors_abort", "mpi_errors_return",
    NULL
};

#define FTW_CFG_FIELD(f) offsetof(ftw_config_t, f)

static const ftw_cfg_row_t cfg_table[] = {
    { "FTW_LOG", "warn",
      "Log level: error, warn, info or debug.",
      FTW_CFG_ENUM, FTW_CFG_FIELD(log_level), log_names },
    { "FTW_STATS", "0",
      "Print per-rank counters of what ftwrap did at MPI_Finalize.",
      FTW_CFG_BOOL, FTW_CFG_FIELD(stats), NULL },
    { "FTW_PRINT_CONFIG", "0",
      "Rank 0 prints this table at MPI_Init.",
      FTW_CFG_BOOL, FTW_CFG_FIELD(print_config), NULL },
    { "FTW_DETECT", "auto",
      "Failure detector: auto (pidfd for peers on this host, heartbeats "
      "for others), pidfd, heartbeat (every peer, even local), off.",
      FTW_CFG_ENUM, FTW_CFG_FIELD(detect), detect_names },
    { "FTW_HB_PERIOD", "0.1",
      "Seconds between heartbeats a process sends to its ring successor.",
      FTW_CFG_DOUBLE, FTW_CFG_FIELD(hb_period), NULL },
    { "FTW_HB_TIMEOUT", "1.0",
      "Seconds without a heartbeat after which a peer is declared failed "
      "(and, if it is alive, forced to exit).",
      FTW_CFG_DOUBLE, FTW_CFG_FIELD(hb_timeout), NULL },
    { "FTW_INJECT", "",
      "Fault injection for tests: rank=R,at=POINT:N[,sig=NAME] kills rank R "
      "with signal NAME (default KILL) on its N-th call at POINT (send, "
      "recv, wait, probe, coll, finalize, pull: a rendezvous chunk it pulls; "
      "pulled: the N-th chunk a receiver pulls from it, the receiver sends "
      "the signal; frag: a rendezvous send's first fragment, after its "
      "RTS).",
      FTW_CFG_STRING, FTW_CFG_FIELD(inject), NULL },
    { "FTW_FINALIZE_TIMEOUT", "10",
      "Seconds the native MPI_Finalize may take before the process ends "
      "itself: status 0 if a process failed meanwhile (it had reached "
      "MPI_Finalize), else 70.  After failures seen before it, the native "
      "finalize is skipped.",
      FTW_CFG_DOUBLE, FTW_CFG_FIELD(finalize_timeout), NULL },
    { "FTW_EAGER_MAX", "4096",
      "Blocking standard and ready sends up to this size go straight to the "
      "MPI (they never wait for the receiver); larger ones are watched.",
      FTW_CFG_SIZE, FTW_CFG_FIELD(eager_max), NULL },
    { "FTW_INITIAL_ERRHANDLER", "none",
      "The error handler MPI_COMM_WORLD and MPI_COMM_SELF get at MPI_Init, "
      "as MPI-4's mpi_initial_errhandler (also set in MPI_INFO_ENV); none: "
      "the MPI's default (ftwrun --initial-errhandler sets it).",
      FTW_CFG_ENUM, FTW_CFG_FIELD(initial_errhandler), ftw_errh_names },
    { "FTW_RNDV_THRESHOLD", "128k",
      "Point-to-point messages of at least this many bytes to a process on "
      "this host (or, over verbs, on another) go through ftwrap's own "
      "rendezvous (the receiver pulls the data); 0 turns it off.  Values "
      "below 1k are raised to 1k; every process takes rank 0's value.",
      FTW_CFG_SIZE, FTW_CFG_FIELD(rndv_threshold), NULL },
    { "FTW_XPORT", "auto",
      "Rendezvous transport: auto (on this host, per message size the "
      "faster of cma and shm where a test read works; to other hosts, verbs "
      "if an RDMA device works; else native), cma (the receiver reads the "
      "sender's memory), shm (pipelined pull through a shared segment per "
      "pair: the sender copies fragments in as the receiver asks), native "
      "(every message through the MPI), verbs (RDMA READ to every other "
      "process; without a usable device: as auto).",
      FTW_CFG_ENUM, FTW_CFG_FIELD(xport), xport_names },
    { "FTW_SHM_FRAG", "256k",
      "shm transport: bytes of one fragment (one slot of a segment).",
      FTW_CFG_SIZE, FTW_CFG_FIELD(shm_frag), NULL },
    { "FTW_SHM_SLOTS", "4",
      "shm transport: slots per segment, the fragments a receiver asks "
      "for ahead (2..64).",
      FTW_CFG_INT, FTW_CFG_FIELD(shm_slots), NULL },
    { "FTW_SHM_PUSH", "16",
      "shm transport: slots per segment the sender fills ahead, from inside "
      "its MPI calls, a fragment of at most 64 KiB (or FTW_SHM_FRAG) each, "
      "with the messages they hold whole that its receiver has not asked "
      "for yet (a window of sends: the receiver copies one out while the "
      "sender copies the next in); 0: none (at most 64; none with "
      "FTW_SHM_PULL=split).",
      FTW_CFG_INT, FTW_CFG_FIELD(shm_push), NULL },
    { "FTW_SHM_STREAM", "8m",
      "shm transport: a pipelined pull of at least this many bytes copies "
      "its fragments out with non-temporal stores (a message larger than "
      "the caches then costs no read of its destination); 0: never.",
      FTW_CFG_SIZE, FTW_CFG_FIELD(shm_stream), NULL },
    { "FTW_SHM_PULL", "pipe",
      "shm transport: pipe (two copies through the segment's slots: the "
      "sender copies fragments in as the receiver asks) or split (one "
      "copy, shared: the receiver reads chunks with cma while the sender, "
      "inside its MPI calls, writes others into the receiver's buffer).",
      FTW_CFG_ENUM, FTW_CFG_FIELD(shm_pull), shm_pull_names },
    { "FTW_RNDV_CHUNK", "4m",
      "A rendezvous pull reads at most this many bytes at a time and checks "
      "for failures in between.",
      FTW_CFG_SIZE, FTW_CFG_FIELD(rndv_chunk), NULL },
    { "FTW_RNDV_FIRST", "0",
      "Bytes of a rendezvous message sent right after its RTS, as an eager "
      "message the receiver takes while it pulls the rest (the pull's first "
      "round trip is hidden); 0: none.  At most 4k.",
      FTW_CFG_SIZE, FTW_CFG_FIELD(rndv_first), NULL },
    { "FTW_QUARANTINE", "error",
      "A receive into a quarantined buffer range: error (fails with "
      "FTW_ERR_BUFFER_UNUSABLE) or bounce (lands in a private buffer, "
      "copied into the range once nothing else can write it).",
      FTW_CFG_ENUM, FTW_CFG_FIELD(quarantine), quarantine_names },
    { "FTW_IDLE", "auto",
      "How a call that waits long (about 0.1 ms without progress) waits: "
      "spin (poll, yielding now and then), sleep (poll every 50 us, woken "
      "at once by a failure), auto (sleep when this host runs more ranks "
      "than it has CPUs, so the ranks waited for, and a killed rank's exit, "
      "get a CPU at once).",
      FTW_CFG_ENUM, FTW_CFG_FIELD(idle), idle_names },
    { "FTW_QUARANTINE_SETTLE", "256",
      "A range quarantined by a receive from one process on this host is "
      "released once that process has exited and this process has made "
      "this many progress passes (consuming what it had queued); 0: only "
      "when the native transfer ends.",
      FTW_CFG_INT, FTW_CFG_FIELD(quarantine_settle), NULL },
    { "FTW_VERBS_DEVICE", "",
      "RDMA device of the verbs transport (ibv_devices names them); empty: "
      "the first one.",
      FTW_CFG_STRING, FTW_CFG_FIELD(verbs_device), NULL },
    { "FTW_VERBS_GID_INDEX", "auto",
      "GID index of the verbs transport on RoCE: a number, or auto (the "
      "first RoCE v2 IPv4-mapped GID, else 1).",
      FTW_CFG_STRING, FTW_CFG_FIELD(verbs_gid_index), NULL },
    { "FTW_VERBS_FALLBACK", "pin",
      "When the device offers no on-demand paging or its self-test at "
      "MPI_Init reads wrong data: pin (register and deregister each "
      "message's buffers) or native (those messages go through the MPI).",
      FTW_CFG_ENUM, FTW_CFG_FIELD(verbs_fallback), verbs_fallback_names },
    { "FTW_VERBS_PREFETCH", "0",
      "Prefetch the pages of ODP memory regions with ibv_advise_mr before "
      "an RDMA READ (warned once if the device refuses).",
      FTW_CFG_BOOL, FTW_CFG_FIELD(verbs_prefetch), NULL },
    { "FTW_VERBS_MW", "1",
      "Give each rendezvous message sent over verbs its own type 2 memory "
      "window (its bytes only, remote read only, invalidated when the "
      "receiver's FIN arrives or the send ends otherwise), so that a peer "
      "can read nothing else of this process; where the device cannot "
      "(said once at MPI_Init), and with 0, peers read through the memory "
      "regions themselves.",
      FTW_CFG_BOOL, FTW_CFG_FIELD(verbs_mw), NULL },
    { "FTW_VERBS_DEBUG", "0",
      "Allow FTW_Verbs_reread, a test's second RDMA READ of a message "
      "already pulled (it must be refused once the sender's window is "
      "invalidated).",
      FTW_CFG_BOOL, FTW_CFG_FIELD(verbs_debug), NULL },
};

static const char *const type_names[] = {
    [FTW_CFG_BOOL] = "bool", [FTW_CFG_INT] = "int",
    [FTW_CFG_SIZE] = "size", [FTW_CFG_DOUBLE] = "double",
    [FTW_CFG_STRING] = "string", [FTW_CFG_ENUM] = "enum",
};

static int parse_bool(const char *s, int *v_p)
{
    static const char *const yes[] = { "1", "y", "yes", "on", "true" };
    static const char *const no[] = { "0", "n", "no", "off", "false" };

    for (size_t i = 0; i < FTW_ARRAY_SIZE(yes); i++) {
        if (!strcasecmp(s, yes[i])) {
            *v_p = 1;
            return 0;
        }
        if (!strcasecmp(s, no[i])) {
            *v_p = 0;
            return 0;
        }
    }
    return -1;
}

static int parse_size(const char *s, size_t *v_p)
{
    char *end;
    unsigned long long v;
    unsigned shift = 0;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        return -1;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    }
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end != '\0' || v > (SIZE_MAX >> shift))
        return -1;
    *v_p = (size_t)v << shift;
    return 0;
}

/* Parse s by the row's type into the field; 0 on success. */
static int cfg_parse(const ftw_cfg_row_t *row, const char *s)
{
    void *field = (char *)&ftw_cfg + row->offset;
    char *end;

    switch (row->type) {
    case FTW_CFG_BOOL:
        return parse_bool(s, field);
    case FTW_CFG_INT: {
        long v;

        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || *end != '\0' || v < 0 || v > INT32_MAX)
            return -1;
        *(int *)field = (int)v;
        return 0;
    }
    case FTW_CFG_SIZE:
        return parse_size(s, field);
    case FTW_CFG_DOUBLE: {
        double v;

        errno = 0;
        v = strtod(s, &end);
        if (errno || end == s || *end != '\0' || v < 0)
            return -1;
        *(double *)field = v;
        return 0;
    }
    case FTW_CFG_STRING:
        *(const char **)field = s;
        return 0;
    case FTW_CFG_ENUM:
        for (int i = 0; row->names[i]; i++) {
            if (!strcasecmp(s, row->names[i])) {
                *(int *)field = i;
                return 0;
            }
        }
        return -1;
    }
    return -1;
}

static void cfg_expect(const ftw_cfg_row_t *row, char *buf, size_t len)
{
    size_t n = 0;

    if (row->type != FTW_CFG_ENUM) {
        snprintf(buf, len, "a %s", type_names[row->type]);
        return;
    }
    buf[0] = '\0';
    for (int i = 0; row->names[i] && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "|" : "",
                              row->names[i]);
}

ftw_status_t ftw_config_load(void)
{
    ftw_status_t status = FTW_OK;

    for (size_t i = 0; i < FTW_ARRAY_SIZE(cfg_table); i++) {
        const ftw_cfg_row_t *row = &cfg_table[i];
        const char *env = getenv(row->name);
        char expect[128];

        if (cfg_parse(row, row->dflt) != 0)
            ftw_fatal("default '%s' of %s does not parse", row->dflt,
                      row->name);
        if (env == NULL || cfg_parse(row, env) == 0)
            continue;
        cfg_expect(row, expect, sizeof(expect));
        ftw_error("%s='%s' is not valid (expected %s); using the default "
                  "'%s'", row->name, env, expect, row->dflt);
        cfg_parse(row, row->dflt);
        status = FTW_ST_INVALID_PARAM;
    }
    ftw_log_level = ftw_cfg.log_level;
    return status;
}

static void cfg_value(const ftw_cfg_row_t *row, char *buf, size_t len)
{
    const void *field = (const char *)&ftw_cfg + row->offset;

    switch (row->type) {
    case FTW_CFG_BOOL:
    case FTW_CFG_INT:
        snprintf(buf, len, "%d", *(const int *)field);
        break;
    case FTW_CFG_SIZE:
        snprintf(buf, len, "%zu", *(const size_t *)field);
        break;
    case FTW_CFG_DOUBLE:
        snprintf(buf, len, "%g", *(const double *)field);
        break;
    case FTW_CFG_STRING:
        snprintf(buf, len, "%s", *(const char *const *)field);
        break;
    case FTW_CFG_ENUM:
        snprintf(buf, len, "%s", row->names[*(const int *)field]);
        break;
    }
}

void ftw_config_print(FILE *out)
{
    fprintf(out, "%-22s %-7s %-12s %-12s %s\n", "# knob", "type", "value",
            "default", "help");
    for (size_t i = 0; i < FTW_ARRAY_SIZE(cfg_table); i++) {
        const ftw_cfg_row_t *row = &cfg_table[i];
        char val[64];

        cfg_value(row, val, sizeof(val));
        fprintf(out, "%-22s %-7s %-12s %-12s %s\n", row->name,
                type_names[row->type], val, row->dflt, row->help);
    }
    fflush(out);
}
