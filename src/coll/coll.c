/* Collectives and communicator creation that never hang on a failure. */
#include "coll/coll.h"

#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "recover/agree.h"
#include "buf/cut.h"
#include "core/ft.h"
#include "op/op.h"
#include "core/xjob.h"
#include "core/lock.h"
#include "buf/quarantine.h"
#include "core/revoke.h"
#include "util/log.h"
#include "ftw_mpi_have.h"

static int failures_known(void)
{
    return atomic_load_explicit(&ftw_fail_epoch, memory_order_relaxed) != 0;
}

/* ftw_coll_begin without raising: 1 if the communicator is inactive. */
static int coll_begin_quiet(ftw_coll_t *co, const char *name, MPI_Comm comm)
{
    ftw_wrap_check();
    ftw_inject(FTW_INJECT_COLL);
    co->name = name;
    co->comm = comm;
    co->native = comm;
    co->rotated = 0;
    co->rc = MPI_SUCCESS;
    co->req = MPI_REQUEST_NULL;
    co->owned = NULL;
    co->shield = NULL;
    co->rspan.kind = FTW_RSPAN_NONE;
    co->gen = 0;
    co->cut_seq = ftw_cut_seq;
    co->c = NULL;
    co->refused_unagreed = 0;
    co->same_members = 0;
    ftw_revoke_check();
    if (ftw_likely(!failures_known() && !ftw_revoked_count))
        return 0;
    co->c = ftw_comm_get(comm);
    if (co->c == NULL)
        return 0;
    ftw_comm_refresh(co->c);
    co->gen = co->c->coll_gen;
    co->native = co->c->coll;
    co->rotated = co->c->surv != NULL;
    return !co->c->coll_active || co->c->revoked;
}

int ftw_coll_begin(ftw_coll_t *co, const char *name, MPI_Comm comm)
{
    if (!coll_begin_quiet(co, name, comm))
        return 0;
    co->rc = ftw_raise(comm, ftw_coll_code(co->c), name, -1);
    return 1;
}

/* The bytes the collective may write here: 0 if none or unknown. */
static int coll_span(const ftw_coll_t *co, const void **buf_p,
                     MPI_Count *count_p, MPI_Datatype *dt_p)
{
    const ftw_rspan_t *r = &co->rspan;
    MPI_Count n = 0, lb, ext;
    int rank, size, inter;

    if (r->kind == FTW_RSPAN_NONE || r->buf == NULL || r->buf == MPI_IN_PLACE)
        return 0;
    PMPI_Comm_test_inter(co->comm, &inter);
    if (inter)
        return 0;
    PMPI_Comm_rank(co->comm, &rank);
    PMPI_Comm_size(co->comm, &size);
    if ((r->root >= 0 && rank != r->root) || (r->root <= -2 &&
                                                rank == -r->root - 2))
        return 0;
    *dt_p = r->dt;
    switch (r->kind) {
    case FTW_RSPAN_PLAIN:
        n = r->count * (r->scaled ? size : 1);
        break;
    case FTW_RSPAN_V:
        for (int i = 0; i < size; i++)
            if ((MPI_Count)r->displs[i] + r->counts[i] > n)
                n = (MPI_Count)r->displs[i] + r->counts[i];
        break;
    case FTW_RSPAN_W:
        for (int i = 0; i < size; i++) {
            PMPI_Type_get_extent_x(r->dts[i], &lb, &ext);
            if (r->displs[i] + r->counts[i] * (lb + ext) > n)
                n = r->displs[i] + r->counts[i] * (lb + ext);
        }
        *dt_p = MPI_BYTE;
        break;
    case FTW_RSPAN_MINE:
        n = r->counts[rank];
        break;
    }
    *buf_p = r->buf;
    *count_p = n;
    return n > 0;
}

/* Quarantine what an abandoned collective may still write (nothing of
 * the program's if it runs over a private copy). */
static unsigned coll_quarantine(const ftw_coll_t *co)
{
    const void *buf;
    MPI_Count n;
    MPI_Datatype dt;

    return co->shield == NULL && coll_span(co, &buf, &n, &dt) ?
           ftw_quarantine_add(buf, n, dt) : 0;
}

/* Does a failure end this collective with a call of the program's error
 * handler or a return, rather than the job? */
static int coll_errors_return(const ftw_coll_t *co)
{
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    int ret;

    if (PMPI_Comm_get_errhandler(co->comm, &eh) != MPI_SUCCESS)
        return 1;
    ret = eh != MPI_ERRORS_ARE_FATAL;
#if defined(MPI_ERRORS_ABORT)
    ret = ret && eh != MPI_ERRORS_ABORT;
#endif
    PMPI_Errhandler_free(&eh);
    return ret;
}

/* The private copies of one thread, kept between its collectives (a
 * fresh allocation of megabytes each time cost more in page faults than
 * the copies themselves); one a cut collective leaves to the graveyard is
 * not reused.  Copies above FTW_SHIELD_KEEP are allocated per call. */
#define FTW_SHIELD_KEEP ((size_t)64 << 20)
static FTW_TLS char *shield_cache;
static FTW_TLS size_t shield_cache_len;

static char *shield_get(size_t len)
{
    char *p;

    if (len > FTW_SHIELD_KEEP)
        return malloc(len);
    if (shield_cache_len >= len) {
        p = shield_cache;
        shield_cache = NULL;
        shield_cache_len = 0;
        return p;
    }
    free(shield_cache);
    shield_cache = NULL;
    shield_cache_len = 0;
    return malloc(len);
}

static void shield_put(char *p, size_t len)
{
    if (len > FTW_SHIELD_KEEP || shield_cache_len >= len) {
        free(p);
        return;
    }
    free(shield_cache);
    shield_cache = p;
    shield_cache_len = len;
}

int ftw_coll_out(ftw_coll_t *co, void **buf_p, int blocking, int input)
{
    const void *buf;
    const char *lo, *hi;
    MPI_Count n, size = 0;
    MPI_Datatype dt;
    int shield;

    if (co->rspan.kind == FTW_RSPAN_NONE || *buf_p == MPI_BOTTOM)
        return 0;
    shield = blocking && input != FTW_OUT_WIDER && coll_errors_return(co);
    if ((!shield && !ftw_quarantine_count) || !coll_span(co, &buf, &n, &dt) ||
        ftw_buffer_span(buf, n, dt, &lo, &hi) != MPI_SUCCESS || lo >= hi)
        return 0;
    if (ftw_quarantine_count &&
        ftw_quarantine_overlaps(lo, (size_t)(hi - lo))) {
        ftw_error("%s: the receive buffer [%p, %p) may still be written by "
                  "an operation a failure cut", co->name, (const void *)lo,
                  (const void *)hi);
        co->rc = ftw_raise(co->comm, FTW_ERR_BUFFER_UNUSABLE, co->name, -1);
        return 1;
    }
    if (!shield || (co->shield = shield_get((size_t)(hi - lo))) == NULL)
        return 0;
    /* In as well as out where the span holds input (MPI_IN_PLACE), bytes
     * the collective leaves as they are (an exclusive scan's at rank 0,
     * excluded ranks' slots after a validate), or bytes it does not write
     * (gaps of a datatype, blocks between displacements). */
    if (input == FTW_OUT_KEEP || co->rotated ||
        co->rspan.kind != FTW_RSPAN_PLAIN ||
        ftw_type_size(dt, &size) != MPI_SUCCESS || n * size != hi - lo)
        memcpy(co->shield, lo, (size_t)(hi - lo));
    co->shield_lo = (char *)lo;
    co->shield_len = (size_t)(hi - lo);
    *buf_p = co->shield + ((const char *)*buf_p - lo);
    return 0;
}

/* The native collective finished: its output goes where the program
 * asked for it. */
static void coll_unshield(ftw_coll_t *co)
{
    if (co->shield == NULL)
        return;
    memcpy(co->shield_lo, co->shield, co->shield_len);
    shield_put(co->shield, co->shield_len);
    co->shield = NULL;
}

/* Has the communicator lost a process since the collective started? */
static int coll_cut_off(ftw_coll_t *co)
{
    if (co->c == NULL)
        co->c = ftw_comm_get(co->comm);
    if (co->c == NULL)
        return 0;
    ftw_comm_refresh(co->c);
    return co->c->coll_gen != co->gen;
}

/* The collective completed: did a member's death cut what it copied? */
static int coll_cut(ftw_coll_t *co)
{
    if (ftw_likely(ftw_cut_seq == co->cut_seq))
        return MPI_SUCCESS;
    if (co->c == NULL)
        co->c = ftw_comm_get(co->comm);
    if (!ftw_cut_since(co->cut_seq, co->c))
        return MPI_SUCCESS;
    ftw_warn("%s: a member died while the MPI copied its data; the "
             "result is incomplete", co->name);
    return ftw_raise(co->comm, FTW_ERR_PROC_FAIL_STOP, co->name, -1);
}

int ftw_coll_wait(ftw_coll_t *co, int rc)
{
    ftw_poll_t p;

    if (rc != MPI_SUCCESS) {
        free(co->owned);
        if (co->shield != NULL)
            shield_put(co->shield, co->shield_len);
        return ftw_is_own_error(rc) ? ftw_raise(co->comm, rc, co->name, -1)
                                    : rc;
    }
    ftw_poll_init(&p);
    for (;;) {
        int flag = 0;

        rc = PMPI_Test(&co->req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag) {
            free(co->owned);
            coll_unshield(co);
            return rc == MPI_SUCCESS ? coll_cut(co) : rc;
        }
        if (ftw_poll_changed(&p) && coll_cut_off(co)) {
            if (ftw_req_test_briefly(&co->req, MPI_STATUS_IGNORE)) {
                free(co->owned);
                coll_unshield(co);
                return coll_cut(co);
            }
            /* The MPI may still use the request and its memory. */
            if (co->shield != NULL)
                ftw_grave_add_shielded(co->req, co->owned, co->shield);
            else
                ftw_grave_add_full(co->req, co->owned, coll_quarantine(co));
            return ftw_raise(co->comm, ftw_coll_code(co->c), co->name, -1);
        }
        ftw_poll_idle(&p);
    }
}

/* counts with 0 wherever its type (types[i], or types[0] for all) has
 * size 0: the original, or a copy in slot of co->owned. */
static const int *zero_counts(ftw_coll_t *co, const int *counts,
                              const MPI_Datatype *types, int per_peer, int n,
                              int slot)
{
    int *copy = NULL, size = 1;

    if (!per_peer && (PMPI_Type_size(types[0], &size) != MPI_SUCCESS ||
                      size != 0))
        return counts;
    for (int i = 0; i < n; i++) {
        if (counts[i] == 0 || (per_peer && (PMPI_Type_size(types[i], &size)
                                            != MPI_SUCCESS || size != 0)))
            continue;
        if (copy == NULL) {
            if (co->owned == NULL &&
                (co->owned = malloc(sizeof(int) * 2 * (size_t)n)) == NULL)
                return counts;
            copy = (int *)co->owned + (size_t)slot * (size_t)n;
            memcpy(copy, counts, sizeof(int) * (size_t)n);
        }
        copy[i] = 0;
    }
    return copy != NULL ? copy : counts;
}

void ftw_coll_zero_types(ftw_coll_t *co, const void *sendbuf,
                         const int **scounts, const MPI_Datatype *stypes,
                         const int **rcounts, const MPI_Datatype *rtypes,
                         int per_peer)
{
    int n = 0, inter = 0;

    PMPI_Comm_test_inter(co->native, &inter);
    if (inter)
        PMPI_Comm_remote_size(co->native, &n);
    else
        PMPI_Comm_size(co->native, &n);
    if (sendbuf != MPI_IN_PLACE && *scounts != NULL)
        *scounts = zero_counts(co, *scounts, stypes, per_peer, n, 0);
    if (*rcounts != NULL)
        *rcounts = zero_counts(co, *rcounts, rtypes, per_peer, n, 1);
}

int ftw_coll_posted(ftw_coll_t *co, int rc, MPI_Request *request)
{
    ftw_reqinfo_t info = { .comm = co->comm, .peer = FTW_NO_PEER,
                           .peer2 = FTW_NO_PEER, .kind = FTW_OP_COLL,
                           .coll_gen = co->gen, .cut_seq = co->cut_seq,
                           .owned = co->owned };

    if (rc == MPI_SUCCESS &&
        coll_span(co, (const void **)&info.buf, &info.count, &info.dt) == 0)
        info.buf = NULL;
    if (rc != MPI_SUCCESS) {
        free(co->owned);
        *request = MPI_REQUEST_NULL;
        return ftw_is_own_error(rc) ? ftw_raise(co->comm, rc, co->name, -1)
                                    : rc;
    }
    if (strstr(co->name, "_init") != NULL)
        ftw_req_mark_testall_unsafe();     /* a persistent collective */
    ftw_req_add(*request, &info);
    return rc;
}

int ftw_coll_unsupported(ftw_coll_t *co)
{
    ftw_error("%s: large-count collectives are not supported on a "
              "communicator whose failed processes were excluded",
              co->name);
    return ftw_raise(co->comm, MPI_ERR_UNSUPPORTED_OPERATION, co->name, -1);
}

/* ---- communicator creation ---------------------------------------------- */

/* The parent's record, looked up once. */
static ftw_comm_t *create_parent(ftw_coll_t *co)
{
    if (co->c == NULL)
        co->c = ftw_comm_get(co->comm);
    return co->c;
}

int ftw_create_begin(ftw_coll_t *co, const char *name, MPI_Comm parent,
                     int any_ranks)
{
    int refused = ftw_coll_begin(co, name, parent);

    /* Every member counts the call, refused or not. */
    co->child_id = ftw_comm_next_id(create_parent(co));
    co->refused_unagreed = refused;
    if (refused)
        return 1;
    if (co->rotated && !any_ranks) {
        ftw_error("%s: the communicator has failed processes; make a "
                  "survivors' communicator first (MPI_Comm_split or "
                  "MPI_Comm_create_group)", name);
        co->rc = ftw_raise(parent, FTW_ERR_PROC_FAIL_STOP, name, -1);
        return 1;
    }
    return 0;
}

int ftw_create_begin_group(ftw_coll_t *co, const char *name, MPI_Comm parent,
                           MPI_Group group, int tag)
{
    MPI_Group all;
    int n, *ranks, *in_parent, bad = -1, inactive;

    inactive = coll_begin_quiet(co, name, parent);
    co->child_id = ftw_comm_next_group_id(create_parent(co), group, tag);
    if (!inactive || co->c == NULL)
        return 0;
    if (co->c->revoked) {
        co->rc = ftw_raise(parent, MPIX_ERR_REVOKED, name, -1);
        return 1;
    }
    /* Only the group's members take part: an inactive parent matters only
     * if one of them failed. */
    PMPI_Group_size(group, &n);
    ranks = malloc(sizeof(int) * (size_t)(n ? n : 1));
    in_parent = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (ranks != NULL && in_parent != NULL) {
        for (int i = 0; i < n; i++)
            ranks[i] = i;
        PMPI_Comm_group(parent, &all);
        PMPI_Group_translate_ranks(group, n, ranks, all, in_parent);
        PMPI_Group_free(&all);
        for (int i = 0; i < n && bad < 0; i++)
            if (ftw_comm_peer_failed(co->c, in_parent[i]))
                bad = in_parent[i];
    }
    free(ranks);
    free(in_parent);
    if (bad < 0)
        return 0;
    co->rc = ftw_raise(parent, FTW_ERR_PROC_FAIL_STOP, name, bad);
    return 1;
}

/* Wait for co->req, a creation's nonblocking step, as a blocking
 * collective: its result, or FTW_PENDING_CODE if a member's failure made
 * it give up (the request and owned, memory the MPI may still write, are
 * the graveyard's then). */
static int create_watch(ftw_coll_t *co, void *owned)
{
    ftw_poll_t p;
    int rc;

    ftw_poll_init(&p);
    for (;;) {
        int flag = 0;

        rc = PMPI_Test(&co->req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag)
            return rc;
        if (ftw_poll_changed(&p) && coll_cut_off(co)) {
            if (ftw_req_test_briefly(&co->req, MPI_STATUS_IGNORE))
                return MPI_SUCCESS;
            ftw_grave_add_owned(co->req, owned);
            return FTW_PENDING_CODE;
        }
        ftw_poll_idle(&p);
    }
}

/* Open MPI 4.1 runs an MPI_Comm_idup's steps as nonblocking collectives
 * on the parent, started as progress reaches them: a nonblocking
 * collective of ftwrap's on the parent (the barrier before a duplicate,
 * the split's gather) may overtake one of them on some processes and not
 * on others, and the MPI's next context id is then never agreed (MPICH's
 * comm/comm_idup_comm hung in 1 run of 2).  Once a communicator was
 * duplicated that way its duplicates and splits are the MPI's own calls,
 * which wait for the pending duplicates first. */
static int idup_seen(ftw_coll_t *co)
{
    ftw_comm_t *c = create_parent(co);

    return c != NULL && c->idup_seen;
}

/* The parent has no member but this process. */
static int create_alone(ftw_coll_t *co)
{
    int n = 0;

    return PMPI_Comm_size(co->native, &n) == MPI_SUCCESS && n == 1;
}

int ftw_create_dup(ftw_coll_t *co, MPI_Info info, MPI_Comm *newcomm)
{
    MPI_Comm *slot;
    int blocking, inter = 0, alone, watch, rc;

    /* Intercommunicators take no agreement, and Open MPI 4.1's
     * nonblocking duplicate of one races with traffic on it.  Open MPI
     * 4.1 allocates context ids one creation at a time, lowest (parent,
     * tag) first: a duplicate given up would hold up the process's later
     * creations (validate's survivors' communicator included) until
     * ftw_comm_creation_release lets them go.  The blocking call stays
     * once the program's own nonblocking duplicates of the parent were
     * seen (their steps may still be pending: idup_seen). */
    PMPI_Comm_test_inter(co->native, &inter);
    /* A communicator of this process alone has no member to wait for.
     * (Under MPI_THREAD_MULTIPLE MPICH 4.0's nonblocking duplicate of one,
     * as of MPI_COMM_SELF, takes turns for a context id with other
     * threads' blocking creations so slowly that its test/mpi
     * threads/comm/comm_create_group_threads runs minutes instead of
     * seconds; the duplicate of a larger communicator does not.) */
    alone = !inter && create_alone(co);
    blocking = inter || alone;
#if defined(OPEN_MPI)
    blocking = blocking || idup_seen(co);
#endif
#ifndef FTW_HAVE_MPI_COMM_IDUP_WITH_INFO
    if (info != MPI_INFO_NULL)
        blocking = 1;
#endif
    /* The duplicate's record copies the parent's members. */
    co->same_members = 1;
    if (blocking) {
        /* A watched barrier first: a member that died before the
         * duplicate (the usual race: the others call it right after)
         * fails it here rather than hanging the MPI's call; one dying
         * during the call itself still does.  Else the native call
         * alone. */
        watch = !inter && !alone && !idup_seen(co);
        rc = watch ? PMPI_Ibarrier(co->native, &co->req) : MPI_SUCCESS;
        if (watch && rc == MPI_SUCCESS)
            rc = create_watch(co, NULL);
        if (rc == FTW_PENDING_CODE) {
            *newcomm = MPI_COMM_NULL;
            return ftw_coll_code(co->c);
        }
        if (rc != MPI_SUCCESS) {
            *newcomm = MPI_COMM_NULL;
            return rc;
        }
        ftw_inject(FTW_INJECT_DUP);
        return info != MPI_INFO_NULL ?
               PMPI_Comm_dup_with_info(co->native, info, newcomm) :
               PMPI_Comm_dup(co->native, newcomm);
    }
    /* The MPI writes the handle when it likes: into memory of ours, which
     * an abandoned duplicate keeps until the MPI lets go of it. */
    slot = malloc(sizeof(*slot));
    if (slot == NULL) {
        ftw_error("%s: out of memory", co->name);
        return MPI_ERR_NO_MEM;
    }
    *slot = MPI_COMM_NULL;
    ftw_inject(FTW_INJECT_DUP);
#ifdef FTW_HAVE_MPI_COMM_IDUP_WITH_INFO
    if (info != MPI_INFO_NULL)
        rc = PMPI_Comm_idup_with_info(co->native, info, slot, &co->req);
    else
#endif
        rc = PMPI_Comm_idup(co->native, slot, &co->req);
    if (rc != MPI_SUCCESS) {
        /* As the MPI's MPI_Comm_dup: no communicator (an attribute's
         * copy function failed, MPICH's attr/attrerr). */
        free(slot);
        *newcomm = MPI_COMM_NULL;
        return rc;
    }
    rc = create_watch(co, slot);
    if (rc == FTW_PENDING_CODE) {
        *newcomm = MPI_COMM_NULL;
        /* Not idup_seen: the members that were refused at once never
         * started it, and the parent's collectives and creations move to
         * the survivors' communicator at the next validate anyway. */
        ftw_comm_creation_release();
        return ftw_coll_code(co->c);    /* the graveyard owns slot */
    }
    *newcomm = rc == MPI_SUCCESS ? *slot : MPI_COMM_NULL;
    free(slot);
    return rc;
}

/* (key, rank) pairs of a split, ordered as MPI_Comm_split orders ranks. */
static int split_cmp(const void *a, const void *b)
{
    const int *x = a, *y = b;

    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

int ftw_create_split(ftw_coll_t *co, int color, int key, MPI_Comm *newcomm)
{
    MPI_Group all_g, sub;
    int inter = 0, n, k = 0, rc, *all, *mine, *pairs, *ranks;

    /* Intercommunicators split by their own rules; a color the MPI would
     * refuse is refused by it. */
    PMPI_Comm_test_inter(co->native, &inter);
    if (inter || (color < 0 && color != MPI_UNDEFINED) || idup_seen(co))
        return PMPI_Comm_split(co->native, color, key, newcomm);
    PMPI_Comm_size(co->native, &n);
    /* One block the MPI may write into until the gather ends, which an
     * abandoned gather leaves to the graveyard: everyone's (color, key),
     * then this process's, then room for the sort. */
    all = malloc(sizeof(int) * (size_t)(2 * n + 2 + 2 * n + n));
    if (all == NULL) {
        ftw_error("%s: out of memory", co->name);
        return MPI_ERR_NO_MEM;
    }
    mine = all + 2 * n;
    pairs = mine + 2;
    ranks = pairs + 2 * n;
    mine[0] = color;
    mine[1] = key;
    rc = PMPI_Iallgather(mine, 2, MPI_INT, all, 2, MPI_INT, co->native,
                         &co->req);
    if (rc == MPI_SUCCESS)
        rc = create_watch(co, all);
    if (rc == FTW_PENDING_CODE) {
        *newcomm = MPI_COMM_NULL;
        return ftw_coll_code(co->c);
    }
    if (rc != MPI_SUCCESS || color == MPI_UNDEFINED) {
        free(all);
        *newcomm = MPI_COMM_NULL;
        return rc;
    }
    for (int r = 0; r < n; r++)
        if (all[2 * r] == color) {
            pairs[2 * k] = all[2 * r + 1];
            pairs[2 * k + 1] = r;
            k++;
        }
    qsort(pairs, (size_t)k, 2 * sizeof(int), split_cmp);
    for (int i = 0; i < k; i++)
        ranks[i] = pairs[2 * i + 1];
    /* Every member is alive as of the gather: only the members of this
     * color take part from here. */
    PMPI_Comm_group(co->native, &all_g);
    PMPI_Group_incl(all_g, k, ranks, &sub);
    rc = PMPI_Comm_create_group(co->native, sub, FTW_SPLIT_TAG, newcomm);
    if (rc == MPI_SUCCESS) {
        /* A split keeps its parent's error handler; MPICH's
         * MPI_Comm_create_group gives the default. */
        MPI_Errhandler eh;

        if (PMPI_Comm_get_errhandler(co->comm, &eh) == MPI_SUCCESS) {
            PMPI_Comm_set_errhandler(*newcomm, eh);
            PMPI_Errhandler_free(&eh);
        }
    }
    PMPI_Group_free(&sub);
    PMPI_Group_free(&all_g);
    free(all);
    return rc;
}

/* The creation's agreement on parent: 1 if every member made it.  Once
 * this process's proposal is out, it tracks *newcomm (when made here: it
 * would track it next anyway) while the others' travel; track() is then
 * called with arg. */
static int create_agree(ftw_comm_t *parent, int ok,
                        void (*track)(void *arg), void *arg)
{
    ftw_agree_t *a;
    int all_ok = 0;
    int posted = ftw_agree_post(parent, NULL, ok, &a) == MPI_SUCCESS;

    if (track != NULL)
        track(arg);
    /* Only the flag is needed; a member short of memory for the
     * agreement fails it everywhere. */
    if (posted && ftw_agree_wait(a, NULL, &all_ok) != MPI_SUCCESS)
        all_ok = 0;
    return all_ok;
}

/* Whether a creation from parent ends with an agreement over its members:
 * not on an intercommunicator (agreements run over one group of
 * processes, ftw_agree_start). */
static int create_agrees(const ftw_comm_t *parent)
{
    return parent != NULL && parent->id != 0 && !parent->is_inter;
}

int ftw_create_refused(ftw_coll_t *co, int agree)
{
    ftw_comm_t *parent = create_parent(co);

    /* Refused for a failure or revocation that other members may not know
     * of yet: they are in the MPI's call, to end it when they learn, and
     * then in the creation's agreement, which needs this process's no. */
    if (agree && co->refused_unagreed && create_agrees(parent))
        create_agree(parent, 0, NULL, NULL);
    return co->rc;
}

/* The gate's flag bits, ANDed over the members: a member clears GATE_OK
 * to stop the call, and GATE_ARGS_OK too when the root's arguments are
 * what is wrong. */
#define GATE_OK 1
#define GATE_ARGS_OK 2

int ftw_spawn_bad(ftw_coll_t *co, int count, char **commands,
                  const char *command, int root)
{
    int rank = -1;

    if (PMPI_Comm_rank(co->comm, &rank) != MPI_SUCCESS || rank != root)
        return 0;
    for (int i = 0; i < count; i++) {
        const char *cmd = commands != NULL ? commands[i] : command;

        if (cmd != NULL && cmd[0] != '\0')
            continue;
        ftw_error("%s: the command to start is %s", co->name,
                  cmd == NULL ? "NULL" : "empty");
        co->rc = ftw_raise(co->comm, MPI_ERR_SPAWN, co->name, -1);
        return FTW_GATE_BAD_ARGS;
    }
    return 0;
}

int ftw_gate_refused(ftw_coll_t *co, MPI_Comm *newcomm, int root,
                     int count, const int *maxprocs, int *errcodes)
{
    int rank = -1, k = 0;

    if (newcomm != NULL)
        *newcomm = MPI_COMM_NULL;
    if (count == 0 || errcodes == MPI_ERRCODES_IGNORE ||
        PMPI_Comm_rank(co->comm, &rank) != MPI_SUCCESS || rank != root)
        return co->rc;
    for (int i = 0; i < count; i++)
        for (int j = 0; j < maxprocs[i]; j++)
            errcodes[k++] = co->rc;
    return co->rc;
}

int ftw_create_gate(ftw_coll_t *co, int refused)
{
    ftw_comm_t *parent = create_parent(co);
    uint8_t small[64], *failed;
    int flags = 0, bad = -1, blind, rc;

    if (!create_agrees(parent))
        return refused;
    failed = parent->size < (int)sizeof(small) ?
             small : ftw_agree_malloc((size_t)parent->size + 1);
    blind = failed == NULL;
    /* Out of memory, this process still takes part (a member missing
     * from the agreement would hold up the others): the shortage goes
     * into its proposal, and every member fails the call with
     * MPI_ERR_NO_MEM. */
    rc = ftw_agree(parent, NULL, refused == 0 && !blind ?
                   GATE_OK | GATE_ARGS_OK :
                   refused == FTW_GATE_BAD_ARGS ? 0 : GATE_ARGS_OK, failed,
                   &flags);
    if (rc != MPI_SUCCESS)
        flags = GATE_ARGS_OK;
    for (int i = 0; failed != NULL && i < parent->size && bad < 0; i++)
        if (failed[i] & 1)
            bad = i;
    if (failed != small)
        free(failed);
    if (refused)
        return 1;
    if ((flags & GATE_OK) && bad < 0 && !blind)
        return 0;
    if (rc == MPI_ERR_NO_MEM) {
        co->rc = ftw_raise(co->comm, MPI_ERR_NO_MEM, co->name, -1);
        return 1;
    }
    if (!(flags & GATE_ARGS_OK)) {
        ftw_error("%s: the root's arguments are not valid", co->name);
        co->rc = ftw_raise(co->comm, MPI_ERR_SPAWN, co->name, -1);
        return 1;
    }
    if (ftw_comm_is_revoked_now(parent)) {
        co->rc = ftw_raise(co->comm, MPIX_ERR_REVOKED, co->name, -1);
        return 1;
    }
    if (bad < 0)
        ftw_error("%s: another member refused the call (it knew of a "
                  "failure or a revocation)", co->name);
    co->rc = ftw_raise(co->comm, FTW_ERR_PROC_FAIL_STOP, co->name, bad);
    return 1;
}

struct create_track {
    ftw_coll_t *co;
    ftw_comm_t *parent;
    MPI_Comm comm;
};

/* The calls whose intercommunicator joins this job to another. */
static int create_joins_jobs(const char *name)
{
    return strcmp(name, "MPI_Comm_spawn") == 0 ||
           strcmp(name, "MPI_Comm_spawn_multiple") == 0 ||
           strcmp(name, "MPI_Comm_accept") == 0 ||
           strcmp(name, "MPI_Comm_connect") == 0;
}

static void create_track(void *arg)
{
    struct create_track *t = arg;
    ftw_coll_t *co = t->co;
    uint64_t id = co->child_id;
    int inter = 0;

    /* An intercommunicator made from an intracommunicator
     * (MPI_Intercomm_create): each group counted the call on its own
     * parent, so the two groups agree on an id instead. */
    if (id != 0 && t->comm != MPI_COMM_NULL &&
        (t->parent == NULL || !t->parent->is_inter) &&
        PMPI_Comm_test_inter(t->comm, &inter) == MPI_SUCCESS && inter)
        id = 0;
    ftw_comm_track(t->comm, id != 0 ? id : ftw_comm_agreed_id(t->comm),
                   co->same_members ? t->parent : NULL);
}

int ftw_create_end(ftw_coll_t *co, int rc, MPI_Comm *newcomm, int agree,
                   int collective)
{
    ftw_comm_t *parent = create_parent(co);
    struct create_track t = { co, parent,
                              rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL };
    int tracked = 0;

    if (agree && create_agrees(parent)) {
        int all_ok;

        /* Only collective creations agree (a nonblocking one is expected,
         * not tracked, below). */
        tracked = collective && rc == MPI_SUCCESS;
        all_ok = create_agree(parent, rc == MPI_SUCCESS,
                              tracked ? create_track : NULL, &t);
        if (!all_ok && rc == MPI_SUCCESS) {
            /* Made here but not everywhere: nowhere, then. */
            if (*newcomm != MPI_COMM_NULL) {
                if (tracked)
                    ftw_comm_untrack(*newcomm);
                PMPI_Comm_free(newcomm);
            }
            return ftw_raise(co->comm, FTW_ERR_PROC_FAIL_STOP, co->name, -1);
        }
    }
    if (rc != MPI_SUCCESS)
        return ftw_is_own_error(rc) ? ftw_raise(co->comm, rc, co->name, -1)
                                    : rc;
    if (!collective) {
        ftw_comm_expect(*newcomm, co->child_id);
#if defined(OPEN_MPI)
        if (parent != NULL)
            parent->idup_seen = 1;
#endif
    }
    else if (!tracked) {
        if (create_joins_jobs(co->name))
            ftw_xjob_exchange(*newcomm, co->name);
        create_track(&t);
    }
    return rc;
}

int ftw_create_orphan(int rc, MPI_Comm *newcomm, int collective)
{
    if (rc != MPI_SUCCESS || !ftw_initialized())
        return rc;
    if (collective)
        ftw_xjob_exchange(*newcomm, "MPI_Comm_join");
    ftw_comm_track(*newcomm, collective ? ftw_comm_agreed_id(*newcomm) : 0,
                   NULL);
    return rc;
}

int ftw_barrier_watched(MPI_Comm comm, const char *name)
{
    ftw_coll_t co;

    if (ftw_coll_begin(&co, name, comm))
        return co.rc;
    if (co.rotated)
        return ftw_coll_wait(&co, ftw_xcoll_ibarrier(&co, &co.req));
    return ftw_coll_wait(&co, PMPI_Ibarrier(co.native, &co.req));
}

int ftw_comm_disconnect(MPI_Comm *comm)
{
    MPI_Comm old = comm != NULL ? *comm : MPI_COMM_NULL;
    int rc;

    ftw_wrap_check();
    if (old == MPI_COMM_NULL || old == MPI_COMM_WORLD || old == MPI_COMM_SELF)
        return PMPI_Comm_disconnect(comm);      /* the MPI's own error */
    rc = ftw_barrier_watched(old, "MPI_Comm_disconnect");
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Comm_disconnect(comm);
        if (rc == MPI_SUCCESS)
            ftw_comm_released(old);
        return rc;
    }
    /* The others may never come: what the MPI still holds of the
     * communicator stays with it, the handle is gone. */
    if (PMPI_Comm_free(comm) == MPI_SUCCESS)
        ftw_comm_released(old);
    return rc;
}
