// lwsplit-harness shim for core/common/types.h (pulls common.pb.h and nlohmann/json).
// The allocation files use only InstanceRole (a field of HostCacheValidationOptions, which
// validate_host_cache_options compares against DEFAULT); util/utils.h uses Slice.
#pragma once
#include <cstdint>

#include "util/slice.h"

namespace xllm {
class InstanceRole {
 public:
  enum RoleType : int8_t { DEFAULT = 0, PREFILL = 1, DECODE = 2, MIX = 3, INVALID = -1 };
  InstanceRole() = default;
  InstanceRole(RoleType role) : role_(role) {}
  operator RoleType() const { return role_; }

 private:
  RoleType role_ = DEFAULT;
};
}  // namespace xllm
