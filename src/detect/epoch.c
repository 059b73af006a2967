/* The failure epoch the detector publishes. */
#include "detect/detect.h"

_Atomic uint32_t ftw_fail_epoch;
