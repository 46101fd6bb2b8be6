// Built into a tensor library only when torch uses the pre-C++11 ABI (-D_GLIBCXX_USE_CXX11_ABI=0, as this
// file is): glog (Debian's) is built on the C++11 ABI, so the one glog symbol whose name carries the ABI,
// CheckOpMessageBuilder::NewString (a CHECK_EQ/CHECK_LT... message), has no pre-C++11 twin to link. This
// defines that twin: it returns glog's own string (glog_cxx11_bridge.cpp calls glog's NewString), which
// only glog reads (LogMessageFatal's CheckOpString); this side never looks inside it.
#include <string>

#include <glog/logging.h>

extern "C" void* lwsplit_glog_new_string_cxx11(google::base::CheckOpMessageBuilder* builder);

std::string* google::base::CheckOpMessageBuilder::NewString() {
  return static_cast<std::string*>(lwsplit_glog_new_string_cxx11(this));
}
