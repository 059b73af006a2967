/*
 * MPI_Wait/Test and their any/all/some forms.  Without failures each is
 * the native test call in a loop; once a failure is known, requests whose
 * peer failed complete in error (FTW_ERR_PROC_FAIL_STOP) while the others
 * complete normally, and a pending wildcard receive reports
 * FTW_ERR_ANY_SOURCE_DISABLED without completing.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "buf/bounce.h"
#include "p2p/bsend.h"
#include "p2p/complete.h"
#include "buf/cut.h"
#include "core/ft.h"
#include "op/op.h"
#include "core/revoke.h"
#include "rndv/p2p_rndv.h"
#include "util/log.h"

#define SMALL_N 32

/* Working state of one multi-request call. */
typedef struct {
    int n;
    MPI_Request *saved;         /* the handles as passed in */
    ftw_reqinfo_t *info;        /* per request, valid where has[i] */
    unsigned char *has;
    int *err;                   /* per-request outcome, FTW_PENDING_CODE */
    MPI_Request saved_small[SMALL_N];
    ftw_reqinfo_t info_small[SMALL_N];
    unsigned char has_small[SMALL_N];
    int err_small[SMALL_N];
    MPI_Status *st;             /* statuses for a caller that ignores them */
    MPI_Status st_small[SMALL_N];
    int *idx;                   /* MPI_Testsome's indices, */
    int idx_small[SMALL_N];
    MPI_Status *cst;            /* and its statuses, in their order */
    MPI_Status cst_small[SMALL_N];
    int looked_up;
    int next;                   /* MPICH's wait: the first unfinished */
    int fin;                    /* ready_round: all before it finished */
    void *block;                /* the arrays of a larger set, or NULL */
} reqset_t;

/* Drains happened in this process, receives went through bounce buffers,
 * a death cut the MPI's copies, or sends to failed processes were posted
 * to end in error: completions must be checked (ftw_req_completed) for
 * requests a drain cancelled, for data to copy out of a bounce buffer,
 * for data a dead process never finished, and for those sends. */
static int drains_known(void)
{
    return atomic_load_explicit(&ftw_drain_seq, memory_order_relaxed) != 0 ||
           ftw_unlikely(ftw_bounce_used) || ftw_unlikely(ftw_cut_seq != 0) ||
           ftw_unlikely(ftw_late_failed);
}

/* Arrays for sets larger than SMALL_N: one block per thread, kept for the
 * next call (a window of 64 requests completed again and again costs no
 * allocation); a call nested inside one using it (a failure handler's)
 * gets a block of its own. */
static FTW_TLS void *set_cache;
static FTW_TLS int set_cache_n;
static FTW_TLS int set_cache_busy;
static pthread_key_t set_cache_key;     /* frees a thread's block at exit */
static pthread_once_t set_cache_once = PTHREAD_ONCE_INIT;

static void set_cache_key_make(void)
{
    pthread_key_create(&set_cache_key, free);
}

static size_t round8(size_t b)
{
    return (b + 7) & ~(size_t)7;
}

static size_t set_bytes(int n)
{
    return round8(sizeof(ftw_reqinfo_t) * (size_t)n) +
           2 * round8(sizeof(MPI_Status) * (size_t)n) +
           round8(sizeof(MPI_Request) * (size_t)n) +
           2 * round8(sizeof(int) * (size_t)n) + round8((size_t)n);
}

static void set_carve(reqset_t *s, char *b, int n)
{
    s->info = (ftw_reqinfo_t *)b;
    b += round8(sizeof(ftw_reqinfo_t) * (size_t)n);
    s->st = (MPI_Status *)b;
    b += round8(sizeof(MPI_Status) * (size_t)n);
    s->saved = (MPI_Request *)b;
    b += round8(sizeof(MPI_Request) * (size_t)n);
    s->err = (int *)b;
    b += round8(sizeof(int) * (size_t)n);
    s->cst = (MPI_Status *)b;
    b += round8(sizeof(MPI_Status) * (size_t)n);
    s->idx = (int *)b;
    b += round8(sizeof(int) * (size_t)n);
    s->has = (unsigned char *)b;
}

/* The MPI's shared done handles (ftw_req_is_done: sends that completed
 * at once) carry no record while the table proper holds none: nothing to
 * look up, take or reap under them, so the set forgets them (saved null:
 * every completion call, MPI_Testall and the others too, skips them). */
static void reqset_forget_done(reqset_t *s)
{
    int empty = -1;

    for (int i = 0; i < s->n; i++) {
        if (!ftw_req_is_done(s->saved[i]))
            continue;
        if (empty < 0)
            empty = ftw_req_table_empty();
        if (!empty)
            return;
        s->saved[i] = MPI_REQUEST_NULL;
    }
}

static int reqset_init(reqset_t *s, int n, const MPI_Request reqs[])
{
    s->n = n;
    s->looked_up = 0;
    s->next = 0;
    s->fin = 0;
    s->block = NULL;
    if (n <= SMALL_N) {
        s->saved = s->saved_small;
        s->info = s->info_small;
        s->has = s->has_small;
        s->err = s->err_small;
        s->st = s->st_small;
        s->idx = s->idx_small;
        s->cst = s->cst_small;
    } else if (!set_cache_busy && set_cache_n >= n) {
        set_cache_busy = 1;
        s->block = set_cache;
        set_carve(s, s->block, n);
    } else {
        int cap = n < 64 ? 64 : n;

        s->block = malloc(set_bytes(cap));
        if (s->block == NULL) {
            ftw_error("out of memory for %d requests", n);
            return MPI_ERR_NO_MEM;
        }
        if (!set_cache_busy) {
            free(set_cache);
            set_cache = s->block;
            set_cache_n = cap;
            set_cache_busy = 1;
            pthread_once(&set_cache_once, set_cache_key_make);
            pthread_setspecific(set_cache_key, set_cache);
        }
        set_carve(s, s->block, cap);
    }
    if (n > 0) {
        memcpy(s->saved, reqs, sizeof(*reqs) * (size_t)n);
        memset(s->has, 0, (size_t)n);
    }
    for (int i = 0; i < n; i++)
        s->err[i] = FTW_PENDING_CODE;
    reqset_forget_done(s);
    return MPI_SUCCESS;
}

static void reqset_fini(reqset_t *s, const MPI_Request reqs[])
{
    if (s->n > 0)
        ftw_req_reap(s->n, s->saved, reqs);
    if (s->block == set_cache && s->block != NULL)
        set_cache_busy = 0;
    else
        free(s->block);
}

/* The statuses to work with: the caller's, or ftwrap's own when the
 * caller ignores them and a drain means they must be read. */
static MPI_Status *reqset_statuses(reqset_t *s, MPI_Status *sts)
{
    return sts == MPI_STATUSES_IGNORE && (drains_known() || ftw_rndv_min)
           ? s->st : sts;
}

/* reqset_t.has[i]: 0 no record, HAS_RECORD a copy of the table's,
 * HAS_TAKEN the record itself, taken out of the table (reqset_take). */
#define HAS_RECORD 1
#define HAS_TAKEN 2

/* Look the requests up once, when a failure makes it worth it. */
static void reqset_lookup(reqset_t *s)
{
    if (s->looked_up)
        return;
    for (int i = 0; i < s->n; i++)
        if (s->has[i] != HAS_TAKEN)
            s->has[i] = (unsigned char)ftw_req_lookup(s->saved[i],
                                                      &s->info[i]);
    s->looked_up = 1;
}

/* Request i completed: a request the MPI freed has its record taken out
 * of the table (one search instead of a lookup and the removal by
 * reqset_fini; what it owned is released by reqset_release once it is
 * finished); a persistent one's is looked up. */
static void reqset_take(reqset_t *s, int i, const MPI_Request reqs[])
{
    if (s->has[i] == HAS_TAKEN)
        return;
    if (s->saved[i] != MPI_REQUEST_NULL && reqs[i] == MPI_REQUEST_NULL) {
        s->has[i] = ftw_req_remove(s->saved[i], &s->info[i]) ? HAS_TAKEN : 0;
        if (s->has[i])
            s->saved[i] = MPI_REQUEST_NULL;     /* reqset_fini skips it */
    } else if (!s->looked_up) {
        s->has[i] = (unsigned char)ftw_req_lookup(s->saved[i], &s->info[i]);
    }
}

/* The memory a taken record owned: nothing uses it any more. */
static void reqset_release(reqset_t *s, int i)
{
    if (s->has[i] != HAS_TAKEN || s->info[i].owned == NULL)
        return;
    ftw_req_owned_free(s->info[i].rndv, s->info[i].owned,
                       s->info[i].pooled);
    s->info[i].owned = NULL;
    s->info[i].bounce = NULL;
}

/* Completed requests' statuses in the user's rank numbers (only once a
 * drain moved some traffic). */
static void reqset_sources(reqset_t *s, int k, const int idx[],
                           MPI_Status sts[])
{
    if (ftw_likely(ftw_p2p_moved == 0) || sts == MPI_STATUSES_IGNORE)
        return;
    reqset_lookup(s);
    for (int j = 0; j < k; j++) {
        int i = idx ? idx[j] : j;

        if (s->has[i])
            ftw_status_to_user(s->info[i].p2p_user, s->info[i].p2p_n,
                               &sts[j]);
    }
}

static MPI_Status *status_at(MPI_Status *sts, int i)
{
    return sts == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &sts[i];
}

/* Failures, or revocations, may end requests. */
static int failures_known(void)
{
    return atomic_load_explicit(&ftw_fail_epoch, memory_order_relaxed) != 0
           || ftw_unlikely(ftw_revoked_count);
}

/* Completed requests j of k (request idx[j], or j) that a drain had
 * cancelled end with FTW_ERR_DRAINED, bounced receives whose data cannot
 * be delivered yet with FTW_ERR_BUFFER_UNUSABLE; 1 if any did. */
static int reqset_drained(reqset_t *s, int k, const int idx[],
                          MPI_Status sts[])
{
    int bad = 0;

    if (!drains_known() || sts == MPI_STATUSES_IGNORE)
        return 0;
    reqset_lookup(s);
    for (int j = 0; j < k; j++) {
        int i = idx ? idx[j] : j;

        int rc;

        if (s->has[i] &&
            (rc = ftw_req_completed(&s->info[i], &sts[j])) != MPI_SUCCESS) {
            s->err[i] = rc;
            bad = 1;
        }
    }
    return bad;
}

/* Request i, freed by the MPI as it completed with *st, finished in
 * place in the log when that is all it needs (ftw_rndv_finish_quick):
 * 1, and nothing of it is left to look at. */
static int reqset_quick(reqset_t *s, int i, const MPI_Request reqs[],
                        const MPI_Status *st)
{
    ftw_reqinfo_t *in;
    int at;

    if (s->has[i] != 0 || s->saved[i] == MPI_REQUEST_NULL ||
        reqs[i] != MPI_REQUEST_NULL ||
        (in = ftw_req_log_at(s->saved[i], &at)) == NULL ||
        !ftw_rndv_finish_quick(in, st))
        return 0;
    ftw_req_owned_free(in->rndv, in->owned, in->pooled);
    ftw_req_log_drop(at);
    s->saved[i] = MPI_REQUEST_NULL;     /* reqset_fini skips it */
    return 1;
}

/* Completed requests j of k (request idx[j], or j) that carry a
 * rendezvous are finished (the pull, or the FIN read); 1 if any ended in
 * error (s->err set). */
static int reqset_rndv(reqset_t *s, int k, const int idx[], MPI_Status sts[],
                       const MPI_Request reqs[])
{
    int bad = 0, quick;

    if (ftw_likely(ftw_rndv_min == 0) || sts == MPI_STATUSES_IGNORE)
        return 0;
    quick = !s->looked_up && ftw_likely(ftw_p2p_moved == 0);
    for (int j = 0; j < k; j++) {
        int i = idx ? idx[j] : j, rc;

        if (s->saved[i] == MPI_REQUEST_NULL && s->has[i] == 0)
            continue;   /* null from the start, or finished already */
        if (quick && reqset_quick(s, i, reqs, &sts[j]))
            continue;
        reqset_take(s, i, reqs);
        rc = s->has[i] && s->info[i].rndv ?
             ftw_rndv_finish(&s->info[i], &sts[j]) : MPI_SUCCESS;
        reqset_release(s, i);
        if (rc != MPI_SUCCESS) {
            s->err[i] = rc;
            bad = 1;
        }
    }
    return bad;
}

/* Check request i against the failures; its outcome or FTW_PENDING_CODE. */
static int reqset_failcheck(reqset_t *s, int i, MPI_Request reqs[],
                            MPI_Status *status)
{
    reqset_lookup(s);
    if (!s->has[i] || reqs[i] == MPI_REQUEST_NULL)
        return FTW_PENDING_CODE;
    return ftw_req_failcheck(&s->info[i], &reqs[i], status, 0);
}

/* Raise the first of ftwrap's own errors in the set, on its request's
 * communicator; the call returns code.  The handler is called with code,
 * except for MPI_ERR_IN_STATUS: then with that request's own error, as
 * Open MPI does, so that a handler looking for a process failure
 * (MPIX_ERR_PROC_FAILED) sees one. */
static int reqset_raise(reqset_t *s, const char *name, int code)
{
    for (int i = 0; i < s->n; i++)
        if (s->has[i] && (ftw_is_own_error(s->err[i]) ||
                          (s->info[i].rndv && s->err[i] != MPI_SUCCESS &&
                           s->err[i] != FTW_PENDING_CODE))) {
            ftw_raise(s->info[i].comm,
                      code == MPI_ERR_IN_STATUS ? s->err[i] : code, name,
                      s->info[i].peer);
            return code;
        }
    return code;
}

/* ---- single request ----------------------------------------------------- */

/* A completed request's handle is NULL (a persistent one stays, inactive,
 * and keeps its entry until MPI_Request_free). */
static int single_finish(MPI_Request saved, int has,
                         const ftw_reqinfo_t *info, MPI_Request *req,
                         int rc, const char *name, MPI_Status *status)
{
    if (ftw_unlikely(ftw_p2p_moved) && rc == MPI_SUCCESS && has)
        ftw_status_to_user(info->p2p_user, info->p2p_n, status);
    if (*req == MPI_REQUEST_NULL)
        ftw_req_del(saved);
    if (has && ftw_is_own_error(rc))
        rc = ftw_raise(info->comm, rc, name, info->peer);
    return rc;
}

int ftw_wait(MPI_Request *req, MPI_Status *status)
{
    MPI_Request saved = *req;
    ftw_reqinfo_t info;
    int rc, has;

    ftw_wrap_check();
    ftw_inject(FTW_INJECT_WAIT);
    has = ftw_req_lookup(saved, &info);
    rc = ftw_req_wait(has ? &info : NULL, req, status, 0);
    return single_finish(saved, has, &info, req, rc, "MPI_Wait", status);
}

/* The test calls give ftwrap's own pending work a turn, as waits do. */
static void test_progress(void)
{
    ftw_wrap_check();
    ftw_progress_test();    /* shm receivers may wait for this one */
}

int ftw_test(MPI_Request *req, int *flag, MPI_Status *status)
{
    MPI_Request saved = *req;
    ftw_reqinfo_t info;
    MPI_Status local;
    int rc, has = 0;

    test_progress();
    /* The status is needed after the completion: to finish a rendezvous
     * receive (its byte count), or to see whether a drain cut it. */
    if (status == MPI_STATUS_IGNORE && (drains_known() || ftw_rndv_min))
        status = &local;
    rc = ftw_req_test(req, flag, status);
    if (rc == MPI_SUCCESS && !*flag && failures_known()) {
        has = ftw_req_lookup(saved, &info);
        if (has) {
            rc = ftw_req_failcheck(&info, req, status, 0);
            if (rc == FTW_PENDING_CODE)
                rc = MPI_SUCCESS;
            else
                *flag = rc != FTW_ERR_ANY_SOURCE_DISABLED;
        }
    }
    if (!has && *flag && rc == MPI_SUCCESS &&
        (ftw_unlikely(ftw_p2p_moved) || drains_known() || ftw_rndv_min) &&
        (has = ftw_req_lookup(saved, &info))) {
        if (status != MPI_STATUS_IGNORE)
            rc = ftw_req_completed(&info, status);
        if (rc == MPI_SUCCESS && info.rndv)
            rc = ftw_rndv_finish_raise(&info, status, "MPI_Test");
    }
    return single_finish(saved, has, &info, req, rc, "MPI_Test", status);
}

/* ---- all ------------------------------------------------------------------ */

/* Per-request completion once failures are known: every request ends (or,
 * a disabled wildcard receive, is reported). */
static int all_round(reqset_t *s, MPI_Request reqs[], MPI_Status sts[],
                     int check_failures)
{
    int left = 0;

    for (int i = 0; i < s->n; i++) {
        MPI_Status *st = status_at(sts, i);
        int flag = 0, rc;

        if (s->err[i] != FTW_PENDING_CODE)
            continue;
        rc = ftw_req_test(&reqs[i], &flag, st);
        if (flag || rc != MPI_SUCCESS) {
            s->err[i] = rc;
            if (rc == MPI_SUCCESS && st != MPI_STATUS_IGNORE)
                reqset_drained(s, 1, &i, st);
            if (s->err[i] == MPI_SUCCESS && st != MPI_STATUS_IGNORE)
                reqset_rndv(s, 1, &i, st, reqs);
            continue;
        }
        if (check_failures)
            s->err[i] = reqset_failcheck(s, i, reqs, st);
        left += s->err[i] == FTW_PENDING_CODE;
    }
    return left;
}

/* After all_round finished everything: statuses and the return code. */
static int all_result(reqset_t *s, MPI_Status sts[], const char *name)
{
    int bad = 0;

    for (int i = 0; i < s->n; i++)
        bad |= s->err[i] != MPI_SUCCESS;
    if (!bad)
        return MPI_SUCCESS;
    for (int i = 0; i < s->n && sts != MPI_STATUSES_IGNORE; i++)
        sts[i].MPI_ERROR = s->err[i];
    return reqset_raise(s, name, MPI_ERR_IN_STATUS);
}


/* The failure-free wait finishes the requests one after the other in
 * array order with MPI_Test, as both MPIs' own MPI_Waitall do: request
 * s->next first, each status where MPI_Waitall puts it and each outcome
 * in s->err (a failure found later leaves the finished ones alone).
 * *done once every request is.  A pass costs one test of the first
 * unfinished request (MPI_Testall would look at every request of the set
 * again on each pass while messages trickle in).  MPICH 4.0 also needs
 * it: its MPI_Testall and MPI_Testsome fail on requests its MPI_Waitall
 * completes (persistent collectives started in another order than the
 * array's: an error, or no completion ever; ROMIO's requests: an
 * assertion on their reference count). */
static int seq_round(reqset_t *s, MPI_Request reqs[], MPI_Status sts[],
                     int *done)
{
    *done = 0;
    while (s->next < s->n) {
        int i = s->next, flag = 0, rc;
        MPI_Status *st = status_at(sts, i);

        if (s->err[i] == FTW_PENDING_CODE) {
            rc = ftw_req_test(&reqs[i], &flag, st);
            if (rc == MPI_SUCCESS && !flag)
                return MPI_SUCCESS;
            s->err[i] = rc;
            if (rc == MPI_SUCCESS && st != MPI_STATUS_IGNORE)
                reqset_rndv(s, 1, &i, st, reqs);
        }
        s->next++;
    }
    *done = 1;
    return MPI_SUCCESS;
}

/* A pass of the failure-free wait by one MPI_Testsome over the
 * unfinished tail: MPICH's MPI_Test runs a progress pass even on a
 * request that has finished, so seq_round's test per request made one
 * pass per message of a window that finished all at once (an exchange
 * of 64 receives and 64 sends of 8 bytes ran at 0.64 of native).
 * Statuses land where MPI_Waitall puts them, outcomes in s->err, and
 * s->next moves past them.  A pass that finished none goes on as
 * seq_round (MPI_Testsome skips null and inactive requests, which
 * MPI_Test completes).
 * Not where MPI_Testall is unsafe (ftw_req_testall_unsafe): MPICH
 * 4.0's MPI_Testsome fails on the same requests. */
static int some_round(reqset_t *s, MPI_Request reqs[], MPI_Status sts[],
                      int *done)
{
    int base = s->next, k = 0, rc;
    MPI_Status *cst = sts == MPI_STATUSES_IGNORE ? MPI_STATUSES_IGNORE
                                                 : s->cst;

    if (s->n - base > 1) {
        rc = ftw_req_testsome(s->n - base, s->saved + base, reqs + base, &k,
                              s->idx, cst);
        if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)
            k = 0;      /* seq_round meets the bad request on its own */
        if (k == MPI_UNDEFINED)
            k = 0;
        for (int j = 0; j < k; j++) {
            int i = base + s->idx[j];

            s->idx[j] = i;
            s->err[i] = rc == MPI_ERR_IN_STATUS ? cst[j].MPI_ERROR
                                                : MPI_SUCCESS;
        }
        if (k > 0 && cst != MPI_STATUSES_IGNORE) {
            reqset_rndv(s, k, s->idx, cst, reqs);
            for (int j = 0; j < k; j++)
                sts[s->idx[j]] = cst[j];
        }
    }
    if (k == 0)
        return seq_round(s, reqs, sts, done);
    while (s->next < s->n && s->err[s->next] != FTW_PENDING_CODE)
        s->next++;
    *done = s->next == s->n;
    return MPI_SUCCESS;
}

/* Whether the failure-free wait's passes test only the first unfinished
 * request (seq_round) rather than the whole tail (some_round).  Open
 * MPI's MPI_Test of a finished request returns without a progress pass,
 * so seq_round costs it one check per request; its MPI_Testsome looks at
 * every unfinished request on each pass, and a window whose messages
 * trickle in one by one made 32 checks per message (n^2/2).  MPICH's
 * MPI_Test runs a progress pass even on a finished request (see
 * some_round), unless its MPI_Testsome is unsafe on the set. */
static inline int seq_only(void)
{
#if defined(OPEN_MPI)
    return 1;
#else
    return atomic_load_explicit(&ftw_req_testall_unsafe,
                                memory_order_relaxed);
#endif
}

#if defined(MPICH)
/* Requests [s->fin, hi), every one of them finished (ready_round looked),
 * taken by one MPI_Waitall, which cannot block on them: outcomes into
 * s->err, rendezvous finished, s->fin at hi.  s->fin stays if the call
 * failed as a whole (the per-request passes meet the bad request on their
 * own). */
static void ready_take(reqset_t *s, MPI_Request reqs[], MPI_Status sts[],
                       int hi)
{
    int lo = s->fin, k = hi - lo, rc;
    MPI_Status *st = (sts != MPI_STATUSES_IGNORE ? sts : s->st) + lo;

    rc = PMPI_Waitall(k, reqs + lo, st);
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)
        return;
    for (int j = 0; j < k; j++) {
        s->idx[j] = lo + j;
        s->err[lo + j] = rc == MPI_SUCCESS ? MPI_SUCCESS : st[j].MPI_ERROR;
    }
    s->fin = hi;
    if (sts == MPI_STATUSES_IGNORE)
        return;
    if (rc == MPI_SUCCESS) {
        reqset_rndv(s, k, s->idx, st, reqs);
        return;
    }
    for (int j = 0; j < k; j++)
        if (st[j].MPI_ERROR == MPI_SUCCESS)
            reqset_rndv(s, 1, &s->idx[j], &st[j], reqs);
}

/* MPI_COMM_WORLD's handler back, and the reference to it that
 * MPI_Comm_get_errhandler gave released (MPICH's built-in handlers,
 * handle kind 01, have none). */
static void world_restore(MPI_Errhandler saved)
{
    if (saved == MPI_ERRORS_RETURN)
        return;
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, saved);
    if (((unsigned)saved >> 30) != 1)
        PMPI_Errhandler_free(&saved);
}

/* MPICH 4.0's MPI_Request_get_status raises a request's error (a
 * truncated receive) on MPI_COMM_WORLD, not on the request's
 * communicator: where the program left MPI_COMM_WORLD fatal that would
 * end the job where MPI_Waitall returns MPI_ERR_IN_STATUS.  So the looks
 * run with MPI_COMM_WORLD returning errors, and its handler is put back
 * after them; below MPI_THREAD_MULTIPLE no other thread calls the MPI
 * meanwhile.  0 if the handler could not be swapped. */
static int world_returns(MPI_Errhandler *saved)
{
    if (PMPI_Comm_get_errhandler(MPI_COMM_WORLD, saved) != MPI_SUCCESS)
        return 0;
    if (*saved == MPI_ERRORS_RETURN)
        return 1;
    if (PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) ==
        MPI_SUCCESS)
        return 1;
    world_restore(*saved);
    return 0;
}
#endif

/* The first pass of MPICH's failure-free wait (where its MPI_Testall is
 * safe on the set, as above, and one thread calls the MPI at a time):
 * MPI_Request_get_status of the requests in array order, which runs no
 * progress pass on a request that has finished, up to the first
 * unfinished one (on which it runs one).  The finished ones before it
 * are taken together by one MPI_Waitall (ready_take), which cannot block
 * on them and is the one MPICH call with a fast path over finished
 * requests: a window that finished by the time the program waits (a
 * receiver slower than its senders) costs one look per request and that
 * MPI_Waitall, where MPI_Testall would run a progress pass and look at
 * every request.  The later passes are some_round's, from s->fin: where
 * a call failed, the per-request passes meet that request on their own.
 * *done once every request has finished. */
static void ready_round(reqset_t *s, MPI_Request reqs[], MPI_Status sts[],
                        int *done)
{
    *done = 0;
#if defined(MPICH)
    MPI_Errhandler saved;
    int rc = MPI_SUCCESS;

    if (world_returns(&saved)) {
        while (s->next < s->n) {
            int flag = 0;

            rc = PMPI_Request_get_status(reqs[s->next], &flag,
                                         MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS || !flag)
                break;
            s->next++;
        }
        world_restore(saved);
        if (rc == MPI_SUCCESS && s->next > s->fin)
            ready_take(s, reqs, sts, s->next);
        *done = s->fin == s->n;
    }
#else
    (void)reqs, (void)sts;
#endif
    s->next = s->fin;
}

static inline int ready_scan(void)
{
#if defined(MPICH)
    return !ftw_threaded &&
           !atomic_load_explicit(&ftw_req_testall_unsafe,
                                 memory_order_relaxed);
#else
    return 0;
#endif
}

/* The failure-free wait's first pass: one MPI_Testall over the whole
 * set, which finishes it when every request has completed already (a
 * window of small messages usually has by the time the program waits),
 * at the cost of one call instead of one per request.  It leaves s->err
 * as seq_round does; *done once every request finished.  An MPI_Testall
 * that finds one unfinished changes nothing, and seq_round goes on. */
static void all_at_once(reqset_t *s, MPI_Request reqs[], MPI_Status sts[],
                        int *done)
{
    MPI_Status *st = sts != MPI_STATUSES_IGNORE ? sts : s->st;
    int rc = ftw_req_testall(s->n, s->saved, reqs, done, st);

    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
        *done = 0;      /* seq_round meets the bad request again */
        return;
    }
    if (rc == MPI_SUCCESS && !*done)
        return;
    s->next = s->n;
    if (rc == MPI_SUCCESS) {
        for (int i = 0; i < s->n; i++)
            s->err[i] = MPI_SUCCESS;
        reqset_rndv(s, s->n, NULL, sts, reqs);
        return;
    }
    for (int i = 0; i < s->n; i++) {
        int err = st[i].MPI_ERROR;

        if (err == MPI_ERR_PENDING) {
            *done = 0;
            s->next = 0;
            continue;
        }
        s->err[i] = err;
        if (err == MPI_SUCCESS && sts != MPI_STATUSES_IGNORE)
            reqset_rndv(s, 1, &i, &sts[i], reqs);
    }
}

/* Sends that completed at once, forgotten by the set (reqset_forget_done),
 * end here without a call into the MPI when the caller ignores statuses:
 * in a halo exchange's wait each cost a test. */
static void reqset_done_sends(reqset_t *s, MPI_Request reqs[],
                              const MPI_Status sts[])
{
    if (sts != MPI_STATUSES_IGNORE)
        return;
    for (int i = 0; i < s->n; i++)
        if (s->saved[i] == MPI_REQUEST_NULL && ftw_req_is_done(reqs[i])) {
            reqs[i] = MPI_REQUEST_NULL;
            s->err[i] = MPI_SUCCESS;
        }
}

int ftw_waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
    reqset_t s;
    ftw_poll_t p;
    int rc, flag = 0, scan;

    ftw_wrap_check();
    ftw_inject(FTW_INJECT_WAIT);
    rc = reqset_init(&s, n, reqs);
    if (rc != MPI_SUCCESS)
        return rc;
    reqset_done_sends(&s, reqs, sts);
    sts = reqset_statuses(&s, sts);
    ftw_poll_init(&p);
    scan = ready_scan();
    if (!scan && !failures_known() && !drains_known() &&
        !atomic_load_explicit(&ftw_req_testall_unsafe, memory_order_relaxed)) {
        all_at_once(&s, reqs, sts, &flag);
        if (flag) {
            rc = all_result(&s, sts, "MPI_Waitall");
            reqset_sources(&s, n, NULL, sts);
            goto out;
        }
    }
    while (!failures_known() && !drains_known()) {
        rc = MPI_SUCCESS;
        if (scan) {
            ready_round(&s, reqs, sts, &flag);
            scan = 0;
        } else
            rc = seq_only() ? seq_round(&s, reqs, sts, &flag)
                            : some_round(&s, reqs, sts, &flag);
        if (rc != MPI_SUCCESS || flag) {
            if (rc == MPI_SUCCESS)
                rc = all_result(&s, sts, "MPI_Waitall");
            reqset_sources(&s, n, NULL, sts);
            goto out;
        }
        ftw_poll_idle(&p);
    }
    /* Requests' fates change only with new failures: check them on the
     * first round and whenever the failure epoch moves. */
    while (all_round(&s, reqs, sts, ftw_poll_changed(&p) || !s.looked_up))
        ftw_poll_idle(&p);
    reqset_sources(&s, n, NULL, sts);
    rc = all_result(&s, sts, "MPI_Waitall");
out:
    reqset_fini(&s, reqs);
    return rc;
}

int ftw_testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
    reqset_t s;
    int rc;

    test_progress();
    rc = reqset_init(&s, n, reqs);
    if (rc != MPI_SUCCESS)
        return rc;
    sts = reqset_statuses(&s, sts);
    rc = ftw_req_testall(n, s.saved, reqs, flag, sts);
    if (rc == MPI_SUCCESS && *flag) {
        for (int i = 0; i < n; i++)
            s.err[i] = MPI_SUCCESS;
        if (reqset_drained(&s, n, NULL, sts) |
            reqset_rndv(&s, n, NULL, sts, reqs))
            rc = all_result(&s, sts, "MPI_Testall");
        reqset_sources(&s, n, NULL, sts);
        reqset_fini(&s, reqs);
        return rc;
    }
    if (rc != MPI_SUCCESS || !failures_known()) {
        reqset_fini(&s, reqs);
        return rc;
    }
    /* Complete the set only if every pending request is done or doomed:
     * MPI_Testall completes all or none. */
    reqset_lookup(&s);
    for (int i = 0; i < n; i++) {
        int done = 1;

        if (reqs[i] == MPI_REQUEST_NULL)
            continue;
        PMPI_Request_get_status(reqs[i], &done, MPI_STATUS_IGNORE);
        if (!done && !(s.has[i] && ftw_req_doomed(&s.info[i]))) {
            *flag = 0;
            reqset_fini(&s, reqs);
            return MPI_SUCCESS;
        }
    }
    all_round(&s, reqs, sts, 1);
    reqset_sources(&s, n, NULL, sts);
    *flag = 1;
    rc = all_result(&s, sts, "MPI_Testall");
    reqset_fini(&s, reqs);
    return rc;
}

/* ---- any ------------------------------------------------------------------ */

/* The first pending request a failure ends; its index or -1. */
static int any_failed(reqset_t *s, MPI_Request reqs[], MPI_Status *status,
                      int *code_p)
{
    for (int i = 0; i < s->n; i++) {
        int code = reqset_failcheck(s, i, reqs, status);

        if (code != FTW_PENDING_CODE) {
            s->err[i] = code;
            *code_p = code;
            return i;
        }
    }
    return -1;
}

static int any_common(int n, MPI_Request reqs[], int *index, int *flag,
                      MPI_Status *status, int blocking, const char *name)
{
    reqset_t s;
    ftw_poll_t p;
    int rc;

    MPI_Status local;

    rc = reqset_init(&s, n, reqs);
    if (rc != MPI_SUCCESS)
        return rc;
    if (status == MPI_STATUS_IGNORE && (drains_known() || ftw_rndv_min))
        status = &local;
    ftw_poll_init(&p);
    for (;;) {
        int code, i;

        rc = ftw_req_testany(n, s.saved, reqs, index, flag, status);
        if (rc != MPI_SUCCESS || *flag) {
            if (rc == MPI_SUCCESS && *index != MPI_UNDEFINED &&
                status != MPI_STATUS_IGNORE) {
                if (reqset_drained(&s, 1, index, status) ||
                    reqset_rndv(&s, 1, index, status, reqs))
                    rc = reqset_raise(&s, name, s.err[*index]);
                reqset_sources(&s, 1, index, status);
            }
            break;
        }
        if (ftw_poll_changed(&p) || !blocking) {
            i = failures_known() ? any_failed(&s, reqs, status, &code) : -1;
            if (i >= 0) {
                *index = i;
                *flag = code != FTW_ERR_ANY_SOURCE_DISABLED;
                rc = reqset_raise(&s, name, code);
                break;
            }
        }
        if (!blocking)
            break;
        ftw_poll_idle(&p);
    }
    reqset_fini(&s, reqs);
    return rc;
}

int ftw_waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
    int flag;

    ftw_wrap_check();
    ftw_inject(FTW_INJECT_WAIT);
    return any_common(n, reqs, index, &flag, status, 1, "MPI_Waitany");
}

int ftw_testany(int n, MPI_Request reqs[], int *index, int *flag,
                MPI_Status *status)
{
    test_progress();
    return any_common(n, reqs, index, flag, status, 0, "MPI_Testany");
}

/* ---- some ----------------------------------------------------------------- */

static int some_common(int n, MPI_Request reqs[], int *outcount,
                       int indices[], MPI_Status sts[], int blocking,
                       const char *name)
{
    reqset_t s;
    ftw_poll_t p;
    int rc, bad = 0;

    rc = reqset_init(&s, n, reqs);
    if (rc != MPI_SUCCESS)
        return rc;
    sts = reqset_statuses(&s, sts);
    ftw_poll_init(&p);
    for (;;) {
        rc = ftw_req_testsome(n, s.saved, reqs, outcount, indices, sts);
        if (rc != MPI_SUCCESS || *outcount == MPI_UNDEFINED)
            break;
        for (int k = 0; k < *outcount; k++)
            s.err[indices[k]] = MPI_SUCCESS;
        bad |= reqset_drained(&s, *outcount, indices, sts);
        bad |= reqset_rndv(&s, *outcount, indices, sts, reqs);
        reqset_sources(&s, *outcount, indices, sts);
        if ((ftw_poll_changed(&p) || !blocking) && failures_known()) {
            for (int i = 0; i < n; i++) {
                MPI_Status *st = status_at(sts, *outcount);
                int code;

                if (s.err[i] != FTW_PENDING_CODE)
                    continue;
                code = reqset_failcheck(&s, i, reqs, st);
                if (code == FTW_PENDING_CODE)
                    continue;
                s.err[i] = code;
                indices[(*outcount)++] = i;
                bad = 1;
            }
        }
        if (*outcount > 0 || !blocking)
            break;
        ftw_poll_idle(&p);
    }
    if (bad) {
        for (int k = 0; k < *outcount && sts != MPI_STATUSES_IGNORE; k++)
            sts[k].MPI_ERROR = s.err[indices[k]];
        rc = reqset_raise(&s, name, MPI_ERR_IN_STATUS);
    }
    reqset_fini(&s, reqs);
    return rc;
}

int ftw_waitsome(int n, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status sts[])
{
    ftw_wrap_check();
    ftw_inject(FTW_INJECT_WAIT);
    return some_common(n, reqs, outcount, indices, sts, 1, "MPI_Waitsome");
}

int ftw_testsome(int n, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status sts[])
{
    test_progress();
    return some_common(n, reqs, outcount, indices, sts, 0, "MPI_Testsome");
}

/* ---- start and free ------------------------------------------------------- */

/* A persistent request a drain cut, or a persistent send to a failed
 * process, is refused before it starts. */
static int start_refused(MPI_Request req, const char *name)
{
    ftw_reqinfo_t info;
    ftw_comm_t *c;
    int bad;

    if ((!failures_known() && atomic_load(&ftw_drain_seq) == 0) ||
        !ftw_req_lookup(req, &info) ||
        (c = ftw_comm_get(info.comm)) == NULL)
        return MPI_SUCCESS;
    if (ftw_req_drained(c, &info))
        return ftw_raise(info.comm, FTW_ERR_DRAINED, name, info.peer);
    if ((info.kind == FTW_OP_SEND || info.kind == FTW_OP_SSEND) &&
        ftw_req_fate(c, &info, 0, &bad) != FTW_FATE_LIVE)
        return ftw_raise(info.comm, FTW_ERR_PROC_FAIL_STOP, name, info.peer);
    return MPI_SUCCESS;
}

int ftw_start(MPI_Request *req)
{
    int rc;

    ftw_wrap_check();
    rc = start_refused(*req, "MPI_Start");
    if (rc == MPI_SUCCESS)
        rc = ftw_bsend_started(1, req, "MPI_Start");
    if (rc != MPI_SUCCESS || ftw_rndv_min == 0)
        return rc != MPI_SUCCESS ? rc : PMPI_Start(req);
    /* The stash looked at and the receive started in one section against
     * a probe taking messages into the stash (threads). */
    ftw_stash_post_begin();
    rc = ftw_rndv_start(req, "MPI_Start");
    if (rc == FTW_PENDING_CODE)
        rc = PMPI_Start(req);
    ftw_stash_post_end();
    return rc;
}

/* MPI_Startall while the rendezvous is on: persistent rendezvous sends
 * start their rounds, receives served from the probes' stash stay
 * inactive, the others are started (one by one if the rendezvous took
 * any), in one section against a probe taking messages into the stash. */
static int startall_rndv(int n, MPI_Request reqs[])
{
    unsigned char small[SMALL_N], *mine = small;
    int taken = 0, rc = MPI_SUCCESS;

    if (n > SMALL_N && (mine = malloc((size_t)n)) == NULL)
        return MPI_ERR_NO_MEM;
    ftw_stash_post_begin();
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
        int r = ftw_rndv_start(&reqs[i], "MPI_Startall");

        mine[i] = r != FTW_PENDING_CODE;
        taken += mine[i];
        if (mine[i])
            rc = r;
    }
    if (taken == 0)
        rc = PMPI_Startall(n, reqs);
    for (int i = 0; taken > 0 && i < n && rc == MPI_SUCCESS; i++)
        if (!mine[i])
            rc = PMPI_Start(&reqs[i]);
    ftw_stash_post_end();
    if (mine != small)
        free(mine);
    return rc;
}

int ftw_startall(int n, MPI_Request reqs[])
{
    int rc0;

    ftw_wrap_check();
    for (int i = 0; i < n; i++) {
        int rc = start_refused(reqs[i], "MPI_Startall");

        if (rc != MPI_SUCCESS)
            return rc;
    }
    if ((rc0 = ftw_bsend_started(n, reqs, "MPI_Startall")) != MPI_SUCCESS)
        return rc0;
    if (ftw_rndv_min == 0)
        return PMPI_Startall(n, reqs);
    return startall_rndv(n, reqs);
}

int ftw_request_get_status(MPI_Request req, int *flag, MPI_Status *status)
{
    ftw_reqinfo_t info;
    int rc;

    ftw_wrap_check();
    if (ftw_rndv_min != 0) {
        ftw_rndv_progress_recvs();
        ftw_rndv_progress();
    }
    rc = PMPI_Request_get_status(req, flag, status);
    if (ftw_rndv_min != 0 && rc == MPI_SUCCESS && *flag)
        ftw_rndv_peek(req, status);
    if (ftw_unlikely(ftw_p2p_moved) && rc == MPI_SUCCESS && *flag &&
        ftw_req_lookup(req, &info))
        ftw_status_to_user(info.p2p_user, info.p2p_n, status);
    return rc;
}

/* A rendezvous request the application lets go while the MPI may still
 * write what it owns (the FIN word, the scratch header): driven to its
 * end by the rendezvous layer, which frees that memory then. */
static int free_rndv(MPI_Request *req)
{
    ftw_reqinfo_t info;

    if (!ftw_req_lookup(*req, &info) || !info.rndv || info.persistent ||
        !ftw_req_remove(*req, &info))
        return 0;
    /* The record is out of the table, and what it owned is this
     * function's: to an orphan, or to the loose requests. */
    if (!ftw_rndv_orphan(*req, &info))
        ftw_rndv_loose_add(*req, info.owned);
    *req = MPI_REQUEST_NULL;
    return 1;
}

/* A rendezvous send's request is its FIN receive: cancelling that would
 * leave the receiver pulling from a buffer handed back, so the cancel
 * fails, as MPI allows (the send completes when the receiver is done). */
int ftw_cancel(MPI_Request *req)
{
    ftw_reqinfo_t info;

    ftw_wrap_check();
    if (ftw_rndv_min != 0 && req != NULL && ftw_req_lookup(*req, &info) &&
        (info.rndv & FTW_RNDV_SEND))
        return MPI_SUCCESS;
    return ftw_req_cancel(req);
}

int ftw_request_free(MPI_Request *req)
{
    MPI_Request saved = *req;
    int rc;

    ftw_wrap_check();
    ftw_bsend_forget(*req);
    if (ftw_rndv_min != 0 && (ftw_rndv_psend_release(req) || free_rndv(req)))
        return MPI_SUCCESS;
    rc = ftw_req_free(req);
    if (rc == MPI_SUCCESS)
        ftw_req_del(saved);
    return rc;
}
