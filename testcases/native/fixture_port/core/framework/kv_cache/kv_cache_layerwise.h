#pragma once
#include <cstdint>
#include <vector>

namespace fxport {
// Counts the layers a worker allocates (the fixture allocates nothing itself).
int64_t fx_allocated_layers(const std::vector<bool>& mask);
// The allocation's refusals of the split (role allocation_checks), before it allocates: a worker handing a mask
// on (the split active) allocates with neither sleep mode nor xtensor.
void fx_allocation_checks(const std::vector<bool>& owned, bool sleep_mode, bool xtensor);
}  // namespace fxport
