// lwsplit-harness shim for the generated worker.pb.h: kv_cache_shape.cpp's to_proto/from_proto
// (the engine ships a KVCacheShape to remote workers) name proto::KVCacheShape and
// RepeatedField<int64_t>. The allocation path builds the shape in-process and never converts it.
#pragma once
#include <cstdint>
#include <vector>

#include "shim.h"

namespace google::protobuf {
template <typename T>
class RepeatedField {
 public:
  void Reserve(int) {}
  void Add(T) { LWSPLIT_SHIM_UNREACHED("RepeatedField::Add"); }
  const T* begin() const { return nullptr; }
  const T* end() const { return nullptr; }
};
}  // namespace google::protobuf

namespace xllm::proto {
class KVCacheShape {
 public:
  using Field = google::protobuf::RepeatedField<int64_t>;
  void Clear() { LWSPLIT_SHIM_UNREACHED("proto::KVCacheShape"); }
  void set_grouped_cache_layout(bool) {}
  bool grouped_cache_layout() const {
    LWSPLIT_SHIM_UNREACHED("proto::KVCacheShape");
    return false;
  }
#define LWSPLIT_SHAPE_FIELD(name)                    \
  Field* mutable_##name() { return &name##_; }       \
  const Field& name() const { return name##_; }      \
  int name##_size() const { return 0; }              \
  Field name##_;
  LWSPLIT_SHAPE_FIELD(key_cache_shape)
  LWSPLIT_SHAPE_FIELD(value_cache_shape)
  LWSPLIT_SHAPE_FIELD(index_cache_shape)
  LWSPLIT_SHAPE_FIELD(index_cache_scale_shape)
  LWSPLIT_SHAPE_FIELD(conv_cache_shape)
  LWSPLIT_SHAPE_FIELD(ssm_cache_shape)
#undef LWSPLIT_SHAPE_FIELD
};
}  // namespace xllm::proto
