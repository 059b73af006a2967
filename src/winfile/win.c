/* Windows under failures (see win.h). */
#include "winfile/win.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "detect/detect.h"
#include "recover/agree.h"
#include "core/comm.h"
#include "core/ctl.h"
#include "core/ft.h"
#include "core/lock.h"
#include "winfile/members.h"
#include "core/request.h"
#include "util/log.h"

struct ftw_win {
    MPI_Win user;           /* key: the handle the application holds */
    MPI_Win native;         /* the window traffic runs on */
    MPI_Comm comm;          /* ftwrap's duplicate of the creation
                             * communicator: the members, in window rank
                             * order */
    void *base;             /* this process's memory, for a re-made */
    MPI_Aint size;          /* window */
    MPI_Aint disp_unit;
    int dynamic;            /* MPI_Win_create_dynamic: cannot be re-made */
    uint32_t epoch_checked; /* failure epoch invalid was computed at */
    int invalid;            /* a member of native failed */
    int nsurv;              /* members of native */
    int *surv_of;           /* [members] rank in native, -1 excluded;
                             * NULL: native is the original */
    ftw_ctl_hdr_t post_note; /* sent by MPI_Win_post to each origin */
    UT_hash_handle hh;
};

_Atomic int ftw_win_moved;

static ftw_win_t *win_table;
static pthread_mutex_t win_lock = PTHREAD_MUTEX_INITIALIZER;

static ftw_win_t *win_find(MPI_Win win)
{
    ftw_win_t *w;

    if (win == MPI_WIN_NULL || win_table == NULL)
        return NULL;
    ftw_mt_lock(&win_lock);
    HASH_FIND(hh, win_table, &win, sizeof(win), w);
    ftw_mt_unlock(&win_lock);
    return w;
}

/* The record of the window's members (the duplicate's). */
static ftw_comm_t *win_members(ftw_win_t *w)
{
    ftw_comm_t *c = ftw_comm_get(w->comm);

    if (c != NULL)
        ftw_comm_refresh(c);
    return c;
}

/* A member of the native window failed (since the creation, or the
 * validate that made it). */
static int win_invalid(ftw_win_t *w)
{
    return ftw_members_invalid(w->comm, w->surv_of, &w->epoch_checked,
                               &w->invalid);
}

static int win_fail(MPI_Win win, const char *name)
{
    return ftw_raise_win(win, FTW_ERR_PROC_FAIL_STOP, name);
}

/* Rank in the native window of member r, or FTW_EXCLUDED if it was
 * excluded (MPI_PROC_NULL is kept). */
static int win_rank(const ftw_win_t *w, int r)
{
    if (w->surv_of == NULL || r < 0)
        return r;
    return r < ftw_comm_get(w->comm)->size && w->surv_of[r] >= 0 ?
           w->surv_of[r] : FTW_EXCLUDED;
}

/* The members' ranks of group's processes (MPI_UNDEFINED for one not a
 * member), *n of them; NULL when out of memory or group is null. */
static int *group_members(ftw_win_t *w, MPI_Group group, int *n)
{
    MPI_Group all;
    int *r, *in;

    *n = 0;
    if (group == MPI_GROUP_NULL)
        return NULL;
    PMPI_Group_size(group, n);
    r = malloc(sizeof(int) * 2 * (size_t)(*n ? *n : 1));
    if (r == NULL)
        return NULL;
    in = r + *n;
    for (int i = 0; i < *n; i++)
        r[i] = i;
    PMPI_Comm_group(w->comm, &all);
    PMPI_Group_translate_ranks(group, *n, r, all, in);
    PMPI_Group_free(&all);
    memmove(r, in, sizeof(int) * (size_t)*n);
    return r;
}

/* 1 if a process of group (members of the window) failed. */
static int group_failed(ftw_win_t *w, MPI_Group group)
{
    ftw_comm_t *c = win_members(w);
    int n, *in, bad = 0;

    if (c == NULL || (in = group_members(w, group, &n)) == NULL)
        return 0;
    for (int i = 0; i < n && !bad; i++)
        bad = in[i] >= 0 && ftw_comm_peer_failed(c, in[i]);
    free(in);
    return bad;
}

int ftw_win_rma_slow(ftw_win_route_t *rt, const char *name, MPI_Win win,
                     int target)
{
    ftw_win_t *w = win_find(win);

    rt->w = w;
    rt->native = win;
    rt->target = target;
    if (w == NULL)
        return 0;
    rt->native = w->native;
    if (win_invalid(w) ||
        (rt->target = win_rank(w, target)) == FTW_EXCLUDED) {
        rt->rc = win_fail(win, name);
        return 1;
    }
    return 0;
}

int ftw_win_req(MPI_Win win, int target, int rc, MPI_Request *req,
                void *rbuf, MPI_Count count, MPI_Datatype dt)
{
    ftw_win_t *w;

    if (rc != MPI_SUCCESS || req == NULL || *req == MPI_REQUEST_NULL ||
        target < 0 || (w = win_find(win)) == NULL)
        return rc;
    /* Watched like a point-to-point request with the target, over the
     * duplicate: its death fails the request's completion; a buffer it
     * writes here is quarantined then. */
    ftw_req_add_quiet(*req, w->comm, target,
                      rbuf != NULL ? FTW_OP_RECV : FTW_OP_SEND, 0, rbuf,
                      count, dt);
    return rc;
}

int ftw_win_refused(ftw_coll_t *co, MPI_Win *win)
{
    if (win != NULL)
        *win = MPI_WIN_NULL;
    return co->rc;
}

int ftw_win_made(ftw_coll_t *co, int rc, MPI_Win *win, void *base,
                 int base_is_ptr, MPI_Aint size, MPI_Aint disp_unit,
                 MPI_Info info)
{
    ftw_win_t *w;
    ftw_comm_t *c;
    MPI_Comm members;
    int lost;

    (void)info;
    if (rc != MPI_SUCCESS)
        return ftw_is_own_error(rc) ? ftw_raise(co->comm, rc, co->name, -1)
                                    : rc;
    ftw_win_count(1);
    /* Every member makes the duplicate, even one out of memory for the
     * record: the others wait in it. */
    w = calloc(1, sizeof(*w));
    members = ftw_members_dup(co, &lost);
    if (lost) {
        /* A member died after the window was made: the survivors fail
         * the call rather than wait for it (the MPI keeps the window,
         * whose release would wait for the dead member too). */
        free(w);
        ftw_win_count(-1);
        *win = MPI_WIN_NULL;
        return ftw_raise(co->comm, FTW_ERR_PROC_FAIL_STOP, co->name, -1);
    }
    if (w != NULL)
        w->comm = members;
    if (w == NULL || members == MPI_COMM_NULL ||
        (c = win_members(w)) == NULL) {
        free(w);
        ftw_error("%s: no record of the window: its calls go to the MPI "
                  "unwatched", co->name);
        return rc;
    }
    w->user = w->native = *win;
    w->base = base_is_ptr ? *(void **)base : base;
    w->dynamic = base == NULL;
    w->size = size;
    w->disp_unit = disp_unit;
    w->epoch_checked = (uint32_t)-1;
    w->nsurv = c->size;
    ftw_mt_lock(&win_lock);
    HASH_ADD(hh, win_table, user, sizeof(w->user), w);
    ftw_mt_unlock(&win_lock);
    return rc;
}

int ftw_win_fence(int assert_, MPI_Win win)
{
    ftw_win_t *w;

    ftw_wrap_check();
    w = win_find(win);
    if (w == NULL)
        return PMPI_Win_fence(assert_, win);
    if (win_invalid(w) ||
        ftw_barrier_watched(w->comm, "MPI_Win_fence") != MPI_SUCCESS)
        return win_fail(win, "MPI_Win_fence");
    return PMPI_Win_fence(assert_, w->native);
}

/* The synchronisations that wait for no other process go through
 * ftw_win_rma like an RMA call (its fast path, the invalid window and the
 * excluded target refused, the rank translated); one with no target
 * names MPI_PROC_NULL. */
#define WIN_ROUTE(name, target)                                             \
    ftw_win_route_t rt;                                                     \
                                                                            \
    ftw_wrap_check();                                                       \
    if (ftw_win_rma(&rt, name, win, target))                                \
        return rt.rc

/*
 * Post/start: the MPI's MPI_Win_start waits inside the MPI for every
 * target's MPI_Win_post, for ever when a target dies before it posts.
 * So each post is announced to its origins on the control channel after
 * the MPI's post returned, and MPI_Win_start first waits, watched, for
 * the note of every target: once all came the MPI's start finds the posts
 * made.  MPI_MODE_NOCHECK, which a program gives on both sides or
 * neither, skips both.
 */
typedef struct {
    uint64_t id;            /* the members' communicator id */
    int from;               /* member rank of the poster; -1: any */
} post_key_t;

static int post_match(const ftw_ctl_hdr_t *hdr, void *arg)
{
    const post_key_t *k = arg;

    return hdr->id == k->id && (k->from < 0 || hdr->round == k->from);
}

static void post_announce(ftw_win_t *w, MPI_Group group)
{
    ftw_comm_t *c = win_members(w);
    MPI_Request *q;
    int n, *to = c != NULL ? group_members(w, group, &n) : NULL;

    if (to == NULL)
        return;
    q = malloc(sizeof(*q) * (size_t)(n ? n : 1));
    if (q == NULL) {
        ftw_error("MPI_Win_post: out of memory to tell the origins; their "
                  "MPI_Win_start fails");
        free(to);
        return;
    }
    w->post_note.id = c->id;
    w->post_note.round = c->rank;
    for (int i = 0; i < n; i++) {
        int r = to[i];

        q[i] = MPI_REQUEST_NULL;
        if (r < 0 || r == c->rank || ftw_comm_peer_failed(c, r))
            to[i] = -1;
        else if (ftw_ctl_isend(c->chan, r, c->peer_world[r], &w->post_note,
                               (int)sizeof(w->post_note), FTW_CTL_TAG_POST,
                               &q[i]) != MPI_SUCCESS)
            to[i] = -1;
    }
    for (int i = 0; i < n; i++)
        if (to[i] >= 0)
            ftw_ctl_send_finish(&q[i], c->peer_world[to[i]]);
    free(q);
    free(to);
}

/* Wait for every target's note; MPI_SUCCESS when all came, else the
 * window's error (a target or another member failed first). */
static int start_wait_posts(ftw_win_t *w, MPI_Group group, MPI_Win win)
{
    ftw_comm_t *c = win_members(w);
    ftw_poll_t p;
    int n, left = 0, *from = c != NULL ? group_members(w, group, &n) : NULL;

    if (from == NULL)
        return MPI_SUCCESS;     /* the MPI's start, unwatched */
    for (int i = 0; i < n; i++) {
        if (from[i] == c->rank)
            from[i] = -1;
        left += from[i] >= 0;
    }
    ftw_poll_init(&p);
    while (left > 0) {
        for (int i = 0; i < n; i++) {
            post_key_t k = { c->id, from[i] };
            ftw_ctl_msg_t *m;

            if (from[i] < 0)
                continue;
            m = ftw_ctl_take(FTW_CTL_TAG_POST, post_match, &k);
            if (m != NULL) {
                free(m);
                from[i] = -1;
                left--;
            }
        }
        if (left > 0 && win_invalid(w)) {
            free(from);
            return win_fail(win, "MPI_Win_start");
        }
        if (left > 0) {
            ftw_poll_changed(&p);
            ftw_poll_idle(&p);
        }
    }
    free(from);
    return MPI_SUCCESS;
}

/* Post and start pair their notes on every tracked window, so they never
 * take the RMA fast path. */
int ftw_win_start(MPI_Group group, int assert_, MPI_Win win)
{
    ftw_win_t *w;
    int rc;

    ftw_wrap_check();
    if ((w = win_find(win)) == NULL)
        return PMPI_Win_start(group, assert_, win);
    if (win_invalid(w) || group_failed(w, group))
        return win_fail(win, "MPI_Win_start");
    if (!(assert_ & MPI_MODE_NOCHECK) &&
        (rc = start_wait_posts(w, group, win)) != MPI_SUCCESS)
        return rc;
    return PMPI_Win_start(group, assert_, w->native);
}

int ftw_win_post(MPI_Group group, int assert_, MPI_Win win)
{
    ftw_win_t *w;
    int rc;

    ftw_wrap_check();
    if ((w = win_find(win)) == NULL)
        return PMPI_Win_post(group, assert_, win);
    if (win_invalid(w) || group_failed(w, group))
        return win_fail(win, "MPI_Win_post");
    rc = PMPI_Win_post(group, assert_, w->native);
    if (rc == MPI_SUCCESS && !(assert_ & MPI_MODE_NOCHECK))
        post_announce(w, group);
    return rc;
}

int ftw_win_complete(MPI_Win win)
{
    WIN_ROUTE("MPI_Win_complete", MPI_PROC_NULL);
    return PMPI_Win_complete(rt.native);
}

int ftw_win_wait(MPI_Win win)
{
    ftw_win_t *w;
    ftw_poll_t p;
    int flag = 0, rc;

    ftw_wrap_check();
    w = win_find(win);
    if (w == NULL)
        return PMPI_Win_wait(win);
    /* The origins' completions, polled: a failure ends the wait. */
    ftw_poll_init(&p);
    for (;;) {
        if (win_invalid(w))
            return win_fail(win, "MPI_Win_wait");
        rc = PMPI_Win_test(w->native, &flag);
        if (rc != MPI_SUCCESS || flag)
            return rc;
        ftw_poll_changed(&p);
        ftw_poll_idle(&p);
    }
}

int ftw_win_test(MPI_Win win, int *flag)
{
    WIN_ROUTE("MPI_Win_test", MPI_PROC_NULL);
    return PMPI_Win_test(rt.native, flag);
}

int ftw_win_lock(int lock_type, int rank, int assert_, MPI_Win win)
{
    WIN_ROUTE("MPI_Win_lock", rank);
    return PMPI_Win_lock(lock_type, rt.target, assert_, rt.native);
}

int ftw_win_unlock(int rank, MPI_Win win)
{
    WIN_ROUTE("MPI_Win_unlock", rank);
    return PMPI_Win_unlock(rt.target, rt.native);
}

int ftw_win_flush(int rank, MPI_Win win)
{
    WIN_ROUTE("MPI_Win_flush", rank);
    return PMPI_Win_flush(rt.target, rt.native);
}

int ftw_win_flush_local(int rank, MPI_Win win)
{
    WIN_ROUTE("MPI_Win_flush_local", rank);
    return PMPI_Win_flush_local(rt.target, rt.native);
}

int ftw_win_lock_all(int assert_, MPI_Win win)
{
    WIN_ROUTE("MPI_Win_lock_all", MPI_PROC_NULL);
    return PMPI_Win_lock_all(assert_, rt.native);
}

int ftw_win_unlock_all(MPI_Win win)
{
    WIN_ROUTE("MPI_Win_unlock_all", MPI_PROC_NULL);
    return PMPI_Win_unlock_all(rt.native);
}

int ftw_win_flush_all(MPI_Win win)
{
    WIN_ROUTE("MPI_Win_flush_all", MPI_PROC_NULL);
    return PMPI_Win_flush_all(rt.native);
}

int ftw_win_flush_local_all(MPI_Win win)
{
    WIN_ROUTE("MPI_Win_flush_local_all", MPI_PROC_NULL);
    return PMPI_Win_flush_local_all(rt.native);
}

/* Local: on the native window, even an invalid one. */
int ftw_win_sync(MPI_Win win)
{
    ftw_win_t *w = atomic_load_explicit(&ftw_win_moved,
                                        memory_order_relaxed) == 0 ?
                   NULL : win_find(win);

    return PMPI_Win_sync(w != NULL ? w->native : win);
}

static void win_forget(ftw_win_t *w)
{
    MPI_Comm old = w->comm;
    ftw_comm_t *c = ftw_comm_get(w->comm);
    ftw_ctl_msg_t *m;

    /* Notes of posts no start took (the program's or a dead origin's). */
    if (c != NULL) {
        post_key_t k = { c->id, -1 };

        while ((m = ftw_ctl_take_parked(FTW_CTL_TAG_POST, post_match,
                                        &k)) != NULL)
            free(m);
    }

    ftw_mt_lock(&win_lock);
    HASH_DEL(win_table, w);
    ftw_mt_unlock(&win_lock);
    if (PMPI_Comm_free(&w->comm) == MPI_SUCCESS)
        ftw_comm_released(old);
    if (w->surv_of != NULL)
        atomic_fetch_sub_explicit(&ftw_win_moved, 1, memory_order_relaxed);
    free(w->surv_of);
    free(w);
    ftw_win_count(-1);
}

int ftw_win_free(MPI_Win *win)
{
    ftw_win_t *w;
    int rc = MPI_SUCCESS;

    ftw_wrap_check();
    w = win != NULL ? win_find(*win) : NULL;
    if (w == NULL) {
        rc = PMPI_Win_free(win);
        if (rc == MPI_SUCCESS)
            ftw_win_count(-1);
        return rc;
    }
    /* The MPI's free is collective: only when every member came.  Else
     * the native windows stay with the MPI (and with them the memory of
     * an allocated one, which a dead member's transfer might still
     * write), and the handle is released here. */
    if (!win_invalid(w) &&
        ftw_barrier_watched(w->comm, "MPI_Win_free") == MPI_SUCCESS)
        rc = PMPI_Win_free(&w->native);
    else
        ftw_info("MPI_Win_free: a member failed; the window is released "
                 "here without the MPI's free");
    win_forget(w);
    *win = MPI_WIN_NULL;
    return rc;
}

/* Make a new native window over survivors (collective over them): its
 * rank of each member is surv_of (taken). */
static int win_remake(ftw_win_t *w, int *surv_of, int nsurv,
                      MPI_Comm survivors)
{
    MPI_Errhandler eh;
    MPI_Win nw = MPI_WIN_NULL;
    int rc = PMPI_Win_create(w->base, w->size, (int)w->disp_unit,
                             MPI_INFO_NULL, survivors, &nw);

    if (rc != MPI_SUCCESS) {
        free(surv_of);
        return rc;
    }
    if (PMPI_Win_get_errhandler(w->user, &eh) == MPI_SUCCESS) {
        PMPI_Win_set_errhandler(nw, eh);
        PMPI_Errhandler_free(&eh);
    }
    /* The window before stays with the MPI: freeing it would wait for the
     * dead. */
    if (w->surv_of == NULL)
        atomic_fetch_add_explicit(&ftw_win_moved, 1, memory_order_relaxed);
    free(w->surv_of);
    w->surv_of = surv_of;
    w->native = nw;
    w->nsurv = nsurv;
    return MPI_SUCCESS;
}

/* After the members' validate: make the window again over the survivors
 * when it excluded processes. */
static int win_validated(ftw_win_t *w, MPI_Group *failed_group)
{
    MPI_Comm survivors;
    int rc, remake, *surv_of, nsurv;

    rc = ftw_members_moved(w->comm, w->nsurv, &remake, &surv_of, &nsurv,
                           &survivors);
    if (rc == MPI_SUCCESS && remake && w->dynamic) {
        ftw_error("FTW_Win_validate: a window of MPI_Win_create_dynamic "
                  "cannot be made again over the survivors");
        free(surv_of);
        rc = MPI_ERR_WIN;
    } else if (rc == MPI_SUCCESS && remake) {
        rc = win_remake(w, surv_of, nsurv, survivors);
    }
    if (rc != MPI_SUCCESS)
        PMPI_Group_free(failed_group);
    w->epoch_checked = (uint32_t)-1;
    return rc;
}

FTW_EXPORT int FTW_Win_validate(MPI_Win win, MPI_Group *failed_group)
{
    ftw_win_t *w;
    int rc;

    ftw_wrap_check();
    w = win_find(win);
    if (w == NULL || failed_group == NULL)
        return ftw_raise_win(win, w == NULL ? MPI_ERR_WIN : MPI_ERR_ARG,
                             "FTW_Win_validate");
    rc = FTW_Comm_validate(w->comm, failed_group);
    if (rc == MPI_SUCCESS)
        rc = win_validated(w, failed_group);
    return rc == MPI_SUCCESS ? rc
                             : ftw_raise_win(win, rc, "FTW_Win_validate");
}

/* FTW_Iwin_validate: the members' nonblocking validate, whose end (in
 * ftwrap's progress, in the order validates started, the same on every
 * member) also makes the window again. */
typedef struct {
    MPI_Win win;
    MPI_Group *failed_group;
} iwin_t;

static int iwin_finish(ftw_comm_t *c, const uint8_t *failed, int flag,
                       void *out)
{
    iwin_t *iw = out;
    ftw_win_t *w = win_find(iw->win);
    int rc = ftw_validate_finish(c, failed, flag, iw->failed_group);

    if (rc == MPI_SUCCESS && w != NULL)
        rc = win_validated(w, iw->failed_group);
    free(iw);
    return rc;
}

FTW_EXPORT int FTW_Iwin_validate(MPI_Win win, MPI_Group *failed_group,
                                 MPI_Request *request)
{
    ftw_win_t *w;
    ftw_comm_t *c;
    uint8_t *failed;
    iwin_t *iw;
    int rc;

    ftw_wrap_check();
    w = win_find(win);
    if (w == NULL || failed_group == NULL || request == NULL)
        return ftw_raise_win(win, w == NULL ? MPI_ERR_WIN : MPI_ERR_ARG,
                             "FTW_Iwin_validate");
    iw = malloc(sizeof(*iw));
    if (iw == NULL)
        return ftw_raise_win(win, MPI_ERR_NO_MEM, "FTW_Iwin_validate");
    iw->win = win;
    iw->failed_group = failed_group;
    rc = ftw_agree_prepare(w->comm, &c, &failed);
    if (rc == MPI_SUCCESS)
        rc = ftw_pending_start(c, iwin_finish, failed, NULL,
                               c->coll_active, iw,
                               request);
    else
        free(iw);
    return rc == MPI_SUCCESS ? rc
                             : ftw_raise_win(win, rc, "FTW_Iwin_validate");
}

FTW_EXPORT int FTW_Win_set_failhandler(MPI_Win win, MPI_Errhandler errhandler)
{
    ftw_win_t *w;

    ftw_wrap_check();
    w = win_find(win);
    if (w == NULL)
        return ftw_raise_win(win, MPI_ERR_WIN, "FTW_Win_set_failhandler");
    return ftw_obj_failhandler_set(&win, NULL, w->comm, errhandler);
}

FTW_EXPORT int FTW_Win_get_failhandler(MPI_Win win,
                                       MPI_Errhandler *errhandler)
{
    ftw_win_t *w;

    ftw_wrap_check();
    w = win_find(win);
    if (w == NULL || errhandler == NULL)
        return ftw_raise_win(win, w == NULL ? MPI_ERR_WIN : MPI_ERR_ARG,
                             "FTW_Win_get_failhandler");
    *errhandler = ftw_obj_failhandler_get(w->comm);
    return MPI_SUCCESS;
}

FTW_EXPORT int FTW_Win_group_failed(MPI_Win win, MPI_Group *failed_group)
{
    ftw_win_t *w;
    ftw_comm_t *c;
    int count;

    ftw_wrap_check();
    w = win_find(win);
    if (w == NULL || failed_group == NULL || (c = win_members(w)) == NULL)
        return ftw_raise_win(win, w == NULL ? MPI_ERR_WIN : MPI_ERR_ARG,
                             "FTW_Win_group_failed");
    if (ftw_comm_failed_group(c, failed_group, &count) != FTW_OK)
        return ftw_raise_win(win, MPI_ERR_NO_MEM, "FTW_Win_group_failed");
    return MPI_SUCCESS;
}

void ftw_win_table_clear(void)
{
    ftw_win_t *w, *tmp;

    ftw_mt_lock(&win_lock);
    HASH_ITER(hh, win_table, w, tmp) {
        HASH_DEL(win_table, w);
        free(w->surv_of);
        free(w);
    }
    ftw_mt_unlock(&win_lock);
}
