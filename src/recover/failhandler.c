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

static eh_entry_t *eh_table;
static pthread_mutex_t fh_lock = PTHREAD_MUTEX_INITIALIZER;
static handler_t *handlers;         /* in registration order */
static int nhandlers, cap_handlers;
static int fh_mode = FTW_FAILHANDLER_MODE_ALL;
static int fh_mode_frozen;          /* a handler was registered */
static uint32_t handled_epoch;
static FTW_TLS int in_handler;

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
    pthread_mutex_lock(&fh_lock);
    HASH_FIND(hh, eh_table, &eh, sizeof(eh), old);
    if (old != NULL) {
        HASH_DEL(eh_table, old);
        free(old);
    }
    HASH_ADD(hh, eh_table, key, sizeof(e->key), e);
    pthread_mutex_unlock(&fh_lock);
}

void ftw_errhandler_note(MPI_Errhandler eh, MPI_Comm_errhandler_function *fn)
{
    errhandler_note(eh, fn, NULL, NULL);
}

static eh_entry_t *eh_find(MPI_Errhandler eh)
{
    eh_entry_t *e;

    pthread_mutex_lock(&fh_lock);
    HASH_FIND(hh, eh_table, &eh, sizeof(eh), e);
    pthread_mutex_unlock(&fh_lock);
    return e;
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

static int handler_index(MPI_Comm comm)
{
    for (int i = 0; i < nhandlers; i++)
        if (handlers[i].comm == comm)
            return i;
    return -1;
}

static void handler_remove(int i)
{
    for (; i + 1 < nhandlers; i++)
        handlers[i] = handlers[i + 1];
    nhandlers--;
}

void ftw_failhandler_forget(MPI_Comm comm)
{
    int i = handler_index(comm);

    if (i >= 0)
        handler_remove(i);
}

/* A handler for comm's failures, its function to be filled in by the
 * caller (the new last entry). */
static int handler_add(MPI_Comm comm, MPI_Errhandler eh, ftw_comm_t *c)
{
    if (nhandlers == cap_handlers) {
        int cap = cap_handlers ? 2 * cap_handlers : 8;
        handler_t *h = realloc(handlers, sizeof(*h) * (size_t)cap);

        if (h == NULL)
            return MPI_ERR_NO_MEM;
        handlers = h;
        cap_handlers = cap;
    }
    ftw_comm_refresh(c);
    handlers[nhandlers] = (handler_t){ .comm = comm, .win = MPI_WIN_NULL,
                                       .file = MPI_FILE_NULL, .eh = eh,
                                       .nfailed = c->nfailed };
    nhandlers++;
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
    eh_entry_t *e = NULL;
    ftw_comm_t *c = ftw_comm_get(members);
    handler_t *h;

    if (c == NULL)
        return kind == 1 ? MPI_ERR_WIN : kind == 2 ? MPI_ERR_FILE
                                                   : MPI_ERR_COMM;
    if (errhandler != FTW_FAILHANDLER_NULL) {
        e = eh_find(errhandler);
        if (e == NULL || (kind == 0 && e->fn == NULL) ||
            (kind == 1 && e->wfn == NULL) || (kind == 2 && e->ffn == NULL)) {
            ftw_error("the error handler was not made by %s", maker[kind]);
            return MPI_ERR_ARG;
        }
    }
    i = handler_index(members);
    if (i >= 0)
        handler_remove(i);
    if (e == NULL)
        return MPI_SUCCESS;
    fh_mode_frozen = 1;
    rc = handler_add(members, errhandler, c);
    if (rc != MPI_SUCCESS)
        return rc;
    h = &handlers[nhandlers - 1];
    if (kind == 1) {
        h->win = *win;
        h->wfn = e->wfn;
    } else if (kind == 2) {
        h->file = *file;
        h->ffn = e->ffn;
    } else {
        h->fn = e->fn;
    }
    return MPI_SUCCESS;
}

MPI_Errhandler ftw_obj_failhandler_get(MPI_Comm members)
{
    int i = handler_index(members);

    return i >= 0 ? handlers[i].eh : FTW_FAILHANDLER_NULL;
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
    if (mode != FTW_FAILHANDLER_MODE_ALL &&
        mode != FTW_FAILHANDLER_MODE_SUBSET)
        return MPI_ERR_ARG;
    if (fh_mode_frozen && mode != fh_mode) {
        ftw_error("the mode is set before the "
                  "first failure handler is registered");
        return MPI_ERR_OTHER;
    }
    fh_mode = mode;
    return MPI_SUCCESS;
}

FTW_EXPORT int FTW_Failhandler_get_mode(int *mode)
{
    if (mode == NULL)
        return MPI_ERR_ARG;
    *mode = fh_mode;
    return MPI_SUCCESS;
}

/* Call handler h (i-th) with code. */
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

/* Call handler i if its communicator is concerned by the new failures.
 * SUBSET: once per failure among its members, each after the members'
 * agreement for that failure (numbered by the count of failures, so
 * every member runs the same ones however it learned of them). */
static void handler_call(int i)
{
    handler_t h = handlers[i];
    ftw_comm_t *c = ftw_comm_get(h.comm);
    int code = FTW_ERR_PROC_FAIL_STOP;

    if (c == NULL)
        return;
    ftw_comm_refresh(c);
    if (fh_mode != FTW_FAILHANDLER_MODE_SUBSET) {
        handlers[i].nfailed = c->nfailed;
        handler_invoke(h, code);
        return;
    }
    for (int k = h.nfailed + 1; k <= c->nfailed; k++) {
        int flag;

        /* The agreement only synchronises: its decision is not kept. */
        if (ftw_agree_handler(c, k, &flag) != MPI_SUCCESS)
            return;
        handlers[i].nfailed = k;
        handler_invoke(handlers[i], code);
    }
}

void ftw_failhandlers_run(void)
{
    if (nhandlers == 0 || in_handler)
        return;
    in_handler = 1;
    for (;;) {
        uint32_t e = atomic_load_explicit(&ftw_fail_epoch,
                                          memory_order_acquire);

        if (e == handled_epoch)
            break;
        handled_epoch = e;
        /* A handler may register or remove handlers: walk by index. */
        for (int i = 0; i < nhandlers; i++)
            handler_call(i);
    }
    in_handler = 0;
}
