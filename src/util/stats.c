/* Per-process counters. */
#include "util/stats.h"

#include <mpi.h>
#include <string.h>

#include "util/compiler.h"

_Atomic uint64_t ftw_stats[FTW_STAT_COUNT];

static const char *const stat_keys[] = {
#define FTW_STAT_KEY_(id, key, help) [FTW_STAT_##id] = key,
    FTW_STATS_LIST(FTW_STAT_KEY_)
#undef FTW_STAT_KEY_
};

void ftw_stats_print(FILE *out, int rank)
{
    char line[2048];
    int n;

    n = snprintf(line, sizeof(line), "[ftwrap r%d] stats:", rank);
    for (int i = 0; i < FTW_STAT_COUNT && n > 0 &&
                    (size_t)n < sizeof(line); i++)
        n += snprintf(line + n, sizeof(line) - (size_t)n, " %s=%llu",
                      stat_keys[i],
                      (unsigned long long)atomic_load(&ftw_stats[i]));
    fprintf(out, "%s\n", line);
    fflush(out);
}

FTW_EXPORT int FTW_Stat(const char *name, unsigned long long *value)
{
    if (name == NULL || value == NULL)
        return MPI_ERR_ARG;
    for (int i = 0; i < FTW_STAT_COUNT; i++) {
        if (strcmp(stat_keys[i], name) == 0) {
            *value = (unsigned long long)atomic_load(&ftw_stats[i]);
            return MPI_SUCCESS;
        }
    }
    return MPI_ERR_ARG;
}
