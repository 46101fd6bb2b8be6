// lwsplit-harness protocol, tensor half: a tree's allocation compiled against torch.
//
// A library built with this header answers lwsplit_call (protocol.h: "key=value" lines in, one JSON
// object out, a CHECK caught and named) and keeps the tensors its last call allocated in one list:
// the JSON names them by index, lwsplit_take_tensor(i) hands tensor i over as a DLPack
// DLManagedTensor (the caller owns it; its deleter keeps torch's storage alive), and
// lwsplit_clear_tensors() drops the library's references. The library is loaded in the rank process
// (tensors cannot cross a process boundary); like protocol.h it is not thread-safe. Each call runs on a
// thread of its own (protocol.h) that takes on the caller's torch thread state and current card.
//
// No C++ exception crosses this C boundary (it would end the rank in std::terminate): a tensor that
// cannot be handed over (one on the meta device: c10::BufferError; any other throw) makes
// lwsplit_take_tensor return NULL, and lwsplit_tensor_error() says why until the next take.
#pragma once

#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#include <ATen/ThreadLocalState.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <string>
#include <vector>

#include "protocol.h"

namespace lwsplit {
namespace {

std::vector<at::Tensor> g_tensors;
std::string g_tensor_error;

// lwsplit_call runs the allocation on a thread of its own (protocol.h): it takes on the calling thread's
// torch state (grad mode, dispatch keys: at::ThreadLocalState, as torch's own worker threads do) and its
// current card (a rank's torch.cuda.set_device is per thread).
struct CallerContext {
  at::ThreadLocalState state;
  bool has_card = false;
  c10::Device card{c10::DeviceType::CPU};
};

void* capture_context() {
  auto* context = new CallerContext();
  if (c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) {
    const auto* guard = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    if (guard->deviceCount() > 0) {
      context->card = guard->getDevice();
      context->has_card = true;
    }
  }
  return context;
}

void enter_context(void* raw) {
  const auto* context = static_cast<const CallerContext*>(raw);
  at::ThreadLocalState::setThreadLocalState(context->state);
  if (context->has_card) c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->setDevice(context->card);
}

void drop_context(void* raw) { delete static_cast<CallerContext*>(raw); }

const bool g_context_hooks = [] {
  g_capture_context = &capture_context;
  g_enter_context = &enter_context;
  g_drop_context = &drop_context;
  return true;
}();

// The index lwsplit_take_tensor hands `t` over by; -1 for an undefined tensor (nothing to hand over).
int64_t keep(const at::Tensor& t) {
  if (!t.defined()) return -1;
  g_tensors.push_back(t);
  return static_cast<int64_t>(g_tensors.size()) - 1;
}

}  // namespace
}  // namespace lwsplit

extern "C" void* lwsplit_take_tensor(int64_t index) {
  using lwsplit::g_tensor_error;
  using lwsplit::g_tensors;
  g_tensor_error.clear();
  if (index < 0 || index >= static_cast<int64_t>(g_tensors.size())) {
    g_tensor_error = "no tensor " + std::to_string(index) + " (the call kept " + std::to_string(g_tensors.size()) + ")";
    return nullptr;
  }
  try {
    return at::toDLPack(g_tensors[static_cast<size_t>(index)]);
  } catch (const std::exception& exc) {
    g_tensor_error = exc.what();
  } catch (...) {
    g_tensor_error = "an exception that is not a std::exception";
  }
  if (g_tensor_error.empty()) g_tensor_error = "an exception with no message";
  return nullptr;
}

extern "C" const char* lwsplit_tensor_error() { return lwsplit::g_tensor_error.c_str(); }

extern "C" int64_t lwsplit_tensor_count() { return static_cast<int64_t>(lwsplit::g_tensors.size()); }

extern "C" void lwsplit_clear_tensors() { lwsplit::g_tensors.clear(); }

extern "C" int lwsplit_tensor_abi_version() { return 2; }
