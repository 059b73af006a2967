/*
 * Per-process counters of what ftwrap did, printed at MPI_Finalize when
 * FTW_STATS=1.  Add a counter by adding one line to FTW_STATS_LIST.
 */
#ifndef FTW_UTIL_STATS_H
#define FTW_UTIL_STATS_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#define FTW_STATS_LIST(_)                                              \
    _(COMMS_CREATED,  "comms_created",  "communicators created")        \
    _(COMMS_FREED,    "comms_freed",    "communicators freed")          \
    _(ERRHANDLER_CALLS, "errhandler_calls", "user errhandlers called")  \
    _(FAILURES_SEEN,  "failures_seen",  "process failures learned")      \
    _(OPS_FAILED,     "ops_failed",     "operations ended by a failure") \
    _(RECV_CANCELLED, "recv_cancelled", "receives cancelled on failure") \
    _(GRAVEYARD,      "graveyard",      "native requests abandoned")     \
    _(ANY_DISABLED,   "any_source_disabled", "wildcard receives refused") \
    _(VALIDATES,      "validates",      "FTW_Comm_validate completed")  \
    _(HANDLERS_RUN,   "failhandlers_run", "failure handler calls")       \
    _(DRAINS,         "drains",         "drains (all or one peer)")      \
    _(DRAIN_DROPPED,  "drain_dropped",  "messages from before a drain dropped") \
    _(QUARANTINED,    "quarantined",    "receive buffers quarantined") \
    _(REVOKES,        "revokes",        "MPIX_Comm_revoke calls")        \
    _(SHRINKS,        "shrinks",        "MPIX_Comm_shrink completed")    \
    _(AGREES,         "agrees",         "MPIX_Comm_agree completed")  \
    _(AGREEMENTS,     "agreements",     "agreements taken part in")     \
    _(AGREE_MSGS,     "agree_msgs",     "agreement messages sent")      \
    _(RNDV_CMA,       "rndv_cma",       "rendezvous messages pulled by CMA") \
    _(RNDV_CMA_BYTES, "rndv_cma_bytes", "bytes pulled by CMA")          \
    _(RNDV_SHM,       "rndv_shm",       "rendezvous messages pulled by shm") \
    _(RNDV_SHM_BYTES, "rndv_shm_bytes", "bytes pulled by shm")          \
    _(RNDV_SHM_SPLIT, "rndv_shm_split", "shm pulls shared with the sender (split)") \
    _(RNDV_SHM_PUSHED, "rndv_shm_pushed", "shm pulls the sender had filled ahead (push slots)") \
    _(RNDV_SHM_STREAMED, "rndv_shm_streamed", "bytes of pipelined shm pulls copied out with non-temporal stores") \
    _(RNDV_SHM_HELPED, "rndv_shm_helped", "bytes this sender wrote into its receivers (split)") \
    _(RNDV_SHM_STALLS, "rndv_shm_stalls", "shm pulls left to cma: the " \
                                        "sender answered nothing for 0.2 ms") \
    _(RNDV_SHM_CMA_BYTES, "rndv_shm_cma_bytes", "bytes of pipelined shm pulls read with cma: fragments the sender had not answered") \
    _(RNDV_SHM_RESUMED, "rndv_shm_resumed", "pipelined shm pulls that took the sender's fragments again after reading some with cma") \
    _(RNDV_VERBS,     "rndv_verbs",     "rendezvous messages pulled by RDMA READ") \
    _(RNDV_VERBS_BYTES, "rndv_verbs_bytes", "bytes pulled by RDMA READ")  \
    _(VERBS_ODP,      "verbs_odp",      "1: verbs memory is on-demand paged") \
    _(VERBS_ODP_ALIGNED, "verbs_odp_aligned", "1: ODP READs start page-aligned (bounce)") \
    _(VERBS_PIN,      "verbs_pin",      "1: verbs memory is pinned per message") \
    _(VERBS_MR_REGS,  "verbs_mr_regs",  "verbs memory regions registered") \
    _(VERBS_MW,       "verbs_mw",       "1: each verbs message has its own memory window") \
    _(VERBS_MW_BINDS, "verbs_mw_binds", "memory windows bound (one per message)") \
    _(VERBS_MW_INVALIDATED, "verbs_mw_invalidated", "memory windows invalidated (LOCAL_INV)") \
    _(VERBS_MW_DEALLOCATED, "verbs_mw_deallocated", "memory windows freed because LOCAL_INV could not run") \
    _(VERBS_RECONNECTS, "verbs_reconnects", "QPs reconnected after the error state") \
    _(RNDV_NATIVE,    "rndv_native",    "large messages sent natively")  \
    _(RNDV_NATIVE_BYTES, "rndv_native_bytes", "bytes of those")         \
    _(RNDV_PUSHED,    "rndv_pushed",    "rendezvous messages received whole " \
                                        "with their RTS (no transport could " \
                                        "expose them)")                      \
    _(RNDV_FIRST_FRAG, "rndv_first_frag", "rendezvous messages whose first " \
                                        "bytes came with the RTS")         \
    _(RNDV_TRUNCATED, "rndv_truncated", "rendezvous messages truncated") \
    _(RNDV_SPLIT,     "rndv_split",     "receives split: another's RTS " \
                                        "may lie in their buffer")         \
    _(RNDV_SPLIT_TYPES, "rndv_split_types", "datatypes made for split "  \
                                        "receives (the rest reuse kept "   \
                                        "ones)")                           \
    _(RNDV_ABORTED,   "rndv_aborted",   "rendezvous ended by a failure")  \
    _(RNDV_REPLAYED,  "rndv_replayed",  "messages a probe took ahead, "  \
                                        "replayed to a later receive")     \
    _(RELEASED,       "released",       "quarantined ranges released")   \
    _(CUT_COPIES,     "cut_copies",     "MPI cross-memory copies cut by a "  \
                                        "peer's death")                      \
    _(CUT_FAILED,     "cut_failed",     "completions failed over cut data")  \
    _(BOUNCED,        "bounced",        "receives through a bounce buffer") \
    _(DET_FAIL_SENT,  "det_fail_sent",  "failure notices sent (tree, "      \
                                        "resends, to the accused)")         \
    _(DET_FAIL_RESENT, "det_fail_resent", "failure notices sent again "     \
                                        "for want of an acknowledgement")   \
    _(DET_FAIL_RECV,  "det_fail_recv",  "failure notices received")         \
    _(DET_FAIL_ACKS,  "det_fail_acks",  "acknowledgements of notices sent") \
    _(DET_FAIL_RETOLD, "det_fail_retold", "suspects told again that they " \
                                        "were declared failed")

typedef enum {
#define FTW_STAT_ENUM_(id, key, help) FTW_STAT_##id,
    FTW_STATS_LIST(FTW_STAT_ENUM_)
#undef FTW_STAT_ENUM_
    FTW_STAT_COUNT
} ftw_stat_t;

extern _Atomic uint64_t ftw_stats[FTW_STAT_COUNT];

static inline void ftw_stat_add(ftw_stat_t s, uint64_t n)
{
    atomic_fetch_add_explicit(&ftw_stats[s], n, memory_order_relaxed);
}

/* One line: "[ftwrap r<rank>] stats: key=value ...". */
void ftw_stats_print(FILE *out, int rank);

/* The counter printed as key; -1 if there is none. */
int ftw_stats_lookup(const char *key, uint64_t *value);

#endif
