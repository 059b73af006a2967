/*
 * Datatypes: sizes through a per-thread cache of the last type asked, and
 * the types a program freed while a tracked request still names them.
 */
#ifndef FTW_CORE_TYPES_H
#define FTW_CORE_TYPES_H

#include <mpi.h>
#include <stdatomic.h>

#include "util/compiler.h"
#include "util/config.h"

extern FTW_TLS MPI_Datatype ftw_size_dt;
extern FTW_TLS MPI_Count ftw_size_val;
extern FTW_TLS unsigned ftw_size_gen;
extern _Atomic unsigned ftw_type_gen;
int ftw_send_eager_slow(MPI_Count count, MPI_Datatype dt);

/* The size of dt, through the per-thread cache of the last one asked
 * (inline: every receive asks it; the MPI only when the type changed). */
int ftw_type_size_slow(MPI_Datatype dt, MPI_Count *size_p);

static inline int ftw_type_size(MPI_Datatype dt, MPI_Count *size_p)
{
    if (ftw_likely(ftw_size_dt == dt && ftw_size_gen ==
                   atomic_load_explicit(&ftw_type_gen, memory_order_relaxed))) {
        *size_p = ftw_size_val;
        return MPI_SUCCESS;
    }
    return ftw_type_size_slow(dt, size_p);
}

/* The bytes count elements of dt touch, as offsets from the buffer:
 * [*lo_p, *hi_p), over true extents (an extent may be negative, or
 * smaller than the data); both 0 for count <= 0.  MPI_ERR_TYPE for an
 * invalid type. */
int ftw_type_span(MPI_Datatype dt, MPI_Count count, MPI_Count *lo_p,
                  MPI_Count *hi_p);

/* Nonzero if count elements of dt fit FTW_EAGER_MAX (last type cached). */
static inline int ftw_send_eager(MPI_Count count, MPI_Datatype dt)
{
    if (ftw_likely(ftw_size_dt == dt && ftw_size_gen ==
                   atomic_load_explicit(&ftw_type_gen, memory_order_relaxed)))
        return count * ftw_size_val <= (MPI_Count)ftw_cfg.eager_max;
    return ftw_send_eager_slow(count, dt);
}

/* MPI_Type_free: also forgets cached datatype sizes, and leaves a type
 * a tracked request names to be freed once none does. */
int ftw_type_free(MPI_Datatype *dt);

/* MPI_Finalize: free the types MPI_Type_free left to requests. */
void ftw_type_fini(void);

#endif
