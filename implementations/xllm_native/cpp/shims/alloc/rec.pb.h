// lwsplit-harness shim for the generated rec.pb.h: util/utils.h declares (never defines inline)
// a converter taking proto::InferInputTensor; a declaration needs only the name.
#pragma once
namespace xllm::proto {
class InferInputTensor;
}  // namespace xllm::proto
