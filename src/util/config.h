/*
 * The configuration table: every FTW_* environment knob is one row (name,
 * default, help, type, offset into ftw_config_t).  A default is written in
 * the table and nowhere else.  ftw_config_load() reads the environment once,
 * at MPI_Init; FTW_PRINT_CONFIG=1 or `ftwrun --print-config` prints the
 * table with the values in effect.
 */
#ifndef FTW_UTIL_CONFIG_H
#define FTW_UTIL_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#include "util/status.h"

typedef enum {
    FTW_CFG_BOOL,       /* 0/1, yes/no, on/off, true/false */
    FTW_CFG_INT,        /* decimal integer */
    FTW_CFG_SIZE,       /* bytes, with an optional k, m or g suffix */
    FTW_CFG_DOUBLE,     /* seconds and the like */
    FTW_CFG_STRING,     /* free text, "" when unset */
    FTW_CFG_ENUM,       /* one of the row's names; stored as its index */
} ftw_cfg_type_t;

typedef struct {
    int log_level;          /* FTW_LOG: index into the level names */
    int stats;              /* FTW_STATS */
    int print_config;       /* FTW_PRINT_CONFIG */
    int detect;             /* FTW_DETECT: ftw_detect_mode_t */
    double hb_period;       /* FTW_HB_PERIOD, seconds */
    double hb_timeout;      /* FTW_HB_TIMEOUT, seconds */
    const char *inject;     /* FTW_INJECT */
    double finalize_timeout; /* FTW_FINALIZE_TIMEOUT, seconds */
    size_t eager_max;       /* FTW_EAGER_MAX, bytes */
    int initial_errhandler; /* FTW_INITIAL_ERRHANDLER: ftw_errh_choice_t */
    size_t rndv_threshold;  /* FTW_RNDV_THRESHOLD, bytes; 0: off */
    int xport;              /* FTW_XPORT: ftw_xport_mode_t */
    size_t rndv_chunk;      /* FTW_RNDV_CHUNK, bytes */
    size_t rndv_first;      /* FTW_RNDV_FIRST, bytes; 0: none */
    size_t shm_frag;        /* FTW_SHM_FRAG, bytes */
    int shm_slots;          /* FTW_SHM_SLOTS */
    int shm_push;           /* FTW_SHM_PUSH */
    size_t shm_stream;      /* FTW_SHM_STREAM, bytes */
    int shm_pull;           /* FTW_SHM_PULL: ftw_shm_pull_t */
    int quarantine;         /* FTW_QUARANTINE: ftw_quarantine_mode_t */
    int quarantine_settle;  /* FTW_QUARANTINE_SETTLE, progress passes */
    int idle;               /* FTW_IDLE: ftw_idle_mode_t */
    const char *verbs_device;   /* FTW_VERBS_DEVICE, "" for the first */
    const char *verbs_gid_index; /* FTW_VERBS_GID_INDEX, number or auto */
    int verbs_fallback;     /* FTW_VERBS_FALLBACK: ftw_verbs_fallback_t */
    int verbs_prefetch;     /* FTW_VERBS_PREFETCH */
    int verbs_mw;           /* FTW_VERBS_MW */
    int verbs_debug;        /* FTW_VERBS_DEBUG */
} ftw_config_t;

/* FTW_SHM_PULL values, in the order of the table's names. */
typedef enum {
    FTW_SHM_PULL_SPLIT,     /* one copy, chunks shared by both sides */
    FTW_SHM_PULL_PIPE,      /* two copies through the segment's slots */
} ftw_shm_pull_t;

/* FTW_IDLE values, in the order of the table's names. */
typedef enum {
    FTW_IDLE_AUTO,          /* sleep when the host is oversubscribed */
    FTW_IDLE_SPIN,
    FTW_IDLE_SLEEP,
} ftw_idle_mode_t;

/* FTW_INITIAL_ERRHANDLER values, in the order of the table's names. */
typedef enum {
    FTW_ERRH_NONE,
    FTW_ERRH_ARE_FATAL,
    FTW_ERRH_ABORT,
    FTW_ERRH_RETURN,
} ftw_errh_choice_t;

/* Their names, which are also MPI-4's mpi_initial_errhandler values. */
extern const char *const ftw_errh_names[];

/* FTW_XPORT values, in the order of the table's names. */
typedef enum {
    FTW_XPORT_AUTO,         /* the best transport each peer allows */
    FTW_XPORT_CMA,          /* process_vm_readv on this host */
    FTW_XPORT_SHM,          /* pipelined pull through a shared segment */
    FTW_XPORT_NATIVE,       /* every message through the MPI unchanged */
    FTW_XPORT_VERBS,        /* RDMA READ to every other process */
} ftw_xport_mode_t;

/* FTW_VERBS_FALLBACK values, in the order of the table's names. */
typedef enum {
    FTW_VERBS_FALLBACK_PIN,     /* register each message's buffers */
    FTW_VERBS_FALLBACK_NATIVE,  /* those messages go through the MPI */
} ftw_verbs_fallback_t;

/* FTW_QUARANTINE values, in the order of the table's names. */
typedef enum {
    FTW_QUARANTINE_ERROR,   /* receives into a quarantined range fail */
    FTW_QUARANTINE_BOUNCE,  /* they land in a bounce buffer instead */
} ftw_quarantine_mode_t;

/* FTW_DETECT values, in the order of the table's names. */
typedef enum {
    FTW_DETECT_AUTO,        /* pidfd on this host, heartbeats to others */
    FTW_DETECT_PIDFD,       /* pidfd only (every peer on this host) */
    FTW_DETECT_HEARTBEAT,   /* heartbeats to every peer, even local ones */
    FTW_DETECT_OFF,         /* no detection: plain passthrough semantics */
} ftw_detect_mode_t;

typedef struct {
    const char *name;
    const char *dflt;
    const char *help;
    ftw_cfg_type_t type;
    size_t offset;              /* of the field in ftw_config_t */
    const char *const *names;   /* FTW_CFG_ENUM: NULL-terminated */
} ftw_cfg_row_t;

extern ftw_config_t ftw_cfg;

/* Fill ftw_cfg from defaults and the environment.  A value that does not
 * parse is reported and replaced by the default (FTW_ST_INVALID_PARAM is
 * returned so the caller may refuse to go on). */
ftw_status_t ftw_config_load(void);

/* Print the table: name, type, value in effect, default, help. */
void ftw_config_print(FILE *out);

#endif
