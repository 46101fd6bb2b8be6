#pragma once
#include <cstdint>
#include <vector>

namespace fxport {
// Counts the layers a worker allocates (the fixture allocates nothing itself).
int64_t fx_allocated_layers(const std::vector<bool>& mask);
}  // namespace fxport
