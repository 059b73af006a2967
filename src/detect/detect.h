/*
 * The failure detector's published state.  The detector bumps
 * ftw_fail_epoch each time it learns of a new failure; the wrappers'
 * fast path compares it with the epoch the application side last handled,
 * one relaxed atomic load per call.
 */
#ifndef FTW_DETECT_DETECT_H
#define FTW_DETECT_DETECT_H

#include <stdatomic.h>
#include <stdint.h>

extern _Atomic uint32_t ftw_fail_epoch;

#endif
