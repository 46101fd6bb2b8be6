// lwsplit-harness shim for the generated tensor.pb.h: util/utils.h declares converters taking
// proto::Tensor; a declaration needs only the name.
#pragma once
namespace xllm::proto {
class Tensor;
}  // namespace xllm::proto
