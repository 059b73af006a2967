/*
 * ftw-info - print ftwrap's configuration table with the values the
 * current environment gives.  `ftwrun --print-config` runs it.
 */
#include <stdio.h>

#include "util/config.h"

int main(void)
{
    ftw_status_t status = ftw_config_load();

    ftw_config_print(stdout);
    return status == FTW_OK ? 0 : 1;
}
