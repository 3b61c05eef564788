// The degraded suite: plugins that are broken on purpose (plugins/testing, built into
// build/lib/wsync-testing, and tests/conformance/broken, built into
// build/lib/wsync-conformance-testing). Each must be refused with the documented status and a
// message naming the fault; the ones that are merely odd (optional functions left NULL, a 1.0
// table) must load and pass; the faults only the suite can see (malformed requests, a crash in
// create, bytes that arrive wrong) must fail the suite in the right check. Never a crash: every
// case runs in its own process.
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.h"
#include "conformance.h"
#include "loader/plugin_loader.h"

namespace conformance {

namespace {

std::string file(const std::string& dir, Kind kind, const std::string& name) {
  return dir + (kind == Kind::Transport ? "/libwsync_transport_" : "/libwsync_adapter_") + name + ".so";
}

bool exists(Ctx& c, const std::string& path) {
  if (access(path.c_str(), R_OK) == 0) return true;
  c.fail(path + " does not exist (was it built?)");
  return false;
}

wsync_status_t load(Kind kind, const std::string& path_or_name) {
  ::wsync::clear_error();
  if (kind == Kind::Transport) {
    ::wsync::LoadedTransport t;
    return ::wsync::load_transport(path_or_name, &t);
  }
  ::wsync::LoadedAdapter a;
  return ::wsync::load_adapter(path_or_name, &a);
}

// The loader refuses `path` with `want`, and its message names every one of `needles`.
void expect_refused(Ctx& c, Kind kind, const std::string& path, wsync_status_t want,
                    const std::vector<std::string>& needles) {
  if (!exists(c, path)) return;
  c.step("loading " + path);
  wsync_status_t st = load(kind, path);
  const std::string err = last_error();
  if (st != want) {
    c.fail("loading " + path + " returned " + status_str(st) + ", expected " + status_str(want) +
           (err.empty() ? "" : ": " + err));
    return;
  }
  for (const auto& n : needles)
    c.expect(contains(err, n), "the message does not name '" + n + "': \"" + err + "\"");
  c.note(status_str(st) + ": " + err);
}

std::string describe(const Summary& s) {
  std::string d;
  for (const auto& r : s.results) {
    const char* v = r.verdict == Verdict::Pass ? "PASS" : r.verdict == Verdict::Warn ? "WARN"
                                                      : r.verdict == Verdict::Skip ? "SKIP" : "FAIL";
    d += std::string("\n  [") + v + "] " + r.name;
    for (const auto& rec : r.records)
      if (rec.first == 'F' || rec.first == 'S' || rec.first == 'W') d += "\n      " + rec.second;
  }
  return d;
}

// The full conformance suite against `path`, quietly, in this (child) process.
Summary nested(const Config& base, const std::string& path, bool loopback) {
  Config n = base;
  n.path = path;
  parse_plugin_file_name(path, &n.kind, &n.name);
  n.quiet = true;
  n.verbose = false;
  n.strict = false;
  n.loopback = loopback;
  n.options.clear();
  return run_suite(n);
}

const CheckResult* find(const Summary& s, const std::string& prefix) {
  for (const auto& r : s.results)
    if (r.name.compare(0, prefix.size(), prefix) == 0) return &r;
  return nullptr;
}

// The plugin conforms: the suite passes (warnings allowed).
void expect_conforms(Ctx& c, const Config& cfg, const std::string& path, bool loopback) {
  if (!exists(c, path)) return;
  c.step("the conformance suite against " + path);
  Summary s = nested(cfg, path, loopback);
  c.expect(s.failed == 0 && !s.no_device && s.passed > 0,
           "the conformance suite does not pass " + path + ":" + describe(s));
}

// The checks named (by prefix) pass: for the test stubs of plugins/testing, which are not meant
// to conform in full (they accept any rank, for one) but must be fine with their NULL optional
// functions. The other checks' findings are notes.
void expect_checks_pass(Ctx& c, const Config& cfg, const std::string& path, const std::vector<std::string>& prefixes) {
  if (!exists(c, path)) return;
  c.step("the conformance suite against " + path);
  Summary s = nested(cfg, path, false);
  for (const auto& prefix : prefixes) {
    const CheckResult* r = find(s, prefix);
    c.expect(r != nullptr && (r->verdict == Verdict::Pass || r->verdict == Verdict::Warn),
             "the check '" + prefix + "' did not pass for " + path + ":" + describe(s));
  }
  c.note("the whole suite on " + path + ":" + describe(s));
}

// The suite fails the plugin, in the check whose name starts with `check`, and a failure record
// holds `needle`.
void expect_suite_fails(Ctx& c, const Config& cfg, const std::string& path, const std::string& check,
                        const std::vector<std::string>& needles, bool loopback = false) {
  if (!exists(c, path)) return;
  c.step("the conformance suite against " + path);
  Summary s = nested(cfg, path, loopback);
  const CheckResult* r = find(s, check);
  if (!c.expect(s.exit_code(false) == 1, "the conformance suite passed " + path + "; it must fail it:" + describe(s)))
    return;
  if (!c.expect(r != nullptr && r->verdict == Verdict::Fail,
                "the check '" + check + "' did not fail for " + path + ":" + describe(s)))
    return;
  for (const auto& needle : needles) {
    bool found = false;
    for (const auto& rec : r->records) found |= rec.first == 'F' && contains(rec.second, needle);
    c.expect(found, "no failure of '" + check + "' mentions '" + needle + "':" + describe(s));
  }
}

}  // namespace

// What a transport with NULL optional functions must pass; garbage options (options = NULL with
// num_options > 0) are refused by every plugin, the test stubs included.
const std::vector<std::string> kOptionalTransportChecks = {"load:", "table:", "destroy(NULL)", "create, optional functions",
                                                           "create: garbage options"};

Summary run_degraded_suite(const Config& cfg, const std::string& tdir, const std::string& bdir) {
  Summary sum;
  const Kind T = Kind::Transport, A = Kind::Adapter;
  std::vector<Check> checks = {
      // ---- the loader refuses, with the status and message docs/PLUGINS.md promises ----
      {"transport 'smalltable' (struct_size too small) -> VERSION_MISMATCH naming the sizes",
       [&](Ctx& c) {
         const std::string p = file(tdir, T, "smalltable");
         expect_refused(c, T, p, WSYNC_ERR_VERSION_MISMATCH, {p, "smaller than"});
       }},
      {"adapter 'smalltable' (struct_size too small) -> VERSION_MISMATCH naming the sizes",
       [&](Ctx& c) {
         const std::string p = file(bdir, A, "smalltable");
         expect_refused(c, A, p, WSYNC_ERR_VERSION_MISMATCH, {p, "smaller than"});
       }},
      {"transport 'abi99' (wrong ABI version) -> VERSION_MISMATCH naming both versions",
       [&](Ctx& c) {
         const std::string p = file(tdir, T, "abi99");
         expect_refused(c, T, p, WSYNC_ERR_VERSION_MISMATCH, {p, "99", "plugin ABI " + std::to_string(WSYNC_PLUGIN_ABI_VERSION)});
       }},
      {"adapter 'abi99' (wrong ABI version) -> VERSION_MISMATCH naming both versions",
       [&](Ctx& c) {
         const std::string p = file(tdir, A, "abi99");
         expect_refused(c, A, p, WSYNC_ERR_VERSION_MISMATCH, {p, "99", "plugin ABI " + std::to_string(WSYNC_PLUGIN_ABI_VERSION)});
       }},
      {"transport 'nullfn' (required send_post NULL) -> UNSUPPORTED naming 'send_post'",
       [&](Ctx& c) {
         const std::string p = file(tdir, T, "nullfn");
         expect_refused(c, T, p, WSYNC_ERR_UNSUPPORTED, {p, "'send_post'"});
       }},
      {"adapter 'nullfn' (required get_layout NULL) -> UNSUPPORTED naming 'get_layout'",
       [&](Ctx& c) {
         const std::string p = file(bdir, A, "nullfn");
         expect_refused(c, A, p, WSYNC_ERR_UNSUPPORTED, {p, "'get_layout'"});
       }},
      {"transport 'noentry' (no entry symbol) -> NOT_FOUND naming the symbol",
       [&](Ctx& c) {
         const std::string p = file(tdir, T, "noentry");
         expect_refused(c, T, p, WSYNC_ERR_NOT_FOUND, {p, "wsync_transport_entry_v1"});
       }},
      {"adapter 'misnamed' (table name differs from the file) -> UNSUPPORTED by name; the suite fails it by path",
       [&](Ctx& c) {
         const std::string p = file(bdir, A, "misnamed");
         if (!exists(c, p)) return;
         // By name (how users load plugins), through WSYNC_PLUGIN_PATH.
         setenv("WSYNC_PLUGIN_PATH", bdir.c_str(), 1);
         c.step("load_adapter(\"misnamed\") with WSYNC_PLUGIN_PATH=" + bdir);
         wsync_status_t st = load(A, "misnamed");
         const std::string err = last_error();
         if (c.refused(st, "load_adapter(\"misnamed\")", WSYNC_ERR_UNSUPPORTED))
           c.expect(contains(err, "'other'") && contains(err, "'misnamed'"), "the message does not name both names: " + err);
         expect_suite_fails(c, cfg, p, "table:", {"calls itself 'other'"});
       }},
      // ---- a device plugin on a machine without the device: a skip, not a failure ----
      {"transport 'nocuda' (entry refuses: no device) -> NO_DEVICE; the suite says 'skipped: no device'",
       [&](Ctx& c) {
         const std::string p = file(tdir, T, "nocuda");
         expect_refused(c, T, p, WSYNC_ERR_NO_DEVICE, {p, "no CUDA device"});
         c.step("the conformance suite against " + p);
         Summary s = nested(cfg, p, false);
         c.expect(s.no_device && s.failed == 0 && s.exit_code(false) == 77,
                  "the suite did not report 'skipped: no device' (exit 77):" + describe(s));
       }},
      // ---- odd but legal: optional functions NULL, an older (1.0) table ----
      {"transport 'v10' (a 1.0 table: no register_staging/get_property) loads and passes the table and lifecycle checks",
       [&](Ctx& c) {
         const std::string p = file(tdir, T, "v10");
         if (!exists(c, p)) return;
         ::wsync::LoadedTransport t;
         c.step("loading " + p);
         if (!c.expect(::wsync::load_transport(p, &t) == WSYNC_OK, "the loader refused a 1.0 table: " + last_error())) return;
         c.expect(t.table->struct_size < offsetof(wsync_transport_v1_t, register_staging) + sizeof(void*),
                  "the v10 plugin's table covers register_staging; the test plugin is not a 1.0 table");
         expect_checks_pass(c, cfg, p, kOptionalTransportChecks);
       }},
      {"transport 'stub' (abort set, register_staging/get_property NULL) loads and passes the table and lifecycle checks",
       [&](Ctx& c) { expect_checks_pass(c, cfg, file(tdir, T, "stub"), kOptionalTransportChecks); }},
      {"transport 'noabort' (abort, register_staging, get_property all NULL) conforms, loopback included",
       [&](Ctx& c) { expect_conforms(c, cfg, file(bdir, T, "noabort"), true); }},
      {"adapter 'stub' (not HTTP, build_requests NULL) loads and passes the table and layout checks",
       [&](Ctx& c) {
         expect_checks_pass(c, cfg, file(tdir, A, "stub"),
                            {"load:", "table:", "destroy(NULL)", "get_layout:", "create: garbage options"});
       }},
      {"adapter 'v10' (a 1.0 table, in-band) conforms",
       [&](Ctx& c) { expect_conforms(c, cfg, file(bdir, A, "v10"), false); }},
      // ---- what only the conformance suite catches ----
      {"adapter 'httpnobuild' (CAP_HTTP, build_requests NULL) fails the table check",
       [&](Ctx& c) {
         const std::string p = file(bdir, A, "httpnobuild");
         if (!exists(c, p)) return;
         c.step("loading " + p);
         wsync_status_t st = load(A, p);
         // The loader may refuse it (UNSUPPORTED naming build_requests) or leave it to the core.
         if (st != WSYNC_OK) {
           if (c.refused(st, "loading " + p, WSYNC_ERR_UNSUPPORTED))
             c.expect(contains(last_error(), "build_requests"), "the message does not name build_requests: " + last_error());
           return;
         }
         c.note("the loader accepts a CAP_HTTP adapter without build_requests");
         expect_suite_fails(c, cfg, p, "table:", {"build_requests is NULL"});
       }},
      {"adapter 'badrequests' (path without '/', bad JSON, bad method and reply) fails the build_requests check",
       [&](Ctx& c) {
         const std::string p = file(bdir, A, "badrequests");
         expect_suite_fails(c, cfg, p, "build_requests: every WSYNC_STEP_*",
                            {"does not start with '/'", "not valid JSON", "method 3", "reply kind 42",
                             "not a JSON object or array", "space or control character"});
       }},
      {"adapter 'crashy' (create(NULL) segfaults): the suite reports the crash and carries on",
       [&](Ctx& c) {
         const std::string p = file(bdir, A, "crashy");
         expect_suite_fails(c, cfg, p, "create: NULL params", {"crashed with signal"});
       }},
      {"adapter 'overrun' (get_layout writes past an older core's rule) fails the get_layout check",
       [&](Ctx& c) { expect_suite_fails(c, cfg, file(bdir, A, "overrun"), "get_layout:", {"wrote past it"}); }},
      {"transport 'silentfd' (1.2: an event fd that never signals, arm says armed) fails the loopback check",
       [&](Ctx& c) {
         const std::string p = file(bdir, T, "silentfd");
         expect_suite_fails(c, cfg, p, "loopback:", {"event fd stayed silent"}, true);
       }},
      {"transport 'fdnoarm' (1.2: get_event_fd without arm) fails the table check",
       [&](Ctx& c) {
         const std::string p = file(bdir, T, "fdnoarm");
         expect_suite_fails(c, cfg, p, "table:", {"get_event_fd and arm come together"});
       }},
      {"transport 'corrupt' (flips a byte) fails the loopback check",
       [&](Ctx& c) {
         const std::string p = file(bdir, T, "corrupt");
         expect_suite_fails(c, cfg, p, "loopback:", {"wrong bytes"}, true);
       }},
  };
  for (auto& ch : checks) {
    ch.timeout_ms = 180000;  // runs whole nested suites
    report(cfg, run_check(cfg, ch), &sum);
  }
  return sum;
}

}  // namespace conformance
