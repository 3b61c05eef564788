// The group secret file is handled like an ssh key (common/secret.h): another user's file, a file
// others may read, a symbolic link are refused on every path that reads one (sender, receiver,
// WSYNC_GROUP_SECRET_FILE); the generated file is the user's own, mode 0600, and a file or a link
// planted at the target or at a temporary's name is never written through, replaced or adopted.
// The owner checks need root (to give a file to another user) and are skipped without it.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "common/error.h"
#include "common/secret.h"

using wsync::GroupSecret;
using wsync::find_group_secret;

namespace {

constexpr uid_t kNobody = 65534;
const std::string kTheirs = "a secret another user chose";
const std::string kMine = "the secret this user chose";

class SecretFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char t[] = "/tmp/wsync-secret-test-XXXXXX";
    ASSERT_NE(::mkdtemp(t), nullptr);
    dir_ = t;
    ::unsetenv("WSYNC_GROUP_SECRET");
    ::unsetenv("WSYNC_GROUP_SECRET_FILE");
  }
  void TearDown() override {
    ::unsetenv("WSYNC_GROUP_SECRET_FILE");
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  static void put(const std::string& p, const std::string& content, mode_t mode, uid_t owner = ::geteuid()) {
    std::ofstream(p) << content << "\n";
    ASSERT_EQ(::chmod(p.c_str(), mode), 0);
    ASSERT_EQ(::chown(p.c_str(), owner, static_cast<gid_t>(-1)), 0);
  }
  static std::string contents(const std::string& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }
  static bool root() { return ::geteuid() == 0; }

  std::string dir_;
};

// Every way a secret file reaches a process: the receiver's option, the sender's option (which
// would otherwise generate), and the environment variable.
void expect_refused(const std::string& file, const std::vector<std::string>& needles) {
  for (int way = 0; way < 3; ++way) {
    SCOPED_TRACE(way == 0 ? "receiver, option secret_file" : way == 1 ? "sender, option secret_file"
                                                                      : "receiver, WSYNC_GROUP_SECRET_FILE");
    GroupSecret s;
    if (way == 2) ::setenv("WSYNC_GROUP_SECRET_FILE", file.c_str(), 1);
    const wsync_status_t st = find_group_secret("", way == 2 ? "" : file, way == 1, &s);
    ::unsetenv("WSYNC_GROUP_SECRET_FILE");
    EXPECT_EQ(st, WSYNC_ERR_INVALID_ARGUMENT) << "adopted '" << s.value << "' from " << s.origin;
    const std::string msg = wsync::last_error();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg << "\n  lacks: " << n;
  }
}

TEST_F(SecretFile, AnOwnFileOnlyTheUserMayReadIsAdopted) {
  for (mode_t mode : {0600, 0400}) {
    put(path("s"), kMine, mode);
    GroupSecret s;
    ASSERT_EQ(find_group_secret("", path("s"), false, &s), WSYNC_OK) << wsync::last_error();
    EXPECT_EQ(s.value, kMine);
    ASSERT_EQ(::unlink(path("s").c_str()), 0);
  }
}

TEST_F(SecretFile, AFileOthersMayReadOrWriteIsRefused) {
  for (mode_t mode : {0644, 0640, 0620, 0602, 0666}) {
    SCOPED_TRACE(mode);
    put(path("s"), kMine, mode);
    expect_refused(path("s"), {path("s"), "chmod 600 " + path("s")});
    EXPECT_EQ(contents(path("s")), kMine + "\n");  // the sender left it as it was
  }
}

TEST_F(SecretFile, AnotherUsersFileIsRefusedEvenAt0600) {
  if (!root()) GTEST_SKIP() << "needs root to give a file to uid 65534";
  put(path("s"), kTheirs, 0600, kNobody);
  expect_refused(path("s"), {path("s"), "uid 65534", "uid 0"});
  EXPECT_EQ(contents(path("s")), kTheirs + "\n");
}

TEST_F(SecretFile, ASymbolicLinkIsRefused) {
  put(path("real"), kMine, 0600);
  ASSERT_EQ(::symlink(path("real").c_str(), path("s").c_str()), 0);
  expect_refused(path("s"), {path("s"), "symbolic link"});
  EXPECT_EQ(contents(path("real")), kMine + "\n");
}

TEST_F(SecretFile, AFifoIsRefusedWithoutHanging) {
  ASSERT_EQ(::mkfifo(path("s").c_str(), 0600), 0);
  expect_refused(path("s"), {path("s"), "not a regular file"});
}

TEST_F(SecretFile, TheGeneratedFileIsTheUsersOwnAtMode0600) {
  const mode_t old = ::umask(0);  // the mode must not depend on the caller's umask
  GroupSecret s;
  const wsync_status_t st = find_group_secret("", path("s"), true, &s);
  ::umask(old);
  ASSERT_EQ(st, WSYNC_OK) << wsync::last_error();
  struct stat sb;
  ASSERT_EQ(::lstat(path("s").c_str(), &sb), 0);
  EXPECT_TRUE(S_ISREG(sb.st_mode));
  EXPECT_EQ(sb.st_mode & 07777, 0600u);
  EXPECT_EQ(sb.st_uid, ::geteuid());
  EXPECT_EQ(contents(path("s")), s.value + "\n");
  // Its receivers adopt it under the same rules.
  GroupSecret r;
  ASSERT_EQ(find_group_secret("", path("s"), false, &r), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(r.value, s.value);
}

TEST_F(SecretFile, AFileAlreadyAtTheTargetIsNeverReplaced) {
  put(path("s"), kTheirs, 0644);
  bool existed = false;
  EXPECT_EQ(wsync::write_secret_file(path("s"), "new\n", &existed), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(existed);
  EXPECT_EQ(contents(path("s")), kTheirs + "\n");
  struct stat sb;
  ASSERT_EQ(::stat(path("s").c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0644u);
  // Nothing is left behind beside it.
  EXPECT_EQ(std::system(("test $(ls -A '" + dir_ + "' | wc -l) -eq 1").c_str()), 0);
}

TEST_F(SecretFile, AnotherUsersFilePlantedAtTheTargetIsNeitherAdoptedNorOverwritten) {
  if (!root()) GTEST_SKIP() << "needs root to give a file to uid 65534";
  put(path("s"), kTheirs, 0600, kNobody);
  GroupSecret s;
  EXPECT_EQ(find_group_secret("", path("s"), true, &s), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.value, kTheirs);
  EXPECT_EQ(contents(path("s")), kTheirs + "\n");
}

// The old temporary's name (<file>.tmp.<pid>) was predictable and opened without O_EXCL: another
// user planted a link to a file of theirs (which received the secret) or a file of theirs (which
// became the secret file, theirs, mode 0666). Neither matters now.
TEST_F(SecretFile, ALinkPlantedAtAPredictableTemporaryNameIsNotWrittenThrough) {
  put(path("theirs"), "their file", 0666, root() ? kNobody : ::geteuid());
  const std::string tmp = path("s") + ".tmp." + std::to_string(::getpid());
  ASSERT_EQ(::symlink(path("theirs").c_str(), tmp.c_str()), 0);
  GroupSecret s;
  ASSERT_EQ(find_group_secret("", path("s"), true, &s), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(contents(path("theirs")), "their file\n");
  struct stat sb;
  ASSERT_EQ(::lstat(path("s").c_str(), &sb), 0);
  EXPECT_TRUE(S_ISREG(sb.st_mode));
  EXPECT_EQ(sb.st_mode & 07777, 0600u);
  EXPECT_EQ(sb.st_uid, ::geteuid());
  EXPECT_EQ(contents(path("s")), s.value + "\n");
}

TEST_F(SecretFile, AFilePlantedAtAPredictableTemporaryNameDoesNotBecomeTheSecretFile) {
  if (!root()) GTEST_SKIP() << "needs root to give a file to uid 65534";
  const std::string tmp = path("s") + ".tmp." + std::to_string(::getpid());
  put(tmp, "", 0666, kNobody);
  GroupSecret s;
  ASSERT_EQ(find_group_secret("", path("s"), true, &s), WSYNC_OK) << wsync::last_error();
  struct stat sb;
  ASSERT_EQ(::lstat(path("s").c_str(), &sb), 0);
  EXPECT_EQ(sb.st_uid, ::geteuid());
  EXPECT_EQ(sb.st_mode & 07777, 0600u);
  EXPECT_EQ(contents(tmp), "\n");  // their file got nothing
}

// store_addr_file goes through write_file_atomic: the same planted link is not written through.
TEST_F(SecretFile, AtomicWritesDoNotWriteThroughAPlantedTemporary) {
  put(path("theirs"), "their file", 0666);
  const std::string tmp = path("addr") + ".tmp." + std::to_string(::getpid());
  ASSERT_EQ(::symlink(path("theirs").c_str(), tmp.c_str()), 0);
  ASSERT_EQ(wsync::write_file_atomic(path("addr"), "127.0.0.1:1\n", 0644, "store_addr_file"), WSYNC_OK)
      << wsync::last_error();
  EXPECT_EQ(contents(path("theirs")), "their file\n");
  EXPECT_EQ(contents(path("addr")), "127.0.0.1:1\n");
  struct stat sb;
  ASSERT_EQ(::lstat(path("addr").c_str(), &sb), 0);
  EXPECT_TRUE(S_ISREG(sb.st_mode));
  EXPECT_EQ(sb.st_mode & 07777, 0644u);
}

}  // namespace
