// The plugin loader: finding plugins by name through WSYNC_PLUGIN_PATH (colon lists with empty
// and missing folders) and beside the library, by path, refusing bad names and broken plugins
// (plugins/testing), and error messages / debug lines that list every attempt.
#include <cstddef>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.h"
#include "loader/plugin_loader.h"

using wsync::LoadedAdapter;
using wsync::LoadedTransport;
using wsync::load_adapter;
using wsync::load_transport;

namespace {

const std::string kPluginDir = WSYNC_TEST_PLUGIN_DIR;               // build/lib/wsync
const std::string kTestingDir = WSYNC_TEST_PLUGIN_DIR "-testing";   // build/lib/wsync-testing

std::string testing_transport(const std::string& name) { return kTestingDir + "/libwsync_transport_" + name + ".so"; }
std::string testing_adapter(const std::string& name) { return kTestingDir + "/libwsync_adapter_" + name + ".so"; }

size_t count_of(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

#define EXPECT_CONTAINS(hay, needle) \
  EXPECT_NE(std::string(hay).find(needle), std::string::npos) << "\"" << (needle) << "\" not in:\n" << (hay)

// Collects debug log lines while alive.
struct LogCapture {
  static std::mutex mu;
  static std::vector<std::string> lines;
  static void sink(void* user_data, int32_t level, const char* message) {
    ASSERT_EQ(user_data, &lines);
    std::lock_guard<std::mutex> g(mu);
    lines.push_back(std::to_string(level) + " " + message);
  }
  LogCapture() {
    lines.clear();
    wsync_set_log_callback(&LogCapture::sink, &lines, WSYNC_LOG_DEBUG);
  }
  ~LogCapture() { wsync_set_log_callback(nullptr, nullptr, 0); }
  std::string all() const {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }
};
std::mutex LogCapture::mu;
std::vector<std::string> LogCapture::lines;

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* p = std::getenv("WSYNC_PLUGIN_PATH");
    had_path_ = p != nullptr;
    if (p) saved_path_ = p;
    unsetenv("WSYNC_PLUGIN_PATH");
    char tmpl[] = "/tmp/wsync_loader_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
  }
  void TearDown() override {
    if (had_path_)
      setenv("WSYNC_PLUGIN_PATH", saved_path_.c_str(), 1);
    else
      unsetenv("WSYNC_PLUGIN_PATH");
    std::string cmd = "rm -rf '" + tmp_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  static void set_path(const std::string& p) { setenv("WSYNC_PLUGIN_PATH", p.c_str(), 1); }
  void write_file(const std::string& path, const std::string& content) {
    std::ofstream f(path, std::ios::binary);
    f << content;
  }
  void copy_file(const std::string& from, const std::string& to) {
    std::ifstream in(from, std::ios::binary);
    ASSERT_TRUE(in.good()) << from;
    std::ofstream out(to, std::ios::binary);
    out << in.rdbuf();
  }

  bool had_path_ = false;
  std::string saved_path_;
  std::string tmp_;
};

TEST_F(LoaderTest, TestPluginsWereBuilt) {
  for (const char* n : {"stub", "abi99", "smalltable", "noentry", "nocuda", "nullfn", "v10"})
    EXPECT_EQ(access(testing_transport(n).c_str(), R_OK), 0) << testing_transport(n);
  for (const char* n : {"stub", "abi99"}) EXPECT_EQ(access(testing_adapter(n).c_str(), R_OK), 0) << testing_adapter(n);
}

TEST_F(LoaderTest, TransportByNameViaPluginPath) {
  set_path(kTestingDir);
  LoadedTransport t;
  ASSERT_EQ(load_transport("stub", &t), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(t.path, testing_transport("stub"));
  EXPECT_NE(t.handle, nullptr);
  ASSERT_NE(t.table, nullptr);
  EXPECT_STREQ(t.table->name, "stub");
  EXPECT_EQ(t.table->abi_version, static_cast<uint32_t>(WSYNC_PLUGIN_ABI_VERSION));
  EXPECT_GE(t.table->struct_size, sizeof(wsync_transport_v1_t));
  EXPECT_TRUE(t.table->caps & WSYNC_TRANSPORT_CAP_HOST_MEMORY);

  // Loading again gives the same (refcounted) module and table.
  LoadedTransport t2;
  ASSERT_EQ(load_transport("stub", &t2), WSYNC_OK);
  EXPECT_EQ(t2.table, t.table);
  EXPECT_EQ(t2.handle, t.handle);
}

TEST_F(LoaderTest, AdapterByNameViaPluginPath) {
  set_path(kTestingDir);
  LoadedAdapter a;
  ASSERT_EQ(load_adapter("stub", &a), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(a.path, testing_adapter("stub"));
  ASSERT_NE(a.table, nullptr);
  EXPECT_STREQ(a.table->name, "stub");

  // The real adapter from the plugin folder of the build.
  set_path(kPluginDir);
  LoadedAdapter n;
  ASSERT_EQ(load_adapter("native", &n), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(n.path, kPluginDir + "/libwsync_adapter_native.so");
  EXPECT_STREQ(n.table->name, "native");
  EXPECT_TRUE(n.table->caps & WSYNC_ADAPTER_CAP_INBAND_MANIFEST);
}

TEST_F(LoaderTest, ByAbsolutePathIgnoresThePluginPath) {
  set_path(tmp_);  // holds nothing
  LoadedTransport t;
  ASSERT_EQ(load_transport(testing_transport("stub"), &t), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(t.path, testing_transport("stub"));
  LoadedAdapter a;
  ASSERT_EQ(load_adapter(kPluginDir + "/libwsync_adapter_native.so", &a), WSYNC_OK) << wsync::last_error();
  EXPECT_STREQ(a.table->name, "native");
  // A path is loaded as is: no prefix/suffix added, no search.
  LoadedTransport m;
  EXPECT_EQ(load_transport(tmp_ + "/stub", &m), WSYNC_ERR_NOT_FOUND);
  EXPECT_CONTAINS(wsync::last_error(), tmp_ + "/stub: no such file");
  EXPECT_EQ(count_of(wsync::last_error(), "\n  "), 1u) << wsync::last_error();
  EXPECT_EQ(m.table, nullptr);
  EXPECT_EQ(m.handle, nullptr);
  EXPECT_TRUE(m.path.empty());
}

TEST_F(LoaderTest, RelativePathIsAPath) {
  LoadedTransport t;
  EXPECT_EQ(load_transport("./nowhere/libwsync_transport_stub.so", &t), WSYNC_ERR_NOT_FOUND);
  EXPECT_CONTAINS(wsync::last_error(), "./nowhere/libwsync_transport_stub.so");
}

TEST_F(LoaderTest, ColonListWithEmptyAndMissingFolders) {
  const std::string missing = tmp_ + "/does-not-exist";
  set_path(":" + missing + "::" + kTestingDir + ":");
  LoadedTransport t;
  ASSERT_EQ(load_transport("stub", &t), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(t.path, testing_transport("stub"));

  LoadedTransport n;
  ASSERT_EQ(load_transport("nosuch", &n), WSYNC_ERR_NOT_FOUND);
  const std::string e = wsync::last_error();
  EXPECT_CONTAINS(e, "'nosuch'");
  // Every attempt, in search order: the two real folders, then the one beside the library.
  const std::string a1 = missing + "/libwsync_transport_nosuch.so: no such file";
  const std::string a2 = testing_transport("nosuch") + ": no such file";
  const std::string a3 = wsync::library_dir() + "/wsync/libwsync_transport_nosuch.so: no such file";
  EXPECT_CONTAINS(e, a1);
  EXPECT_CONTAINS(e, a2);
  EXPECT_CONTAINS(e, a3);
  EXPECT_LT(e.find(a1), e.find(a2));
  EXPECT_LT(e.find(a2), e.find(a3));
  // Empty entries are skipped, not turned into "/libwsync_..." or "./libwsync_...".
  EXPECT_EQ(count_of(e, "\n  "), 3u) << e;
  EXPECT_EQ(e.find("\n  /libwsync_"), std::string::npos) << e;
}

TEST_F(LoaderTest, FirstFolderWins) {
  copy_file(testing_transport("stub"), tmp_ + "/libwsync_transport_stub.so");
  set_path(tmp_ + ":" + kTestingDir);
  LoadedTransport t;
  ASSERT_EQ(load_transport("stub", &t), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(t.path, tmp_ + "/libwsync_transport_stub.so");
}

TEST_F(LoaderTest, UnloadableFileIsSkippedAndReported) {
  const std::string junk = tmp_ + "/libwsync_transport_stub.so";
  write_file(junk, "this is not an ELF file\n");
  // A later folder still provides the plugin.
  set_path(tmp_ + ":" + kTestingDir);
  LoadedTransport t;
  ASSERT_EQ(load_transport("stub", &t), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(t.path, testing_transport("stub"));
  // Alone, the failure names the file and dlopen's reason.
  set_path(tmp_);
  LoadedTransport u;
  EXPECT_EQ(load_transport("stub", &u), WSYNC_ERR_NOT_FOUND);
  EXPECT_CONTAINS(wsync::last_error(), junk + ": dlopen failed");
  EXPECT_EQ(u.table, nullptr);
}

TEST_F(LoaderTest, DirectoryNamedLikeAPluginIsNotAFile) {
  ASSERT_EQ(mkdir((tmp_ + "/libwsync_transport_stub.so").c_str(), 0700), 0);
  set_path(tmp_);
  LoadedTransport t;
  EXPECT_EQ(load_transport("stub", &t), WSYNC_ERR_NOT_FOUND);
  EXPECT_CONTAINS(wsync::last_error(), tmp_ + "/libwsync_transport_stub.so: no such file");
}

TEST_F(LoaderTest, NotFoundBesideTheLibraryWithoutPluginPath) {
  // This test binary links the core statically: "beside the library" is beside the executable.
  ASSERT_FALSE(wsync::library_dir().empty());
  LoadedAdapter a;
  EXPECT_EQ(load_adapter("nosuch", &a), WSYNC_ERR_NOT_FOUND);
  EXPECT_CONTAINS(wsync::last_error(), wsync::library_dir() + "/wsync/libwsync_adapter_nosuch.so: no such file");
  EXPECT_EQ(count_of(wsync::last_error(), "\n  "), 1u) << wsync::last_error();
}

TEST_F(LoaderTest, NamesWithIllegalCharactersAreRefused) {
  set_path(kTestingDir);
  for (const std::string bad : {"a b", "x;y", "stub.so", "st*b", "$HOME", "stub\n", "\xc3\xbc"}) {
    LoadedTransport t;
    EXPECT_EQ(load_transport(bad, &t), WSYNC_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_CONTAINS(wsync::last_error(), "'" + bad + "'");
    EXPECT_EQ(t.table, nullptr);
    LoadedAdapter a;
    EXPECT_EQ(load_adapter(bad, &a), WSYNC_ERR_INVALID_ARGUMENT) << bad;
  }
  // '-' and '_' and digits are fine (they reach the search)
  LoadedTransport t;
  EXPECT_EQ(load_transport("no-such_plugin2", &t), WSYNC_ERR_NOT_FOUND);
  EXPECT_CONTAINS(wsync::last_error(), "libwsync_transport_no-such_plugin2.so");
  EXPECT_EQ(load_transport("", &t), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(wsync::last_error(), "empty");
  LoadedAdapter a;
  EXPECT_EQ(load_adapter("", &a), WSYNC_ERR_INVALID_ARGUMENT);
}

TEST_F(LoaderTest, KindIsPartOfTheFileNameAndTheEntry) {
  set_path(kPluginDir);
  LoadedTransport t;
  // "native" is an adapter: there is no libwsync_transport_native.so
  EXPECT_EQ(load_transport("native", &t), WSYNC_ERR_NOT_FOUND);
  EXPECT_CONTAINS(wsync::last_error(), kPluginDir + "/libwsync_transport_native.so: no such file");
  // an adapter file given as a transport path lacks the transport entry
  EXPECT_EQ(load_transport(kPluginDir + "/libwsync_adapter_native.so", &t), WSYNC_ERR_NOT_FOUND);
  EXPECT_CONTAINS(wsync::last_error(), "wsync_transport_entry_v1");
  EXPECT_CONTAINS(wsync::last_error(), "libwsync_adapter_native.so");
  LoadedAdapter a;
  EXPECT_EQ(load_adapter(testing_transport("stub"), &a), WSYNC_ERR_NOT_FOUND);
  EXPECT_CONTAINS(wsync::last_error(), "wsync_adapter_entry_v1");
}

// A plugin built against plugin ABI 1.0 (its table ends at destroy) still loads; the 1.1 entries
// are then never read.
TEST_F(LoaderTest, PluginBuiltAgainstAbi10Loads) {
  set_path(kTestingDir);
  LoadedTransport t;
  ASSERT_EQ(load_transport("v10", &t), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(t.table->struct_size, offsetof(wsync_transport_v1_t, register_staging));
}

TEST_F(LoaderTest, BrokenTransportsAreRefused) {
  set_path(kTestingDir);
  struct Case {
    const char* name;
    wsync_status_t status;
    std::vector<std::string> words;
  } cases[] = {
      {"abi99", WSYNC_ERR_VERSION_MISMATCH, {"plugin ABI 99", "plugin ABI 1"}},
      {"smalltable", WSYNC_ERR_VERSION_MISMATCH,
       {"bytes", std::to_string(offsetof(wsync_transport_v1_t, register_staging)), "v1.0 table"}},
      {"noentry", WSYNC_ERR_NOT_FOUND, {"does not export wsync_transport_entry_v1"}},
      {"nocuda", WSYNC_ERR_NO_DEVICE, {"refused to load", "no CUDA device"}},
      {"nullfn", WSYNC_ERR_UNSUPPORTED, {"'send_post'", "NULL"}},
  };
  for (const auto& c : cases) {
    LoadedTransport t;
    EXPECT_EQ(load_transport(c.name, &t), c.status) << c.name << ": " << wsync::last_error();
    EXPECT_CONTAINS(wsync::last_error(), testing_transport(c.name));
    for (const auto& w : c.words) EXPECT_CONTAINS(wsync::last_error(), w);
    EXPECT_EQ(t.table, nullptr) << c.name;
    EXPECT_EQ(t.handle, nullptr) << c.name;
    // the same through an absolute path
    LoadedTransport p;
    EXPECT_EQ(load_transport(testing_transport(c.name), &p), c.status) << c.name;
  }
}

TEST_F(LoaderTest, BrokenAdapterIsRefused) {
  set_path(kTestingDir);
  LoadedAdapter a;
  EXPECT_EQ(load_adapter("abi99", &a), WSYNC_ERR_VERSION_MISMATCH);
  EXPECT_CONTAINS(wsync::last_error(), testing_adapter("abi99"));
  EXPECT_CONTAINS(wsync::last_error(), "99");
  EXPECT_EQ(a.table, nullptr);
}

TEST_F(LoaderTest, DebugLogListsEveryAttempt) {
  const std::string missing = tmp_ + "/nope";
  set_path(missing + ":" + kTestingDir);
  {
    LogCapture cap;
    LoadedTransport t;
    ASSERT_EQ(load_transport("nosuch", &t), WSYNC_ERR_NOT_FOUND);
    const std::string all = cap.all();
    EXPECT_CONTAINS(all, "4 transport plugin 'nosuch': " + missing + "/libwsync_transport_nosuch.so: no such file");
    EXPECT_CONTAINS(all, "4 transport plugin 'nosuch': " + testing_transport("nosuch") + ": no such file");
    EXPECT_CONTAINS(all, wsync::library_dir() + "/wsync/libwsync_transport_nosuch.so: no such file");
  }
  {
    LogCapture cap;
    LoadedTransport t;
    ASSERT_EQ(load_transport("stub", &t), WSYNC_OK);
    const std::string all = cap.all();
    EXPECT_CONTAINS(all, missing + "/libwsync_transport_stub.so: no such file");
    EXPECT_CONTAINS(all, "loaded " + testing_transport("stub"));
  }
}

TEST(HostTable, IsCompleteAndWorks) {
  const wsync_host_v1_t* h = wsync::host_table();
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->struct_size, sizeof(wsync_host_v1_t));
  EXPECT_EQ(h->abi_version, static_cast<uint32_t>(WSYNC_PLUGIN_ABI_VERSION));
  ASSERT_NE(h->log, nullptr);
  ASSERT_NE(h->set_error, nullptr);
  ASSERT_NE(h->store_set, nullptr);
  ASSERT_NE(h->store_get, nullptr);
  ASSERT_NE(h->store_add, nullptr);
  ASSERT_NE(h->alloc_host, nullptr);
  ASSERT_NE(h->free_host, nullptr);

  EXPECT_EQ(h->set_error(WSYNC_ERR_IO, "device mlx5_0 is down"), WSYNC_ERR_IO);
  EXPECT_EQ(wsync::last_error(), "device mlx5_0 is down");
  EXPECT_EQ(h->set_error(WSYNC_ERR_IO, nullptr), WSYNC_ERR_IO);
  EXPECT_EQ(wsync::last_error(), "");

  void* p = h->alloc_host(10);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  std::memset(p, 1, 10);
  h->free_host(p, 10);
  void* z = h->alloc_host(0);
  EXPECT_NE(z, nullptr);
  h->free_host(z, 0);

  uint64_t len = 0;
  int64_t v = 0;
  char buf[4];
  EXPECT_EQ(h->store_set(nullptr, "k", "v", 1), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h->store_get(nullptr, "k", buf, sizeof buf, &len, 10), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h->store_add(nullptr, "k", 1, &v), WSYNC_ERR_INVALID_ARGUMENT);
  h->log(WSYNC_LOG_TRACE, nullptr);  // tolerated
}

}  // namespace
