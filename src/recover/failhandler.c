/*
 * Failure handlers: an error handler (made by MPI_Comm_create_errhandler)
 * that ftwrap calls, from inside whatever MPI call the process is in, when
 * it learns of new failures.  Handlers run in the order they were
 * registered (the same on every process), never nested; failures learned
 * while a handler runs call the handlers again afterwards.
 *
 * FTW_FAILHANDLER_MODE_ALL calls every handler for every new set of
 * failures, without communication.  FTW_FAILHANDLER_MODE_SUBSET calls
 * only the handlers of communicators that contain a newly failed process,
 * after the members have agreed on the failed set (ftw_agree).
 */
#include <pthread.h>
#include <stdlib.h>
#include <uthash.h>

#include "ftwrap.h"
#include "recover/agree.h"
#include "core/comm.h"
#include "core/ft.h"
#include "core/lock.h"
#include "util/compiler.h"
#include "util/log.h"
#include "util/stats.h"

/* Functions of the error handlers the application created. */
typedef struct {
    MPI_Errhandler key;
    MPI_Comm_errhandler_function *fn;       /* a communicator's, */
    MPI_Win_errhandler_function *wfn;       /* a window's or */
    MPI_File_errhandler_function *ffn;      /* a file's */
    UT_hash_handle hh;
} eh_entry_t;

typedef struct {
    MPI_Comm comm;          /* the communicator, or a window's or a
                             * file's members (members.c's duplicate) */
    MPI_Win win;            /* the window, or MPI_WIN_NULL */
    MPI_File file;          /* the file, or MPI_FILE_NULL */
    MPI_Errhandler eh;
    MPI_Comm_errhandler_function *fn;   /* the one that is not NULL */
    MPI_Win_errhandler_function *wfn;
    MPI_File_errhandler_function *ffn;
    int nfailed;            /* the communicator's failures handled */
} handler_t;

/* fh_lock (core/lock.h) guards the tables and the mode; no handler runs
 * under it.  Handlers run in one thread at a time (fh_running). */
static eh_entry_t *eh_table;
static pthread_mutex_t fh_lock = PTHREAD_MUTEX_INITIALIZER;
static handler_t *handlers;         /* in registration order */
static _Atomic int nhandlers;       /* a gate, read unlocked */
static int cap_handlers;
static int fh_mode = FTW_FAILHANDLER_MODE_ALL;
static int fh_mode_frozen;          /* a handler was registered */
static _Atomic uint32_t handled_epoch;
static _Atomic int fh_running;      /* a thread is running the handlers */

static void errhandler_note(MPI_Errhandler eh,
                            MPI_Comm_errhandler_function *fn,
                            MPI_Win_errhandler_function *wfn,
                            MPI_File_errhandler_function *ffn)
{
    eh_entry_t *e = malloc(sizeof(*e)), *old;

    if (e == NULL)
        return;
    e->key = eh;
    e->fn = fn;
    e->wfn = wfn;
    e->ffn = ffn;
    ftw_mt_lock(&fh_lock);
    HASH_FIND(hh, eh_table, &eh, sizeof(eh), old);
    if (old != NULL) {
        HASH_DEL(eh_table, old);
        free(old);
    }
    HASH_ADD(hh, eh_table, key, sizeof(e->key), e);
    ftw_mt_unlock(&fh_lock);
}

void ftw_errhandler_note(MPI_Errhandler eh, MPI_Comm_errhandler_function *fn)
{
    errhandler_note(eh, fn, NULL, NULL);
}

/* The functions of error handler eh into *out; 0 if ftwrap did not see
 * it made. */
static int eh_find(MPI_Errhandler eh, eh_entry_t *out)
{
    eh_entry_t *e;

    ftw_mt_lock(&fh_lock);
    HASH_FIND(hh, eh_table, &eh, sizeof(eh), e);
    if (e != NULL)
        *out = *e;
    ftw_mt_unlock(&fh_lock);
    return e != NULL;
}

int ftw_win_create_errhandler(MPI_Win_errhandler_function *fn,
                              MPI_Errhandler *eh)
{
    int rc;

    ftw_wrap_check();
    rc = PMPI_Win_create_errhandler(fn, eh);
    if (rc == MPI_SUCCESS)
        errhandler_note(*eh, NULL, fn, NULL);
    return rc;
}

int ftw_file_create_errhandler(MPI_File_errhandler_function *fn,
                               MPI_Errhandler *eh)
{
    int rc;

    ftw_wrap_check();
    rc = PMPI_File_create_errhandler(fn, eh);
    if (rc == MPI_SUCCESS)
        errhandler_note(*eh, NULL, NULL, fn);
    return rc;
}

int ftw_comm_create_errhandler(MPI_Comm_errhandler_function *fn,
                               MPI_Errhandler *eh)
{
    int rc;

    ftw_wrap_check();
    rc = PMPI_Comm_create_errhandler(fn, eh);
    if (rc == MPI_SUCCESS)
        ftw_errhandler_note(*eh, fn);
    return rc;
}

/* The handler of comm's index, or -1; under fh_lock. */
static int handler_index(MPI_Comm comm)
{
    for (int i = 0; i < nhandlers; i++)
        if (handlers[i].comm == comm)
            return i;
    return -1;
}

/* Under fh_lock. */
static void handler_remove(int i)
{
    for (; i + 1 < nhandlers; i++)
        handlers[i] = handlers[i + 1];
    ftw_gate_add(nhandlers, -1);
}

void ftw_failhandler_forget(MPI_Comm comm)
{
    int i;

    if (ftw_gate_get(nhandlers) == 0)
        return;
    ftw_mt_lock(&fh_lock);
    i = handler_index(comm);
    if (i >= 0)
        handler_remove(i);
    ftw_mt_unlock(&fh_lock);
}

/* Append h, its failures counted from nfailed; under fh_lock. */
static int handler_add(const handler_t *h)
{
    if (nhandlers == cap_handlers) {
        int cap = cap_handlers ? 2 * cap_handlers : 8;
        handler_t *n = realloc(handlers, sizeof(*n) * (size_t)cap);

        if (n == NULL)
            return MPI_ERR_NO_MEM;
        handlers = n;
        cap_handlers = cap;
    }
    handlers[nhandlers] = *h;
    ftw_gate_add(nhandlers, 1);
    return MPI_SUCCESS;
}

int ftw_obj_failhandler_set(const MPI_Win *win, const MPI_File *file,
                            MPI_Comm members, MPI_Errhandler errhandler)
{
    static const char *const maker[3] = {
        "MPI_Comm_create_errhandler", "MPI_Win_create_errhandler",
        "MPI_File_create_errhandler",
    };
    int kind = win != NULL ? 1 : file != NULL ? 2 : 0, i, rc;
    eh_entry_t e = { 0 };
    ftw_comm_t *c = ftw_comm_get(members);
    handler_t h;

    if (c == NULL)
        return kind == 1 ? MPI_ERR_WIN : kind == 2 ? MPI_ERR_FILE
                                                   : MPI_ERR_COMM;
    if (errhandler != FTW_FAILHANDLER_NULL &&
        (!eh_find(errhandler, &e) || (kind == 0 && e.fn == NULL) ||
         (kind == 1 && e.wfn == NULL) || (kind == 2 && e.ffn == NULL))) {
        ftw_error("the error handler was not made by %s", maker[kind]);
        return MPI_ERR_ARG;
    }
    ftw_comm_refresh(c);
    h = (handler_t){ .comm = members, .win = MPI_WIN_NULL,
                     .file = MPI_FILE_NULL, .eh = errhandler,
                     .nfailed = c->nfailed };
    if (kind == 1) {
        h.win = *win;
        h.wfn = e.wfn;
    } else if (kind == 2) {
        h.file = *file;
        h.ffn = e.ffn;
    } else if (errhandler != FTW_FAILHANDLER_NULL) {
        h.fn = e.fn;
    }
    ftw_mt_lock(&fh_lock);
    i = handler_index(members);
    if (i >= 0)
        handler_remove(i);
    rc = MPI_SUCCESS;
    if (errhandler != FTW_FAILHANDLER_NULL) {
        fh_mode_frozen = 1;
        rc = handler_add(&h);
    }
    ftw_mt_unlock(&fh_lock);
    return rc;
}

MPI_Errhandler ftw_obj_failhandler_get(MPI_Comm members)
{
    MPI_Errhandler eh = FTW_FAILHANDLER_NULL;
    int i;

    ftw_mt_lock(&fh_lock);
    i = handler_index(members);
    if (i >= 0)
        eh = handlers[i].eh;
    ftw_mt_unlock(&fh_lock);
    return eh;
}

FTW_EXPORT int FTW_Comm_set_failhandler(MPI_Comm comm,
                                        MPI_Errhandler errhandler)
{
    ftw_wrap_check();
    return ftw_obj_failhandler_set(NULL, NULL, comm, errhandler);
}

FTW_EXPORT int FTW_Comm_get_failhandler(MPI_Comm comm,
                                        MPI_Errhandler *errhandler)
{
    if (errhandler == NULL)
        return MPI_ERR_ARG;
    if (ftw_comm_get(comm) == NULL)
        return MPI_ERR_COMM;
    *errhandler = ftw_obj_failhandler_get(comm);
    return MPI_SUCCESS;
}

FTW_EXPORT int FTW_Failhandler_set_mode(int mode)
{
    int rc = MPI_SUCCESS;

    if (mode != FTW_FAILHANDLER_MODE_ALL &&
        mode != FTW_FAILHANDLER_MODE_SUBSET)
        return MPI_ERR_ARG;
    ftw_mt_lock(&fh_lock);
    if (fh_mode_frozen && mode != fh_mode)
        rc = MPI_ERR_OTHER;
    else
        fh_mode = mode;
    ftw_mt_unlock(&fh_lock);
    if (rc != MPI_SUCCESS)
        ftw_error("the mode is set before the "
                  "first failure handler is registered");
    return rc;
}

static int mode_get(void)
{
    int mode;

    ftw_mt_lock(&fh_lock);
    mode = fh_mode;
    ftw_mt_unlock(&fh_lock);
    return mode;
}

FTW_EXPORT int FTW_Failhandler_get_mode(int *mode)
{
    if (mode == NULL)
        return MPI_ERR_ARG;
    *mode = mode_get();
    return MPI_SUCCESS;
}

/* Call handler h with code. */
static void handler_invoke(handler_t h, int code)
{
    ftw_stat_add(FTW_STAT_HANDLERS_RUN, 1);
    if (h.wfn != NULL)
        h.wfn(&h.win, &code);
    else if (h.ffn != NULL)
        h.ffn(&h.file, &code);
    else
        h.fn(&h.comm, &code);
}

/* Record that comm's handler has handled nfailed failures; 0 if it is
 * no longer registered. */
static int handler_handled(MPI_Comm comm, int nfailed)
{
    int i;

    ftw_mt_lock(&fh_lock);
    i = handler_index(comm);
    if (i >= 0)
        handlers[i].nfailed = nfailed;
    ftw_mt_unlock(&fh_lock);
    return i >= 0;
}

/* Call handler h (a copy of a registered one) if its communicator is
 * concerned by the new failures.  SUBSET: once per failure among its
 * members, each after the members' agreement for that failure (numbered
 * by the count of failures, so every member runs the same ones however
 * it learned of them). */
static void handler_call(handler_t h)
{
    ftw_comm_t *c = ftw_comm_get(h.comm);
    int code = FTW_ERR_PROC_FAIL_STOP, n;

    if (c == NULL)
        return;
    ftw_comm_refresh(c);
    n = c->nfailed;
    if (mode_get() != FTW_FAILHANDLER_MODE_SUBSET) {
        if (handler_handled(h.comm, n))
            handler_invoke(h, code);
        return;
    }
    for (int k = h.nfailed + 1; k <= n; k++) {
        int flag;

        /* The agreement only synchronises: its decision is not kept. */
        if (ftw_agree_handler(c, k, &flag) != MPI_SUCCESS ||
            !handler_handled(h.comm, k))
            return;
        h.nfailed = k;
        handler_invoke(h, code);
    }
}

/* One pass over the handlers while failures keep coming; by one thread at
 * a time, never nested (a handler's MPI calls, or another thread's, find
 * fh_running set; the runner looks at the epoch again after it). */
void ftw_failhandlers_run(void)
{
    while (ftw_gate_get(nhandlers) != 0 &&
           atomic_load_explicit(&ftw_fail_epoch, memory_order_acquire) !=
           atomic_load(&handled_epoch)) {
        if (atomic_exchange(&fh_running, 1))
            return;
        for (;;) {
            uint32_t e = atomic_load_explicit(&ftw_fail_epoch,
                                              memory_order_acquire);

            if (e == atomic_load(&handled_epoch))
                break;
            atomic_store(&handled_epoch, e);
            /* A handler may register or remove handlers: walk by index. */
            for (int i = 0;; i++) {
                handler_t h;

                ftw_mt_lock(&fh_lock);
                if (i >= nhandlers) {
                    ftw_mt_unlock(&fh_lock);
                    break;
                }
                h = handlers[i];
                ftw_mt_unlock(&fh_lock);
                handler_call(h);
            }
        }
        atomic_store(&fh_running, 0);
    }
}
