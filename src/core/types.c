/* Datatype sizes and the types requests still name (core/types.h). */
#include "core/types.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/ft.h"
#include "core/lock.h"
#include "core/request.h"
#include "util/config.h"

/* Datatype sizes: the last one asked, per thread; MPI_Type_free bumps
 * the generation, since a freed handle may come back as another type.
 * The generation starts at 1 so the empty cache never matches. */
_Atomic unsigned ftw_type_gen = 1;
FTW_TLS MPI_Datatype ftw_size_dt;
FTW_TLS MPI_Count ftw_size_val;
FTW_TLS unsigned ftw_size_gen;

int ftw_type_size_slow(MPI_Datatype dt, MPI_Count *size_p)
{
    unsigned gen = atomic_load_explicit(&ftw_type_gen, memory_order_relaxed);

    if (PMPI_Type_size_x(dt, size_p) != MPI_SUCCESS)
        return MPI_ERR_TYPE;
    ftw_size_dt = dt;
    ftw_size_val = *size_p;
    ftw_size_gen = gen;
    return MPI_SUCCESS;
}

int ftw_type_span(MPI_Datatype dt, MPI_Count count, MPI_Count *lo_p,
                  MPI_Count *hi_p)
{
    MPI_Count lb, extent, tlb, textent, last;

    if (count <= 0) {
        *lo_p = *hi_p = 0;
        return MPI_SUCCESS;
    }
    if (PMPI_Type_get_extent_x(dt, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent_x(dt, &tlb, &textent) != MPI_SUCCESS)
        return MPI_ERR_TYPE;
    last = (count - 1) * extent;
    *lo_p = tlb + (last < 0 ? last : 0);
    *hi_p = tlb + textent + (last > 0 ? last : 0);
    return MPI_SUCCESS;
}

int ftw_send_eager_slow(MPI_Count count, MPI_Datatype dt)
{
    MPI_Count size;

    if (ftw_type_size(dt, &size) != MPI_SUCCESS)
        return 1;   /* let the MPI report the bad datatype */
    return count * size <= (MPI_Count)ftw_cfg.eager_max;
}

/* Datatypes the program freed while a request ftwrap tracks still named
 * them.  MPI lets a program free a type its pending operations use; the
 * native requests hold their own reference, but ftwrap reads the type at
 * completion too (a rendezvous receive unpacks with it, a failed receive
 * quarantines its span), so the native free waits until no tracked
 * request names the type.  Each MPI_Type_free and MPI_Finalize sweep the
 * list, so it holds only types some request still uses. */
static MPI_Datatype *held;
static _Atomic int held_n;
static int held_cap;
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;

static int type_uses(MPI_Datatype dt)
{
    return ftw_req_count > 0 && ftw_req_uses_type(dt);
}

/* Free the held types nothing names any more (held_lock held); all of
 * them if all. */
static void held_sweep(int all)
{
    int keep = 0;

    for (int i = 0; i < held_n; i++) {
        if (!all && type_uses(held[i]))
            held[keep++] = held[i];
        else
            PMPI_Type_free(&held[i]);
    }
    held_n = keep;
}

static int type_hold(MPI_Datatype dt)
{
    if (held_n == held_cap) {
        int cap = held_cap ? 2 * held_cap : 16;
        MPI_Datatype *n = realloc(held, (size_t)cap * sizeof(*n));

        if (n == NULL)
            return 0;
        held = n;
        held_cap = cap;
    }
    held[held_n++] = dt;
    return 1;
}

int ftw_type_free(MPI_Datatype *dt)
{
    int ni, na, nd, combiner, rc = MPI_SUCCESS, done = 0;

    atomic_fetch_add_explicit(&ftw_type_gen, 1, memory_order_relaxed);
    ftw_wrap_check();
    if (held_n == 0 && (dt == NULL || !type_uses(*dt)))
        return PMPI_Type_free(dt);
    ftw_mt_lock(&held_lock);
    held_sweep(0);
    /* A predefined or invalid type goes to the MPI, which says why. */
    if (dt != NULL && type_uses(*dt) &&
        PMPI_Type_get_envelope(*dt, &ni, &na, &nd, &combiner) ==
            MPI_SUCCESS && combiner != MPI_COMBINER_NAMED &&
        type_hold(*dt)) {
        *dt = MPI_DATATYPE_NULL;
        done = 1;
    }
    ftw_mt_unlock(&held_lock);
    if (!done)
        rc = PMPI_Type_free(dt);
    return rc;
}

void ftw_type_fini(void)
{
    ftw_mt_lock(&held_lock);
    held_sweep(1);
    free(held);
    held = NULL;
    held_cap = 0;
    ftw_mt_unlock(&held_lock);
}
