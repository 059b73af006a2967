/* Bounce buffers for receives into quarantined ranges. */
#include "buf/bounce.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "buf/quarantine.h"
#include "core/request.h"
#include "core/types.h"
#include "util/log.h"
#include "util/stats.h"

struct ftw_bounce {
    void *ubuf;             /* the user's receive */
    MPI_Count ucount;
    MPI_Datatype udt;
    char *lo, *hi;          /* the span of the user's buffer it writes */
    int packed;             /* received as MPI_PACKED, unpacked at the end */
    MPI_Count cap;          /* bytes of data[] */
    unsigned qid;           /* a deferred delivery's own quarantine */
    struct ftw_bounce *next;    /* deferred deliveries */
    _Alignas(16) char data[];
};

_Atomic int ftw_bounce_used;
static ftw_bounce_t *deferred;

int ftw_bounce_new(void *buf, MPI_Count count, MPI_Datatype dt,
                   ftw_bounce_t **b_p)
{
    const char *lo, *hi;
    MPI_Count size, cap;
    int packed, psize;
    ftw_bounce_t *b;

    if (ftw_buffer_span(buf, count, dt, &lo, &hi) != MPI_SUCCESS ||
        ftw_type_size(dt, &size) != MPI_SUCCESS)
        return MPI_ERR_TYPE;
    /* The span holds only data: a plain copy; else pack and unpack. */
    packed = size * count != hi - lo;
    cap = hi - lo;
    if (packed) {
        if (count > INT_MAX || PMPI_Pack_size((int)count, dt, MPI_COMM_SELF,
                                              &psize) != MPI_SUCCESS)
            return MPI_ERR_COUNT;
        cap = psize;
    }
    b = malloc(sizeof(*b) + (size_t)cap);
    if (b == NULL) {
        ftw_error("out of memory for a %lld-byte bounce buffer",
                  (long long)cap);
        return MPI_ERR_NO_MEM;
    }
    *b = (ftw_bounce_t){ .ubuf = buf, .ucount = count, .udt = dt,
                         .lo = (char *)lo, .hi = (char *)hi,
                         .packed = packed, .cap = cap };
    ftw_bounce_used = 1;
    ftw_stat_add(FTW_STAT_BOUNCED, 1);
    *b_p = b;
    return MPI_SUCCESS;
}

void ftw_bounce_native(const ftw_bounce_t *b, void **buf_p,
                       MPI_Count *count_p, MPI_Datatype *dt_p)
{
    if (b->packed) {
        *buf_p = (void *)b->data;
        *count_p = b->cap;
        *dt_p = MPI_PACKED;
    } else {
        /* Element 0's span starts at lo - ubuf; put it at data. */
        *buf_p = (char *)b->data - (b->lo - (char *)b->ubuf);
        *count_p = b->ucount;
        *dt_p = b->udt;
    }
}

/* Copy the first bytes received into the user's buffer. */
static void bounce_copy(const ftw_bounce_t *b, MPI_Count bytes)
{
    MPI_Count size;
    int pos = 0;

    if (!b->packed) {
        memcpy(b->lo, b->data, (size_t)bytes);
        return;
    }
    if (ftw_type_size(b->udt, &size) != MPI_SUCCESS || size == 0)
        return;
    /* Whole elements only: a partial one means mismatched types. */
    PMPI_Unpack(b->data, (int)bytes, &pos, b->ubuf, (int)(bytes / size),
                b->udt, MPI_COMM_SELF);
}

/* Keep bytes of b's data for later: a copy, quarantining the range. */
static int bounce_defer(const ftw_bounce_t *b, MPI_Count bytes)
{
    ftw_bounce_t *d = malloc(sizeof(*d) + (size_t)bytes);

    if (d == NULL) {
        ftw_error("out of memory: a message received into a quarantined "
                  "buffer is lost");
        return MPI_ERR_NO_MEM;
    }
    *d = *b;
    d->cap = bytes;
    memcpy(d->data, b->data, (size_t)bytes);
    d->qid = ftw_quarantine_add(d->ubuf, d->ucount, d->udt);
    d->next = deferred;
    deferred = d;
    return FTW_ERR_BUFFER_UNUSABLE;
}

int ftw_bounce_finish(ftw_bounce_t *b, MPI_Status *st)
{
    MPI_Count bytes = b->cap;
    int cancelled = 0, rc;

    if (st != MPI_STATUS_IGNORE) {
        PMPI_Test_cancelled(st, &cancelled);
        if (cancelled)
            return MPI_SUCCESS;
        if (PMPI_Get_elements_x(st, MPI_BYTE, &bytes) != MPI_SUCCESS ||
            bytes < 0 || bytes > b->cap)
            bytes = b->cap;
    }
    ftw_grave_progress();   /* an old transfer may have ended by now */
    if (!ftw_quarantine_overlaps_before(b->lo, (size_t)(b->hi - b->lo),
                                        UINT_MAX)) {
        bounce_copy(b, bytes);
        return MPI_SUCCESS;
    }
    rc = bounce_defer(b, bytes);
    if (st != MPI_STATUS_IGNORE)
        st->MPI_ERROR = rc;
    return rc;
}

/* Deliver the deferred data no older range covers; 1 if any was. */
static int bounce_deliver_free(void)
{
    ftw_bounce_t **pp = &deferred;
    int done = 0;

    while (*pp != NULL) {
        ftw_bounce_t *d = *pp;

        if (ftw_quarantine_overlaps_before(d->lo, (size_t)(d->hi - d->lo),
                                           d->qid)) {
            pp = &d->next;
            continue;
        }
        bounce_copy(d, d->cap);
        ftw_quarantine_release(d->qid);
        ftw_info("deferred message delivered into [%p, %p)",
                 (void *)d->lo, (void *)d->hi);
        *pp = d->next;
        free(d);
        done = 1;
    }
    return done;
}

void ftw_bounce_progress(void)
{
    /* A delivery releases its own range, which may free a newer one. */
    while (deferred != NULL && bounce_deliver_free())
        ;
}
