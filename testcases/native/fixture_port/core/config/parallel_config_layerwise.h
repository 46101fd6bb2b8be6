#pragma once
#include <gflags/gflags.h>

DECLARE_int32(fx_split_size);
DECLARE_bool(fx_layerwise);
