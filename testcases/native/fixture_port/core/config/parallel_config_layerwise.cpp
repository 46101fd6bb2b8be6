#include "config/parallel_config_layerwise.h"

DEFINE_int32(fx_split_size, 1, "fixture port: layerwise split size");
DEFINE_bool(fx_layerwise, false, "fixture port: layerwise split on");
