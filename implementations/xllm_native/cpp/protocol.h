// lwsplit-harness protocol: the one C ABI every glue file answers.
//
// One C entry point, lwsplit_call(request) -> response: the request is
// "key=value" lines, the response one JSON object. A glog CHECK failure inside
// the planning code does not abort the process: the failure function installed
// here jumps back to lwsplit_call, which answers {"check": {file, line,
// message}} naming the CHECK that fired. Not thread-safe (one global
// ParallelConfig, one jump buffer): the Python side holds a lock. glog writes nothing to stderr; with
// LWSPLIT_NATIVE_LOG set (contract/interface.py NATIVE_LOG_ENV: a harness rank sets it; the host points it
// at its own stderr) every message is appended to that file at once, so a crash or a hang leaves the
// tree's last lines.
#pragma once

#include <glog/logging.h>

#include <fcntl.h>
#include <unistd.h>

#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace lwsplit {
namespace {

sigjmp_buf g_jump;
volatile bool g_armed = false;
std::string g_fatal_file;
int g_fatal_line = 0;
std::string g_fatal_message;
int g_saved_stderr = -1;

// glog writes "*** Check failure stack trace: ***" to fd 2 between telling its sinks and calling
// the failure function: fd 2 points at /dev/null for that moment only.
void silence_stderr() {
  if (g_saved_stderr >= 0) return;
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null_fd < 0) return;
  g_saved_stderr = ::dup(STDERR_FILENO);
  ::dup2(null_fd, STDERR_FILENO);
  ::close(null_fd);
}

void restore_stderr() {
  if (g_saved_stderr < 0) return;
  ::dup2(g_saved_stderr, STDERR_FILENO);
  ::close(g_saved_stderr);
  g_saved_stderr = -1;
}

int g_log_fd = -1;
int64_t g_log_left = 8 << 20;  // a runaway logger stops here

class Sink : public google::LogSink {
 public:
  void send(google::LogSeverity severity, const char* full_filename,
            const char* base_filename, int line, const std::tm* /*t*/,
            const char* message, size_t message_len) override {
    if (g_log_fd >= 0 && g_log_left > 0 && g_armed) {  // during this library's own call (several may be open)
      std::string text = std::string(1, "IWEF"[severity < 0 || severity > 3 ? 0 : severity]) + " " +
                         (base_filename ? base_filename : "?") + ":" + std::to_string(line) + "] " +
                         std::string(message, message_len) + "\n";
      g_log_left -= static_cast<int64_t>(text.size());
      if (::write(g_log_fd, text.data(), text.size()) < 0) g_log_left = 0;
    }
    if (severity != google::GLOG_FATAL) return;
    g_fatal_file = full_filename ? full_filename : "";
    g_fatal_line = line;
    g_fatal_message.assign(message, message_len);
    if (g_armed) silence_stderr();
  }
};

void on_failure() {
  restore_stderr();
  if (g_armed) {
    g_armed = false;
    siglongjmp(g_jump, 1);
  }
  std::abort();
}

void init_logging() {
  static bool done = false;
  if (done) return;
  done = true;
  if (!google::IsGoogleLoggingInitialized()) {
    google::InitGoogleLogging("lwsplit_native");
  }
  for (int severity = 0; severity < google::NUM_SEVERITIES; ++severity) {
    google::SetLogDestination(severity, "");  // no log files
  }
  FLAGS_logtostderr = false;
  FLAGS_alsologtostderr = false;
  FLAGS_stderrthreshold = google::NUM_SEVERITIES;  // the sink reports fatals
  const char* log_path = std::getenv("LWSPLIT_NATIVE_LOG");
  if (log_path != nullptr && *log_path != '\0') {
    g_log_fd = ::open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  }
  static Sink sink;
  google::AddLogSink(&sink);
}

class Request {
 public:
  explicit Request(const char* text) {
    std::istringstream in(text ? text : "");
    std::string line;
    while (std::getline(in, line)) {
      const auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      values_[line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  std::string str(const std::string& key, const std::string& fallback = "") const {
    const auto it = values_.find(key);
    return it == values_.end() ? fallback : it->second;
  }
  int64_t i64(const std::string& key, int64_t fallback = 0) const {
    const auto it = values_.find(key);
    if (it == values_.end() || it->second.empty()) return fallback;
    return std::stoll(it->second);
  }
  double f64(const std::string& key, double fallback = 0.0) const {
    const auto it = values_.find(key);
    if (it == values_.end() || it->second.empty()) return fallback;
    return std::stod(it->second);
  }
  bool flag(const std::string& key) const { return i64(key, 0) != 0; }
  std::vector<std::string> list(const std::string& key) const {
    std::vector<std::string> out;
    const std::string text = str(key);
    if (text.empty()) return out;
    std::string item;
    std::istringstream in(text);
    while (std::getline(in, item, ',')) out.push_back(item);
    return out;
  }

 private:
  std::map<std::string, std::string> values_;
};

std::string quote(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

class Json {
 public:
  Json& num(const std::string& key, int64_t value) {
    return raw(key, std::to_string(value));
  }
  Json& raw(const std::string& key, const std::string& value) {
    body_ += (body_.empty() ? "" : ",") + quote(key) + ":" + value;
    return *this;
  }
  std::string str() const { return "{" + body_ + "}"; }

 private:
  std::string body_;
};

template <typename T>
std::string array(const std::vector<T>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    out += (i ? "," : "") + std::to_string(static_cast<int64_t>(values[i]));
  }
  return out + "]";
}

// A KVCacheCapacity as JSON: upstream's and a port's carry the same accessors (the harness reads
// these names, whichever tree's type answers them).
template <typename Capacity>
std::string capacity(const Capacity& c) {
  Json j;
  j.num("n_blocks", c.n_blocks())
      .num("cache_size_in_bytes", c.cache_size_in_bytes())
      .num("block_size", c.block_size())
      .num("slot_size", c.slot_size())
      .num("index_slot_size", c.index_slot_size())
      .num("num_indexer_layers", c.num_indexer_layers())
      .num("scale_slot_size", c.scale_slot_size())
      .num("linear_slot_size", c.linear_slot_size())
      .num("linear_cache_size_in_bytes", c.linear_cache_size_in_bytes())
      .num("n_layers", c.n_layers())
      .num("num_linear_state_blocks", c.num_linear_state_blocks())
      .num("num_full_attention_layers", c.num_full_attention_layers())
      .num("num_linear_attention_layers", c.num_linear_attention_layers());
  return j.str();
}

// Every KVCacheCapacity property, as the engine hands it to KVCacheShape (the tensor library's allocate
// takes them back as cap.<name>; a base library's speculative_caps as t.cap.<name> / d.cap.<name>).
template <typename Capacity>
std::string shape_capacity(const Capacity& c) {
  Json j;
  j.num("n_blocks", c.n_blocks()).num("cache_size_in_bytes", c.cache_size_in_bytes())
      .num("block_size", c.block_size()).num("slot_size", c.slot_size())
      .num("index_slot_size", c.index_slot_size()).num("num_indexer_layers", c.num_indexer_layers())
      .num("enable_indexer_cache_quant", c.enable_indexer_cache_quant() ? 1 : 0)
      .num("scale_slot_size", c.scale_slot_size()).num("linear_slot_size", c.linear_slot_size())
      .num("linear_cache_size_in_bytes", c.linear_cache_size_in_bytes())
      .num("linear_conv_state_len", c.linear_conv_state_len())
      .num("linear_ssm_checkpoint_stride", c.linear_ssm_checkpoint_stride())
      .num("n_layers", c.n_layers()).num("num_linear_state_blocks", c.num_linear_state_blocks())
      .num("num_full_attention_layers", c.num_full_attention_layers())
      .num("num_linear_attention_layers", c.num_linear_attention_layers())
      .num("swa_count", c.swa_count()).num("c4_count", c.c4_count()).num("c128_count", c.c128_count());
  return j.str();
}

}  // namespace

// Defined by the glue file: answers one request (op=...).
std::string dispatch(const Request& req);

namespace {
std::string g_out;

}  // namespace
}  // namespace lwsplit

extern "C" const char* lwsplit_call(const char* request) {
  using namespace lwsplit;
  init_logging();
  // glog keeps one failure function per process: take it back on every call (another tree's
  // library loaded in the same process installs its own).
  google::InstallFailureFunction(&on_failure);
  g_fatal_file.clear();
  g_fatal_line = 0;
  g_fatal_message.clear();
  if (sigsetjmp(g_jump, 0) != 0) {
    g_out = Json()
                .raw("check", Json()
                                  .raw("file", quote(g_fatal_file))
                                  .num("line", g_fatal_line)
                                  .raw("message", quote(g_fatal_message))
                                  .str())
                .str();
    return g_out.c_str();
  }
  g_armed = true;
  try {
    g_out = dispatch(Request(request));
  } catch (const std::exception& exc) {
    g_out = Json().raw("exception", quote(exc.what())).str();
  }
  g_armed = false;
  return g_out.c_str();
}

extern "C" int lwsplit_abi_version() { return 1; }
