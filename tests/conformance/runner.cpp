// The runner: one child process per check, so a crash, an abort() or a hang inside a plugin is
// that check's failure (naming the last step it reached), never the suite's.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "conformance.h"

namespace conformance {

namespace {

// Records cross the pipe as lines "<type> <message>", with '\\' and '\n' escaped.
std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\\')
      o += "\\\\";
    else if (c == '\n')
      o += "\\n";
    else
      o += c;
  }
  return o;
}

std::string unescape(const std::string& s) {
  std::string o;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      o += s[i + 1] == 'n' ? '\n' : s[i + 1];
      ++i;
    } else {
      o += s[i];
    }
  }
  return o;
}

void write_all(int fd, const std::string& s) {
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

std::vector<std::pair<char, std::string>> parse_records(const std::string& data) {
  std::vector<std::pair<char, std::string>> out;
  size_t start = 0;
  while (start < data.size()) {
    size_t nl = data.find('\n', start);
    if (nl == std::string::npos) nl = data.size();
    std::string line = data.substr(start, nl - start);
    if (line.size() >= 2 && line[1] == ' ') out.emplace_back(line[0], unescape(line.substr(2)));
    start = nl + 1;
  }
  return out;
}

Verdict verdict_of(const std::vector<std::pair<char, std::string>>& recs) {
  bool fail = false, warn = false, skip = false;
  for (const auto& r : recs) {
    fail |= r.first == 'F';
    warn |= r.first == 'W';
    skip |= r.first == 'S';
  }
  if (fail) return Verdict::Fail;
  if (skip) return Verdict::Skip;
  if (warn) return Verdict::Warn;
  return Verdict::Pass;
}

std::string last_step(const std::vector<std::pair<char, std::string>>& recs) {
  for (auto it = recs.rbegin(); it != recs.rend(); ++it)
    if (it->first == 'P') return it->second;
  return "";
}

std::string signal_name(int sig) {
  const char* d = strsignal(sig);
  return std::string("signal ") + std::to_string(sig) + (d ? std::string(" (") + d + ")" : std::string());
}

}  // namespace

void Ctx::emit(char type, const std::string& msg) {
  if (fd_ < 0) {
    records.emplace_back(type, msg);
    return;
  }
  write_all(fd_, std::string(1, type) + " " + escape(msg) + "\n");
}

void Ctx::step(const std::string& what) { emit('P', what); }
void Ctx::fail(const std::string& msg) { emit('F', msg); }
void Ctx::warn(const std::string& msg) { emit('W', msg); }
void Ctx::skip(const std::string& msg) { emit('S', msg); }
void Ctx::note(const std::string& msg) { emit('N', msg); }

bool Ctx::refused(wsync_status_t st, const std::string& call, wsync_status_t want, bool want_is_advice) {
  if (st == WSYNC_OK) {
    fail(call + " returned WSYNC_OK; it must be refused");
    return false;
  }
  const std::string err = last_error();
  if (want != WSYNC_OK && st != want) {
    const std::string m = call + " returned " + status_str(st) + ", expected " + status_str(want) +
                          (err.empty() ? "" : " (message: " + err + ")");
    if (want_is_advice)
      warn(m);
    else
      fail(m);
    return false;
  }
  note(call + " -> " + status_str(st) + (err.empty() ? "" : ": " + err));
  return true;
}

int Summary::exit_code(bool strict) const {
  if (failed > 0 || (strict && warned > 0)) return 1;
  if (no_device) return 77;
  return 0;
}

CheckResult run_check(const Config& cfg, const Check& check) {
  CheckResult r;
  r.name = check.name;
  if (!cfg.fork) {
    Ctx ctx(-1);
    ::wsync::clear_error();
    check.fn(ctx);
    r.records = ctx.records;
    r.verdict = verdict_of(r.records);
    return r;
  }
  int fds[2];
  if (pipe(fds) != 0) {
    r.records.emplace_back('F', std::string("pipe() failed: ") + std::strerror(errno));
    r.verdict = Verdict::Fail;
    return r;
  }
  std::fflush(nullptr);  // no buffered output duplicated into the child
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    r.records.emplace_back('F', std::string("fork() failed: ") + std::strerror(errno));
    r.verdict = Verdict::Fail;
    return r;
  }
  if (pid == 0) {
    close(fds[0]);
    Ctx ctx(fds[1]);
    ::wsync::clear_error();
    check.fn(ctx);
    std::fflush(nullptr);
    _exit(0);  // no atexit handlers or static destructors of the parent's state
  }
  close(fds[1]);
  const int64_t limit = check.timeout_ms > 0 ? check.timeout_ms : cfg.timeout_ms;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(limit);
  std::string data;
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd p = {fds[0], POLLIN, 0};
    int pr = poll(&p, 1, static_cast<int>(left > 1000 ? 1000 : left));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    char buf[4096];
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child closed its end (it exited, or died)
    data.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  if (timed_out) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  } else {
    // EOF came; the child is exiting. A grandchild (a plugin's helper) could hold the pipe: EOF
    // then waits for it, which the deadline bounds.
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  r.records = parse_records(data);
  const std::string where = last_step(r.records);
  const std::string while_ = where.empty() ? "" : " while: " + where;
  if (timed_out) {
    r.records.emplace_back('F', "did not finish within " + std::to_string(limit) + " ms" + while_);
  } else if (WIFSIGNALED(status)) {
    r.records.emplace_back('F', "crashed with " + signal_name(WTERMSIG(status)) + while_);
  } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    r.records.emplace_back('F', "the process exited with status " + std::to_string(WEXITSTATUS(status)) + while_ +
                                    " (a plugin must never exit the process)");
  }
  r.verdict = verdict_of(r.records);
  return r;
}

void report(const Config& cfg, const CheckResult& r, Summary* s) {
  const char* tag = "PASS";
  switch (r.verdict) {
    case Verdict::Pass: ++s->passed; tag = "PASS"; break;
    case Verdict::Warn: ++s->warned; tag = "WARN"; break;
    case Verdict::Skip: ++s->skipped; tag = "SKIP"; break;
    case Verdict::Fail: ++s->failed; tag = "FAIL"; break;
  }
  s->results.push_back(r);
  if (cfg.quiet) return;
  std::printf("[ %s ] %s\n", tag, r.name.c_str());
  for (const auto& rec : r.records) {
    const char* what = nullptr;
    switch (rec.first) {
      case 'F': what = "failed: "; break;
      case 'W': what = "warning: "; break;
      case 'S': what = "skipped: "; break;
      case 'N': what = cfg.verbose ? "" : nullptr; break;
      default: break;
    }
    if (what == nullptr) continue;
    std::string m = rec.second;
    for (size_t p = m.find('\n'); p != std::string::npos; p = m.find('\n', p + 1)) m.insert(p + 1, "           ");
    std::printf("         %s%s\n", what, m.c_str());
  }
  std::fflush(stdout);
}

std::string status_str(wsync_status_t st) { return std::string(wsync_status_name(st)) + " (" + std::to_string(st) + ")"; }

std::string last_error() { return ::wsync::last_error(); }

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

bool parse_plugin_file_name(const std::string& path, Kind* kind, std::string* name) {
  std::string base = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  const std::string so = ".so";
  if (base.size() <= so.size() || base.compare(base.size() - so.size(), so.size(), so) != 0) return false;
  base.resize(base.size() - so.size());
  const std::string t = "libwsync_transport_", a = "libwsync_adapter_";
  if (base.compare(0, t.size(), t) == 0 && base.size() > t.size()) {
    *kind = Kind::Transport;
    *name = base.substr(t.size());
    return true;
  }
  if (base.compare(0, a.size(), a) == 0 && base.size() > a.size()) {
    *kind = Kind::Adapter;
    *name = base.substr(a.size());
    return true;
  }
  return false;
}

Summary run_suite(const Config& cfg) {
  return cfg.kind == Kind::Transport ? run_transport_suite(cfg) : run_adapter_suite(cfg);
}

}  // namespace conformance
