// Compiled on the C++11 ABI (-D_GLIBCXX_USE_CXX11_ABI=1), glog's: calls glog's own
// CheckOpMessageBuilder::NewString for glog_old_abi.cpp (see there). No torch header here.
#include <string>

#include <glog/logging.h>

extern "C" void* lwsplit_glog_new_string_cxx11(google::base::CheckOpMessageBuilder* builder) {
  return builder->NewString();
}
