/*
 * Bounce buffers (FTW_QUARANTINE=bounce): a receive whose buffer overlaps
 * a quarantined range is posted into a private buffer of ftwrap's, so a
 * late write of the abandoned transfer and the new message never meet.
 * When the receive completes, the data is copied into the user's buffer
 * if no older quarantined range overlaps it any more; otherwise the
 * receive completes with FTW_ERR_BUFFER_UNUSABLE (status: source, tag and
 * count of the message), ftwrap keeps the data, quarantines the range and
 * writes the data into it the moment the older ranges are released.
 */
#ifndef FTW_FT_BOUNCE_H
#define FTW_FT_BOUNCE_H

#include <mpi.h>
#include <stdatomic.h>

typedef struct ftw_bounce ftw_bounce_t;

/* Nonzero once a bounce buffer was made: completions must be checked. */
extern _Atomic int ftw_bounce_used;

/* A bounce buffer for count elements of dt at buf (free() it); an MPI
 * error class if it cannot be made (MPI_ERR_NO_MEM, MPI_ERR_COUNT). */
int ftw_bounce_new(void *buf, MPI_Count count, MPI_Datatype dt,
                   ftw_bounce_t **b_p);

/* The buffer, count and type the native receive must use. */
void ftw_bounce_native(const ftw_bounce_t *b, void **buf_p,
                       MPI_Count *count_p, MPI_Datatype *dt_p);

/* The native receive completed successfully into b (status st): deliver
 * the data now (MPI_SUCCESS) or later (FTW_ERR_BUFFER_UNUSABLE, st's
 * MPI_ERROR set). */
int ftw_bounce_finish(ftw_bounce_t *b, MPI_Status *st);

/* Deliver deferred data whose range no older quarantine covers now. */
void ftw_bounce_progress(void);

#endif
