// wsync-conformance: checks that a transport or adapter plugin keeps the plugin ABI's contract
// (include/wsync_plugin.h, docs/PLUGINS.md). Each check runs in a child process (fork), so a
// plugin that crashes or hangs is reported as a failure of that check, never as a crash of the
// suite. See README.md in this folder.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "wsync_plugin.h"

namespace conformance {

enum class Kind { Transport, Adapter };

// What one run checks and how.
struct Config {
  std::string path;                                        // the plugin file
  Kind kind = Kind::Adapter;                               // from the file name
  std::string name;                                        // <name> of libwsync_<kind>_<name>.so
  std::vector<std::pair<std::string, std::string>> options;  // --option key=value: for a valid create
  bool strict = false;    // warnings fail too
  bool loopback = true;   // transports with HOST_MEMORY: move two buckets between two in-process ranks
  bool fork = true;       // run each check in a child process
  bool verbose = false;   // print notes
  bool quiet = false;     // print nothing (nested runs of the degraded suite)
  int64_t timeout_ms = 20000;  // per check
};

// Results of one check as it runs. Every call writes through at once (to the parent's pipe when
// forked), so what happened before a crash is still reported.
class Ctx {
 public:
  explicit Ctx(int fd) : fd_(fd) {}
  void step(const std::string& what);  // "while: <what>" if the check crashes or hangs after it
  void fail(const std::string& msg);
  void warn(const std::string& msg);   // an advisory: fails only with --strict
  void skip(const std::string& msg);   // the check (or part of it) cannot run here
  void note(const std::string& msg);   // shown with --verbose
  bool expect(bool cond, const std::string& msg) {
    if (!cond) fail(msg);
    return cond;
  }
  // `st` must not be WSYNC_OK (the call was refused); `want` (if not WSYNC_OK) is the expected
  // code: a different one is a failure, or a warning when `want_is_advice`.
  bool refused(wsync_status_t st, const std::string& call, wsync_status_t want = WSYNC_OK, bool want_is_advice = false);

  // Records collected in process (fd == -1).
  std::vector<std::pair<char, std::string>> records;

 private:
  void emit(char type, const std::string& msg);
  int fd_;
};

struct Check {
  std::string name;
  std::function<void(Ctx&)> fn;
  int64_t timeout_ms = 0;  // 0: the config's
};

enum class Verdict { Pass, Warn, Skip, Fail };

struct CheckResult {
  std::string name;
  Verdict verdict = Verdict::Pass;
  std::vector<std::pair<char, std::string>> records;
};

struct Summary {
  int passed = 0, warned = 0, skipped = 0, failed = 0;
  std::vector<CheckResult> results;  // in order
  bool no_device = false;  // the plugin refused to load for lack of a device: everything skipped
  // 0: passed (warnings allowed unless strict), 1: failed, 77: skipped (no device).
  int exit_code(bool strict) const;
};

// Run one check (in a child process when cfg.fork).
CheckResult run_check(const Config& cfg, const Check& check);
// Print a result (unless cfg.quiet) and count it.
void report(const Config& cfg, const CheckResult& r, Summary* s);

// The suites.
Summary run_suite(const Config& cfg);  // the plugin in cfg.path; by kind
Summary run_adapter_suite(const Config& cfg);
Summary run_transport_suite(const Config& cfg);
Summary run_degraded_suite(const Config& cfg, const std::string& testing_dir, const std::string& broken_dir);

// Helpers.
std::string status_str(wsync_status_t st);  // "WSYNC_ERR_TIMEOUT (5)"
std::string last_error();                  // the calling thread's wsync last error
bool contains(const std::string& hay, const std::string& needle);
// Parse the file name: libwsync_transport_<name>.so / libwsync_adapter_<name>.so.
bool parse_plugin_file_name(const std::string& path, Kind* kind, std::string* name);
// Strict JSON (RFC 8259) validation; on failure `why` says where.
bool json_valid(const char* text, std::string* why);

}  // namespace conformance
