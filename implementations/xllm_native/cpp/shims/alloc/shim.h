// lwsplit-harness shim helper: the one failure every unreached shim function reports.
#pragma once
#include <glog/logging.h>

#define LWSPLIT_SHIM_UNREACHED(name) \
  LOG(FATAL) << "lwsplit shim: " name " is not part of the allocation path"
