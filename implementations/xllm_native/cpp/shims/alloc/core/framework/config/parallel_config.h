// lwsplit-harness shim for core/framework/config/parallel_config.h: the project's reduced
// ParallelConfig (the planning build's shim), which util::kv_split_size_effective reads.
#pragma once
#include "../../../../../parallel_config.h"
