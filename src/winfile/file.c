/* Files under failures (see file.h). */
#include "winfile/file.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "detect/detect.h"
#include "core/comm.h"
#include "core/ft.h"
#include "core/lock.h"
#include "winfile/members.h"
#include "op/op.h"
#include "util/log.h"

typedef struct ftw_file {
    MPI_File user;          /* key: the handle the application holds */
    MPI_File native;        /* the handle calls run on */
    MPI_Comm comm;          /* duplicate of the opening communicator */
    char *filename;
    int amode;
    int nsurv;              /* members of native */
    int *surv_of;           /* NULL: native is the original */
    int has_view;           /* the last MPI_File_set_view, kept: */
    MPI_Offset disp;
    MPI_Datatype etype, filetype;   /* duplicates */
    char datarep[MPI_MAX_DATAREP_STRING];
    uint32_t epoch_checked;
    int invalid;
    UT_hash_handle hh;
} ftw_file_t;

_Atomic int ftw_file_moved;

static ftw_file_t *file_table;
static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;

static ftw_file_t *file_find(MPI_File fh)
{
    ftw_file_t *f;

    if (fh == MPI_FILE_NULL || file_table == NULL)
        return NULL;
    ftw_mt_lock(&file_lock);
    HASH_FIND(hh, file_table, &fh, sizeof(fh), f);
    ftw_mt_unlock(&file_lock);
    return f;
}

MPI_File ftw_file_native_slow(MPI_File fh)
{
    ftw_file_t *f = file_find(fh);

    return f != NULL ? f->native : fh;
}

/* A member of the native file's communicator failed. */
static int file_invalid(ftw_file_t *f)
{
    return ftw_members_invalid(f->comm, f->surv_of, &f->epoch_checked,
                               &f->invalid);
}

int ftw_file_coll(const char *name, MPI_File fh, int barrier,
                  MPI_File *native, int *rc)
{
    ftw_file_t *f;

    ftw_wrap_check();
    f = file_find(fh);
    *native = fh;
    if (f == NULL)
        return 0;
    *native = f->native;
    if (file_invalid(f) ||
        (barrier && ftw_barrier_watched(f->comm, name) != MPI_SUCCESS)) {
        *rc = ftw_raise_file(fh, FTW_ERR_PROC_FAIL_STOP, name);
        return 1;
    }
    return 0;
}

int ftw_file_refused(ftw_coll_t *co, MPI_File *fh)
{
    if (fh != NULL)
        *fh = MPI_FILE_NULL;
    return co->rc;
}

int ftw_file_opened(ftw_coll_t *co, int rc, MPI_File *fh,
                    const char *filename, int amode)
{
    ftw_file_t *f;
    ftw_comm_t *c;
    MPI_Comm members;
    int lost;

    if (rc != MPI_SUCCESS)
        return rc;
    ftw_req_mark_testall_unsafe();  /* the MPI-IO's requests are generalized */
    /* Every member makes the duplicate, even one out of memory for the
     * record: the others wait in it. */
    f = calloc(1, sizeof(*f));
    members = ftw_members_dup(co, &lost);
    if (lost) {
        /* As for a window (ftw_win_made): the MPI keeps the file. */
        free(f);
        *fh = MPI_FILE_NULL;
        return ftw_raise(co->comm, FTW_ERR_PROC_FAIL_STOP, co->name, -1);
    }
    if (f != NULL) {
        f->comm = members;
        f->filename = strdup(filename);
    }
    if (f == NULL || f->filename == NULL || members == MPI_COMM_NULL ||
        (c = ftw_comm_get(f->comm)) == NULL) {
        ftw_error("MPI_File_open: no record of the file: its calls go to "
                  "the MPI unwatched");
        if (f != NULL)
            free(f->filename);
        free(f);
        return rc;
    }
    f->user = f->native = *fh;
    /* Opened again after a validate: the file exists by then. */
    f->amode = amode & ~(MPI_MODE_CREATE | MPI_MODE_EXCL);
    f->nsurv = c->size;
    f->epoch_checked = (uint32_t)-1;
    f->etype = f->filetype = MPI_DATATYPE_NULL;
    ftw_mt_lock(&file_lock);
    HASH_ADD(hh, file_table, user, sizeof(f->user), f);
    ftw_mt_unlock(&file_lock);
    return rc;
}

/* A predefined type is kept as is; a derived one is duplicated (the
 * program may free its own). */
static MPI_Datatype type_keep(MPI_Datatype t)
{
    int ni, na, nd, comb;
    MPI_Datatype d = MPI_DATATYPE_NULL;

    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS)
        return MPI_DATATYPE_NULL;
    if (comb == MPI_COMBINER_NAMED)
        return t;
    return PMPI_Type_dup(t, &d) == MPI_SUCCESS ? d : MPI_DATATYPE_NULL;
}

static void type_drop(MPI_Datatype *t)
{
    int ni, na, nd, comb;

    if (*t != MPI_DATATYPE_NULL &&
        PMPI_Type_get_envelope(*t, &ni, &na, &nd, &comb) == MPI_SUCCESS &&
        comb != MPI_COMBINER_NAMED)
        PMPI_Type_free(t);
    *t = MPI_DATATYPE_NULL;
}

int ftw_file_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype,
                      MPI_Datatype filetype, const char *datarep,
                      MPI_Info info)
{
    ftw_file_t *f;
    MPI_File native;
    int rc;

    if (ftw_file_coll("MPI_File_set_view", fh, 1, &native, &rc))
        return rc;
    rc = PMPI_File_set_view(native, disp, etype, filetype, datarep, info);
    if (rc != MPI_SUCCESS || (f = file_find(fh)) == NULL)
        return rc;
    type_drop(&f->etype);
    type_drop(&f->filetype);
    f->has_view = 0;
    f->disp = disp;
    f->etype = type_keep(etype);
    f->filetype = type_keep(filetype);
    snprintf(f->datarep, sizeof(f->datarep), "%s", datarep);
    f->has_view = f->etype != MPI_DATATYPE_NULL &&
                  f->filetype != MPI_DATATYPE_NULL;
    return rc;
}

static void file_forget(ftw_file_t *f)
{
    MPI_Comm old = f->comm;

    ftw_mt_lock(&file_lock);
    HASH_DEL(file_table, f);
    ftw_mt_unlock(&file_lock);
    if (PMPI_Comm_free(&f->comm) == MPI_SUCCESS)
        ftw_comm_released(old);
    if (f->surv_of != NULL)
        atomic_fetch_sub_explicit(&ftw_file_moved, 1, memory_order_relaxed);
    type_drop(&f->etype);
    type_drop(&f->filetype);
    free(f->surv_of);
    free(f->filename);
    free(f);
}

int ftw_file_close(MPI_File *fh)
{
    ftw_file_t *f;
    MPI_File native;
    int rc;

    ftw_wrap_check();
    f = fh != NULL ? file_find(*fh) : NULL;
    if (f == NULL)
        return PMPI_File_close(fh);
    /* After a failure the file stays open (the MPI's close would wait for
     * the dead): validate, then close. */
    if (ftw_file_coll("MPI_File_close", *fh, 1, &native, &rc))
        return rc;
    rc = PMPI_File_close(&f->native);
    if (rc != MPI_SUCCESS)
        return rc;
    /* The handle before a validate stays with the MPI (its close would
     * wait for the dead). */
    file_forget(f);
    *fh = MPI_FILE_NULL;
    return MPI_SUCCESS;
}

/* Open the file again over survivors (collective over them): the view
 * and this process's individual file pointer as they were; its rank of
 * each member is surv_of (taken). */
static int file_reopen(ftw_file_t *f, int *surv_of, int nsurv,
                       MPI_Comm survivors)
{
    MPI_Errhandler eh;
    MPI_File nf = MPI_FILE_NULL;
    MPI_Offset pos = 0;
    int rc;

    PMPI_File_get_position(f->native, &pos);
    rc = PMPI_File_open(survivors, f->filename, f->amode, MPI_INFO_NULL,
                        &nf);
    if (rc == MPI_SUCCESS && f->has_view)
        rc = PMPI_File_set_view(nf, f->disp, f->etype, f->filetype,
                                f->datarep, MPI_INFO_NULL);
    if (rc == MPI_SUCCESS)
        rc = PMPI_File_seek(nf, pos, MPI_SEEK_SET);
    if (rc != MPI_SUCCESS) {
        free(surv_of);
        return rc;
    }
    if (PMPI_File_get_errhandler(f->user, &eh) == MPI_SUCCESS) {
        PMPI_File_set_errhandler(nf, eh);
        PMPI_Errhandler_free(&eh);
    }
    if (f->surv_of == NULL)
        atomic_fetch_add_explicit(&ftw_file_moved, 1, memory_order_relaxed);
    free(f->surv_of);
    f->surv_of = surv_of;
    f->native = nf;
    f->nsurv = nsurv;
    return MPI_SUCCESS;
}

FTW_EXPORT int FTW_File_validate(MPI_File fh, MPI_Group *failed_group)
{
    ftw_file_t *f;
    MPI_Comm survivors;
    int rc, remake, *surv_of, nsurv;

    ftw_wrap_check();
    f = file_find(fh);
    if (f == NULL || failed_group == NULL)
        return ftw_raise_file(fh, f == NULL ? MPI_ERR_FILE : MPI_ERR_ARG,
                              "FTW_File_validate");
    rc = ftw_members_validate(f->comm, f->nsurv, failed_group, &remake,
                              &surv_of, &nsurv, &survivors);
    if (rc == MPI_SUCCESS && remake) {
        rc = file_reopen(f, surv_of, nsurv, survivors);
        if (rc != MPI_SUCCESS)
            PMPI_Group_free(failed_group);
    }
    if (rc != MPI_SUCCESS)
        return ftw_raise_file(fh, rc, "FTW_File_validate");
    f->epoch_checked = (uint32_t)-1;
    return MPI_SUCCESS;
}

FTW_EXPORT int FTW_File_set_failhandler(MPI_File fh,
                                        MPI_Errhandler errhandler)
{
    ftw_file_t *f;

    ftw_wrap_check();
    f = file_find(fh);
    if (f == NULL)
        return ftw_raise_file(fh, MPI_ERR_FILE, "FTW_File_set_failhandler");
    return ftw_obj_failhandler_set(NULL, &fh, f->comm, errhandler);
}

FTW_EXPORT int FTW_File_get_failhandler(MPI_File fh,
                                        MPI_Errhandler *errhandler)
{
    ftw_file_t *f;

    ftw_wrap_check();
    f = file_find(fh);
    if (f == NULL || errhandler == NULL)
        return ftw_raise_file(fh, f == NULL ? MPI_ERR_FILE : MPI_ERR_ARG,
                              "FTW_File_get_failhandler");
    *errhandler = ftw_obj_failhandler_get(f->comm);
    return MPI_SUCCESS;
}

FTW_EXPORT int FTW_File_group_failed(MPI_File fh, MPI_Group *failed_group)
{
    ftw_file_t *f;
    ftw_comm_t *c;
    int count;

    ftw_wrap_check();
    f = file_find(fh);
    if (f == NULL || failed_group == NULL ||
        (c = ftw_comm_get(f->comm)) == NULL)
        return ftw_raise_file(fh, f == NULL ? MPI_ERR_FILE : MPI_ERR_ARG,
                              "FTW_File_group_failed");
    if (ftw_comm_failed_group(c, failed_group, &count) != FTW_OK)
        return ftw_raise_file(fh, MPI_ERR_NO_MEM, "FTW_File_group_failed");
    return MPI_SUCCESS;
}

void ftw_file_table_clear(void)
{
    ftw_file_t *f, *tmp;

    ftw_mt_lock(&file_lock);
    HASH_ITER(hh, file_table, f, tmp) {
        HASH_DEL(file_table, f);
        free(f->surv_of);
        free(f->filename);
        free(f);
    }
    ftw_mt_unlock(&file_lock);
}
