// wsync-conformance: run the plugin conformance suite against one plugin file, or the degraded
// suite against the deliberately broken test plugins. See README.md in this folder.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "conformance.h"

namespace {

void usage(FILE* f) {
  std::fprintf(f,
               "usage: wsync-conformance [options] <path>/libwsync_transport_<name>.so\n"
               "       wsync-conformance [options] <path>/libwsync_adapter_<name>.so\n"
               "       wsync-conformance [options] --degraded <testing-plugin-dir> <conformance-broken-plugin-dir>\n"
               "\n"
               "Checks that a wsync plugin keeps the plugin ABI's contract (include/wsync_plugin.h). The kind\n"
               "(transport or adapter) comes from the file name. Each check runs in its own process: a\n"
               "crash or a hang in the plugin is a failed check, not a crash of the suite.\n"
               "\n"
               "options:\n"
               "  --option KEY=VALUE  pass an option to create for the checks that need a valid instance\n"
               "                      (the part after \"adapter.\" / \"transport.\"); repeatable\n"
               "  --no-loopback       transports: skip moving two buckets between two in-process ranks\n"
               "  --strict            warnings (advisories) fail too\n"
               "  --timeout-ms N      time limit of each check (default 20000)\n"
               "  --no-fork           run the checks in this process (for a debugger; a crash ends the run)\n"
               "  -v, --verbose       print what each check saw (statuses, messages, requests)\n"
               "  -h, --help          this text\n"
               "\n"
               "exit status: 0 conforms (warnings allowed unless --strict), 1 does not,\n"
               "             77 skipped: the plugin needs a device this machine lacks, 2 usage error\n");
}

}  // namespace

int main(int argc, char** argv) {
  conformance::Config cfg;
  std::string plugin, testing_dir, broken_dir;
  bool degraded = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&](const char* what) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "wsync-conformance: %s needs a value\n", what);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else if (a == "--option") {
      std::string kv = next("--option");
      size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::fprintf(stderr, "wsync-conformance: --option wants KEY=VALUE, not '%s'\n", kv.c_str());
        return 2;
      }
      cfg.options.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else if (a == "--no-loopback") {
      cfg.loopback = false;
    } else if (a == "--strict") {
      cfg.strict = true;
    } else if (a == "--timeout-ms") {
      std::string v = next("--timeout-ms");
      char* end = nullptr;
      long long ms = std::strtoll(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || ms < 100) {
        std::fprintf(stderr, "wsync-conformance: --timeout-ms wants a number of milliseconds >= 100\n");
        return 2;
      }
      cfg.timeout_ms = ms;
    } else if (a == "--no-fork") {
      cfg.fork = false;
    } else if (a == "-v" || a == "--verbose") {
      cfg.verbose = true;
    } else if (a == "--degraded") {
      degraded = true;
      testing_dir = next("--degraded");
      broken_dir = next("--degraded");
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "wsync-conformance: unknown option '%s'\n\n", a.c_str());
      usage(stderr);
      return 2;
    } else if (plugin.empty()) {
      plugin = a;
    } else {
      std::fprintf(stderr, "wsync-conformance: one plugin at a time ('%s' and '%s')\n", plugin.c_str(), a.c_str());
      return 2;
    }
  }

  if (degraded) {
    if (!plugin.empty()) {
      std::fprintf(stderr, "wsync-conformance: --degraded takes no plugin file\n");
      return 2;
    }
    std::printf("wsync-conformance: degraded plugins in %s and %s\n", testing_dir.c_str(), broken_dir.c_str());
    conformance::Summary s = conformance::run_degraded_suite(cfg, testing_dir, broken_dir);
    std::printf("degraded: %d passed, %d failed, %d warnings, %d skipped\n", s.passed, s.failed, s.warned, s.skipped);
    return s.failed > 0 ? 1 : 0;
  }

  if (plugin.empty()) {
    usage(stderr);
    return 2;
  }
  if (!conformance::parse_plugin_file_name(plugin, &cfg.kind, &cfg.name)) {
    std::fprintf(stderr,
                 "wsync-conformance: '%s' is not named libwsync_transport_<name>.so or libwsync_adapter_<name>.so;\n"
                 "the name tells the kind, and the table's name must match it\n",
                 plugin.c_str());
    return 2;
  }
  // The loader takes a value without '/' as a plugin name to search for: make it a path.
  cfg.path = plugin.find('/') == std::string::npos ? "./" + plugin : plugin;

  const char* kind = cfg.kind == conformance::Kind::Transport ? "transport" : "adapter";
  std::printf("wsync-conformance: %s '%s' (%s), plugin ABI %d.%d\n", kind, cfg.name.c_str(), cfg.path.c_str(),
              WSYNC_PLUGIN_ABI_VERSION, WSYNC_PLUGIN_ABI_MINOR);
  conformance::Summary s = conformance::run_suite(cfg);
  const int rc = s.exit_code(cfg.strict);
  std::printf("%s '%s': %d passed, %d failed, %d warnings, %d skipped -> %s\n", kind, cfg.name.c_str(), s.passed,
              s.failed, s.warned, s.skipped,
              rc == 0 ? "conforms" : rc == 77 ? "skipped: no device" : "DOES NOT CONFORM");
  return rc;
}
