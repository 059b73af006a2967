/* The quarantine table: a short array; it is empty unless failures left
 * transfers the MPI would not let go. */
#include "buf/quarantine.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "core/types.h"
#include "ftwrap.h"
#include "buf/cut.h"
#include "core/ft.h"
#include "core/progress.h"
#include "core/request.h"
#include "util/log.h"
#include "util/stats.h"

typedef struct {
    unsigned id;
    const char *lo, *hi;
} range_t;

_Atomic int ftw_quarantine_count;
static range_t *ranges;
static int cap_ranges;
static unsigned next_id = 1;
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;

int ftw_buffer_span(const void *buf, MPI_Count count, MPI_Datatype dt,
                    const char **lo_p, const char **hi_p)
{
    MPI_Count lo, hi;

    if (ftw_type_span(dt, count, &lo, &hi) != MPI_SUCCESS)
        return MPI_ERR_TYPE;
    *lo_p = (const char *)buf + lo;
    *hi_p = (const char *)buf + hi;
    return MPI_SUCCESS;
}

unsigned ftw_quarantine_add(const void *buf, MPI_Count count,
                            MPI_Datatype dt)
{
    const char *lo, *hi;
    unsigned id = 0;

    if (buf == NULL || ftw_buffer_span(buf, count, dt, &lo, &hi) !=
                           MPI_SUCCESS || lo == hi)
        return 0;
    ftw_mt_lock(&q_lock);
    if (ftw_quarantine_count == cap_ranges) {
        int cap = cap_ranges ? 2 * cap_ranges : 8;
        range_t *r = realloc(ranges, sizeof(*r) * (size_t)cap);

        if (r == NULL) {
            ftw_mt_unlock(&q_lock);
            ftw_error("out of memory: a buffer a failed transfer may still "
                      "write cannot be quarantined");
            return 0;
        }
        ranges = r;
        cap_ranges = cap;
    }
    id = next_id++;
    ranges[ftw_quarantine_count] = (range_t){ id, lo, hi };
    ftw_gate_add(ftw_quarantine_count, 1);
    ftw_mt_unlock(&q_lock);
    ftw_stat_add(FTW_STAT_QUARANTINED, 1);
    ftw_info("receive buffer [%p, %p) quarantined", (const void *)lo,
             (const void *)hi);
    return id;
}

void ftw_quarantine_release(unsigned id)
{
    if (id == 0)
        return;
    ftw_mt_lock(&q_lock);
    for (int i = 0; i < ftw_quarantine_count; i++) {
        if (ranges[i].id == id) {
            ftw_info("receive buffer [%p, %p) released",
                     (const void *)ranges[i].lo, (const void *)ranges[i].hi);
            /* Its receive was failed already: its cuts are accounted for. */
            if (ftw_cut_count)
                ftw_cut_forget(ranges[i].lo, ranges[i].hi);
            ftw_gate_add(ftw_quarantine_count, -1);
            ranges[i] = ranges[ftw_quarantine_count];
            ftw_stat_add(FTW_STAT_RELEASED, 1);
            break;
        }
    }
    ftw_mt_unlock(&q_lock);
}

int ftw_quarantine_overlaps_before(const void *buf, size_t len,
                                   unsigned id)
{
    const char *lo = buf, *hi = lo + len;
    int hit = 0;

    ftw_mt_lock(&q_lock);
    for (int i = 0; i < ftw_quarantine_count && !hit; i++)
        hit = ranges[i].id < id && lo < ranges[i].hi && ranges[i].lo < hi;
    ftw_mt_unlock(&q_lock);
    return hit;
}

int ftw_quarantine_overlaps(const void *buf, size_t len)
{
    return ftw_quarantine_overlaps_before(buf, len, UINT_MAX);
}

FTW_EXPORT int FTW_Buffer_quarantined(const void *buf, MPI_Aint len,
                                      int *flag)
{
    if (flag == NULL || len < 0)
        return MPI_ERR_ARG;
    ftw_wrap_check();
    ftw_grave_progress();
    *flag = ftw_quarantine_count && ftw_quarantine_overlaps(buf, (size_t)len);
    return MPI_SUCCESS;
}

FTW_EXPORT int FTW_Buffer_wait_release(const void *buf, MPI_Aint len,
                                       double timeout_s, int *released)
{
    double t0 = PMPI_Wtime();
    ftw_poll_t p;

    if (released == NULL || len < 0 || timeout_s < 0)
        return MPI_ERR_ARG;
    ftw_poll_init(&p);
    for (;;) {
        ftw_grave_progress();
        if (!ftw_quarantine_count ||
            !ftw_quarantine_overlaps(buf, (size_t)len)) {
            *released = 1;
            return MPI_SUCCESS;
        }
        if (PMPI_Wtime() - t0 >= timeout_s) {
            *released = 0;
            return MPI_SUCCESS;
        }
        ftw_poll_changed(&p);
        ftw_poll_idle(&p);
    }
}
