// lwsplit-harness protocol: the one C ABI every glue file answers.
//
// One C entry point, lwsplit_call(request) -> response: the request is
// "key=value" lines, the response one JSON object. A glog CHECK failure inside
// the planning code does not abort the process, and nothing is unwound or jumped
// over: lwsplit_call runs each request on a thread of its own and waits for it;
// the failure function installed here, called on that thread from inside glog's
// LogMessageFatal destructor (noexcept: an exception may not leave it), tells the
// waiting caller and parks the thread for good (it never returns, so no destructor
// is skipped: they never run, and what the thread's frames hold stays allocated).
// lwsplit_call then answers {"check": {file, line, message}} naming the CHECK that
// fired; lwsplit_parked_threads() says how many threads are parked. lwsplit_serve(requests, replies) is the
// host process's loop over its two pipes (runtime/host.py). Not thread-safe
// (one global ParallelConfig, one call at a time): the Python side holds a lock. glog writes nothing to stderr; with
// LWSPLIT_NATIVE_LOG set (contract/interface.py NATIVE_LOG_ENV: a harness rank sets it; the host points it
// at its own stderr) every message is appended to that file at once, so a crash or a hang leaves the
// tree's last lines.
#pragma once

#include <glog/logging.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace lwsplit {
namespace {

std::atomic<bool> g_armed{false};  // a call is running (its thread may log and may fire a CHECK)
thread_local bool t_call_thread = false;  // this is the thread lwsplit_call started for the call
enum class CallState { running, answered, checked };
// Never destroyed: a tree calling exit() on the call's thread runs the static destructors while the caller
// still waits on them (destroying a condition variable with a waiter blocks for good).
std::mutex& g_call_mutex = *new std::mutex;
std::condition_variable& g_call_done = *new std::condition_variable;
CallState g_call_state = CallState::answered;
std::string g_answer;
std::atomic<int64_t> g_parked{0};
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
    if (g_log_fd >= 0 && g_log_left > 0 && g_armed.load()) {  // during this library's own call (several may be open)
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
    if (g_armed.load() && t_call_thread) silence_stderr();
  }
};

// glog's failure function (it must not return). On the call's own thread: tell lwsplit_call, then park this
// thread for good; anywhere else (a thread the tree started, no call running): abort, as glog would.
[[noreturn]] void on_failure() {
  restore_stderr();
  if (t_call_thread && g_armed.exchange(false)) {
    {
      std::lock_guard<std::mutex> lock(g_call_mutex);
      g_call_state = CallState::checked;
    }
    g_call_done.notify_all();
    for (;;) ::pause();  // every asynchronous signal is blocked on this thread (call_thread): it sleeps for good
  }
  std::abort();
}

// Set by a tensor library (alloc_protocol.h): what the calling thread's state the call's thread takes on
// (torch's thread-local state, the current device).
void* (*g_capture_context)() = nullptr;
void (*g_enter_context)(void*) = nullptr;
void (*g_drop_context)(void*) = nullptr;

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

struct CallArgs {
  std::string request;
  void* context;
};

// The call's thread: asynchronous signals stay with the caller's threads (a Python process handles them on
// its main thread; faulthandler's SIGUSR1 dump is asked of the process); a fault of the tree's code (SIGSEGV,
// SIGXFSZ) still reaches this thread and ends the process.
void* call_thread(void* raw) {
  std::unique_ptr<CallArgs> args(static_cast<CallArgs*>(raw));
  sigset_t async;
  sigemptyset(&async);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGALRM, SIGUSR1, SIGUSR2, SIGWINCH,
                        SIGPROF, SIGVTALRM, SIGCONT, SIGTSTP, SIGTTIN, SIGTTOU, SIGURG, SIGIO}) {
    sigaddset(&async, sig);
  }
  pthread_sigmask(SIG_BLOCK, &async, nullptr);
  t_call_thread = true;
  if (args->context != nullptr && g_enter_context != nullptr) g_enter_context(args->context);
  std::string answer;
  try {
    answer = dispatch(Request(args->request.c_str()));
  } catch (const std::exception& exc) {
    answer = Json().raw("exception", quote(exc.what())).str();
  } catch (...) {
    answer = Json().raw("exception", quote("a C++ exception that is not a std::exception")).str();
  }
  {
    std::lock_guard<std::mutex> lock(g_call_mutex);
    g_answer = std::move(answer);
    g_call_state = CallState::answered;
  }
  g_call_done.notify_all();
  return nullptr;
}

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
  void* context = g_capture_context != nullptr ? g_capture_context() : nullptr;
  auto* args = new CallArgs{request ? request : "", context};
  {
    std::lock_guard<std::mutex> lock(g_call_mutex);
    g_call_state = CallState::running;
  }
  g_armed = true;
  pthread_t thread;
  const int started = pthread_create(&thread, nullptr, &call_thread, args);
  if (started != 0) {
    g_armed = false;
    delete args;
    if (context != nullptr && g_drop_context != nullptr) g_drop_context(context);
    g_out = Json().raw("exception", quote(std::string("could not start the call's thread: ") +
                                          std::strerror(started))).str();
    return g_out.c_str();
  }
  CallState state;
  {
    std::unique_lock<std::mutex> lock(g_call_mutex);
    g_call_done.wait(lock, [] { return g_call_state != CallState::running; });
    state = g_call_state;
  }
  g_armed = false;
  if (state == CallState::checked) {  // the thread is parked inside glog for good: never joined
    pthread_detach(thread);
    ++g_parked;
    g_out = Json()
                .raw("check", Json()
                                  .raw("file", quote(g_fatal_file))
                                  .num("line", g_fatal_line)
                                  .raw("message", quote(g_fatal_message))
                                  .str())
                .str();
  } else {
    pthread_join(thread, nullptr);
    g_out = g_answer;
  }
  if (context != nullptr && g_drop_context != nullptr) g_drop_context(context);
  return g_out.c_str();
}

// The host's loop (runtime/host.py hands its two pipes over once the library is open): for each request on
// `requests` (4-byte big-endian length, the bytes) lwsplit_call answers it, the C library's buffers are flushed
// (a printf reaches the stdout file before the reply, where the caller looks for it) and `replies` gets 'R', a
// 4-byte big-endian length and the reply; requests written ahead of their replies are answered in order, each
// on its own. Returns 0 when the request pipe ends, 1 when a pipe fails or a request is cut short. Compiled, so
// a request costs the host no interpreter's work (host.py, started by Python, calls it once).
extern "C" int lwsplit_serve(int requests, int replies) {
  std::string pending;
  char chunk[4096];
  auto fill = [&](size_t n) -> int {  // 1: `pending` holds n bytes; 0: the pipe ended first; -1: it failed
    while (pending.size() < n) {
      const ssize_t got = ::read(requests, chunk, sizeof(chunk));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return got == 0 ? 0 : -1;
      pending.append(chunk, static_cast<size_t>(got));
    }
    return 1;
  };
  auto write_all = [&](const char* data, size_t n) -> bool {
    while (n > 0) {
      const ssize_t put = ::write(replies, data, n);
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) return false;
      data += put;
      n -= static_cast<size_t>(put);
    }
    return true;
  };
  for (;;) {
    const int head = fill(4);
    if (head <= 0) return head == 0 && pending.empty() ? 0 : 1;
    const auto* b = reinterpret_cast<const unsigned char*>(pending.data());
    const size_t size = (size_t{b[0]} << 24) | (size_t{b[1]} << 16) | (size_t{b[2]} << 8) | size_t{b[3]};
    if (fill(4 + size) <= 0) return 1;
    const std::string request = pending.substr(4, size);
    pending.erase(0, 4 + size);
    const char* reply = lwsplit_call(request.c_str());
    std::fflush(nullptr);
    const size_t n = reply != nullptr ? std::strlen(reply) : 0;
    const char frame[5] = {'R', static_cast<char>((n >> 24) & 0xff), static_cast<char>((n >> 16) & 0xff),
                           static_cast<char>((n >> 8) & 0xff), static_cast<char>(n & 0xff)};
    if (!write_all(frame, sizeof(frame)) || !write_all(reply != nullptr ? reply : "", n)) return 1;
  }
}

extern "C" int lwsplit_abi_version() { return 1; }

extern "C" int64_t lwsplit_parked_threads() { return lwsplit::g_parked.load(); }
