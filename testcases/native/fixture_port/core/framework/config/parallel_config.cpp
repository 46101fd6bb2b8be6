// The same flag as core/config/parallel_config_layerwise.cpp: never compile both.
#include <gflags/gflags.h>

DEFINE_int32(fx_split_size, 1, "fixture port: layerwise split size (second definition)");
