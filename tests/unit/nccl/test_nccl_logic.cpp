// The GPU-free logic of transport 'nccl' (plugins/transport_nccl/nccl_logic.c): base64 of the
// unique id, the store keys (wsync's and torch's), option parsing and the deadline poll loop.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "nccl_logic.h"

namespace {

std::string Encode(const std::string& in) {
  std::vector<char> out(nccl_b64_encoded_len(in.size()) + 1);
  const int64_t n = nccl_b64_encode(in.data(), in.size(), out.data(), out.size());
  EXPECT_EQ(n, static_cast<int64_t>(nccl_b64_encoded_len(in.size())));
  return n < 0 ? std::string("<error>") : std::string(out.data(), static_cast<size_t>(n));
}

// -1 as the size marks a refused input.
std::pair<int64_t, std::string> Decode(const std::string& in, size_t cap = 256) {
  std::vector<char> out(cap + 1);
  const int64_t n = nccl_b64_decode(in.data(), in.size(), out.data(), cap);
  return {n, n < 0 ? std::string() : std::string(out.data(), static_cast<size_t>(n))};
}

TEST(NcclBase64, Rfc4648Vectors) {
  const char* vectors[][2] = {{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},        {"foo", "Zm9v"},
                              {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"}};
  for (const auto& v : vectors) {
    EXPECT_EQ(Encode(v[0]), v[1]) << "encoding '" << v[0] << "'";
    auto d = Decode(v[1]);
    EXPECT_EQ(d.first, static_cast<int64_t>(std::strlen(v[0]))) << "decoding '" << v[1] << "'";
    EXPECT_EQ(d.second, v[0]);
  }
}

TEST(NcclBase64, UniqueIdIs172Characters) {
  std::string id(NCCL_LOGIC_ID_BYTES, '\0');
  for (int i = 0; i < NCCL_LOGIC_ID_BYTES; ++i) id[i] = static_cast<char>(i);
  EXPECT_EQ(nccl_b64_encoded_len(NCCL_LOGIC_ID_BYTES), static_cast<size_t>(NCCL_LOGIC_ID_B64_CHARS));
  const std::string b64 = Encode(id);
  ASSERT_EQ(b64.size(), 172u);
  EXPECT_EQ(b64,
            "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0BBQkNERUZHSElKS0xN"
            "Tk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn8=");
  auto d = Decode(b64, NCCL_LOGIC_ID_BYTES);
  ASSERT_EQ(d.first, NCCL_LOGIC_ID_BYTES);
  EXPECT_EQ(d.second, id);

  for (int i = 0; i < NCCL_LOGIC_ID_BYTES; ++i) id[i] = static_cast<char>(255 - i);
  EXPECT_EQ(Encode(id),
            "//79/Pv6+fj39vX08/Lx8O/u7ezr6uno5+bl5OPi4eDf3t3c29rZ2NfW1dTT0tHQz87NzMvKycjHxsXEw8LBwL++vby7urm4t7a1tLOy"
            "sbCvrq2sq6qpqKempaSjoqGgn56dnJuamZiXlpWUk5KRkI+OjYyLiomIh4aFhIOCgYA=");
}

TEST(NcclBase64, EncodeNeedsRoomForTheNul) {
  char out[9];
  EXPECT_EQ(nccl_b64_encode("foobar", 6, out, 8), -1);  // 8 characters, no room for the NUL
  EXPECT_EQ(nccl_b64_encode("foobar", 6, out, 9), 8);
  EXPECT_STREQ(out, "Zm9vYmFy");
}

TEST(NcclBase64, DecodeRefusesMalformedText) {
  EXPECT_EQ(Decode("Zg=").first, -1);        // not a multiple of 4
  EXPECT_EQ(Decode("Zg=a").first, -1);       // '=' before the end
  EXPECT_EQ(Decode("Z===").first, -1);       // three '='
  EXPECT_EQ(Decode("=Zg=").first, -1);       // leading '='
  EXPECT_EQ(Decode("Zm9v!A==").first, -1);   // outside the alphabet
  EXPECT_EQ(Decode("Zm9v YmFy").first, -1);  // whitespace
  EXPECT_EQ(Decode("Zh==").first, -1);       // not canonical: leftover bits set
  EXPECT_EQ(Decode("Zm9=").first, -1);       // not canonical
  EXPECT_EQ(Decode("Zm9vYmFy", 5).first, -1);  // 6 bytes do not fit in 5
  EXPECT_EQ(Decode("Zm9vYmFy", 6).first, 6);
  EXPECT_EQ(Decode("-_8=").first, -1);  // the URL-safe alphabet is not the standard one
  EXPECT_EQ(Decode("+/8=").second, std::string("\xfb\xff", 2));
}

TEST(NcclKeys, WsyncKey) {
  char k[64];
  ASSERT_EQ(nccl_wsync_id_key("grp", k, sizeof k), 24);
  EXPECT_STREQ(k, "wsync/grp/nccl/unique_id");
  EXPECT_EQ(nccl_wsync_id_key("grp", k, 24), -1);  // no room for the NUL
  EXPECT_EQ(nccl_wsync_id_key("grp", k, 25), 24);
}

// DERIVED from reading torch (PrefixStore chain + ProcessGroupNCCL's key "0"), not yet verified
// against a running torch: see nccl_logic.h.
TEST(NcclKeys, TorchKey) {
  char k[128];
  ASSERT_GT(nccl_torch_id_key("weight_update_group", k, sizeof k), 0);
  EXPECT_STREQ(k, "weight_update_group/weight_update_group//cuda//0");
  ASSERT_GT(nccl_torch_id_key("g2", k, sizeof k), 0);
  EXPECT_STREQ(k, "g2/g2//cuda//0");
  ASSERT_EQ(nccl_torch_id_key("actor_0", k, sizeof k), static_cast<int>(std::strlen("actor_0/actor_0//cuda//0")));
  EXPECT_STREQ(k, "actor_0/actor_0//cuda//0");
  EXPECT_EQ(nccl_torch_id_key("weight_update_group", k, 10), -1);
}

struct Opt {
  std::vector<wsync_option_t> v;
  Opt& add(const char* k, const char* val) {
    v.push_back(WSYNC_OPTION(k, val));
    return *this;
  }
};

wsync_status_t Parse(const Opt& o, nccl_options_t* out, std::string* err) {
  char buf[512];
  wsync_status_t st = nccl_parse_options(o.v.data(), o.v.size(), out, buf, sizeof buf);
  *err = buf;
  return st;
}

TEST(NcclOptions, Defaults) {
  nccl_options_t o;
  std::string err;
  ASSERT_EQ(Parse(Opt(), &o, &err), WSYNC_OK);
  EXPECT_STREQ(o.torch_group, "");
  EXPECT_EQ(o.allreduce_after_init, 0);
  EXPECT_EQ(o.init_timeout_ms, -1);
  EXPECT_EQ(o.lazy_init, 0);
  EXPECT_EQ(err, "");
}

TEST(NcclOptions, AllKnownKeys) {
  nccl_options_t o;
  std::string err;
  ASSERT_EQ(Parse(Opt().add("torch_group", "weight_update_group").add("allreduce_after_init", "1").add(
                      "init_timeout_ms", "120000").add("lazy_init", "0"),
                  &o, &err),
            WSYNC_OK)
      << err;
  EXPECT_STREQ(o.torch_group, "weight_update_group");
  EXPECT_EQ(o.allreduce_after_init, 1);
  EXPECT_EQ(o.init_timeout_ms, 120000);
  EXPECT_EQ(o.lazy_init, 0);
  ASSERT_EQ(Parse(Opt().add("torch_group", "g").add("lazy_init", "1").add("init_timeout_ms", "5000"), &o, &err),
            WSYNC_OK)
      << err;
  EXPECT_EQ(o.lazy_init, 1);
  EXPECT_EQ(o.allreduce_after_init, 0);
  EXPECT_EQ(o.init_timeout_ms, 5000);
  ASSERT_EQ(Parse(Opt().add("lazy_init", "1").add("lazy_init", "0").add("allreduce_after_init", "1"), &o, &err),
            WSYNC_OK)
      << err;
  EXPECT_EQ(o.lazy_init, 0);  // the later one wins
  EXPECT_EQ(o.allreduce_after_init, 1);
  ASSERT_EQ(Parse(Opt().add("allreduce_after_init", "1").add("allreduce_after_init", "0"), &o, &err), WSYNC_OK);
  EXPECT_EQ(o.allreduce_after_init, 0);  // the later one wins
  ASSERT_EQ(Parse(Opt().add("init_timeout_ms", "1"), &o, &err), WSYNC_OK);
  EXPECT_EQ(o.init_timeout_ms, 1);
  ASSERT_EQ(Parse(Opt().add("init_timeout_ms", "86400000"), &o, &err), WSYNC_OK);
  EXPECT_EQ(o.init_timeout_ms, 86400000);
  ASSERT_EQ(Parse(Opt().add("torch_group", std::string(255, 'g').c_str()), &o, &err), WSYNC_OK);
  EXPECT_EQ(std::strlen(o.torch_group), 255u);
}

TEST(NcclOptions, UnknownKeyIsNamedWithTheKnownOnes) {
  nccl_options_t o;
  std::string err;
  EXPECT_EQ(Parse(Opt().add("torch_group", "g").add("nccl_socket_ifname", "eth0"), &o, &err),
            WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(err,
            "transport nccl: unknown option 'transport.nccl_socket_ifname' (known: transport.torch_group, "
            "transport.allreduce_after_init, transport.init_timeout_ms, transport.lazy_init)");
}

TEST(NcclOptions, BadZeroOneValue) {
  nccl_options_t o;
  std::string err;
  for (const char* v : {"2", "true", "", "01", " 1", "yes"}) {
    EXPECT_EQ(Parse(Opt().add("allreduce_after_init", v), &o, &err), WSYNC_ERR_INVALID_ARGUMENT) << v;
    EXPECT_EQ(err, std::string("transport nccl: option 'transport.allreduce_after_init' is '") + v + "'; use 0 or 1");
    EXPECT_EQ(Parse(Opt().add("lazy_init", v), &o, &err), WSYNC_ERR_INVALID_ARGUMENT) << v;
    EXPECT_EQ(err, std::string("transport nccl: option 'transport.lazy_init' is '") + v + "'; use 0 or 1");
  }
}

TEST(NcclOptions, LazyInitRefusesTheAllReduceAfterInit) {
  nccl_options_t o;
  std::string err;
  const std::string msg =
      "transport nccl: options 'transport.lazy_init=1' and 'transport.allreduce_after_init=1' cannot be combined: the "
      "all-reduce needs the communicator complete at connect (vLLM, which wants it, initialises eagerly)";
  EXPECT_EQ(Parse(Opt().add("lazy_init", "1").add("allreduce_after_init", "1"), &o, &err), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(err, msg);
  EXPECT_EQ(Parse(Opt().add("allreduce_after_init", "1").add("lazy_init", "1"), &o, &err), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(err, msg);
  EXPECT_EQ(Parse(Opt().add("allreduce_after_init", "1").add("lazy_init", "1").add("allreduce_after_init", "0"), &o,
                  &err),
            WSYNC_OK)
      << err;  // the combination that counts is the final one
  EXPECT_EQ(o.lazy_init, 1);
  EXPECT_EQ(o.allreduce_after_init, 0);
}

TEST(NcclOptions, BadTimeout) {
  nccl_options_t o;
  std::string err;
  for (const char* v : {"0", "-5", "abc", "10x", "", " 5", "+5", "86400001", "99999999999999999999999"}) {
    EXPECT_EQ(Parse(Opt().add("init_timeout_ms", v), &o, &err), WSYNC_ERR_INVALID_ARGUMENT) << v;
    EXPECT_EQ(err, std::string("transport nccl: option 'transport.init_timeout_ms' is '") + v +
                       "'; use milliseconds from 1 to 86400000");
  }
}

TEST(NcclOptions, BadTorchGroupAndNulls) {
  nccl_options_t o;
  std::string err;
  EXPECT_EQ(Parse(Opt().add("torch_group", ""), &o, &err), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(err.find("'transport.torch_group' is empty"), std::string::npos) << err;
  EXPECT_EQ(Parse(Opt().add("torch_group", std::string(256, 'g').c_str()), &o, &err), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(err.find("longer than 255 bytes"), std::string::npos) << err;
  EXPECT_EQ(Parse(Opt().add(nullptr, "1"), &o, &err), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Parse(Opt().add("torch_group", nullptr), &o, &err), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(err.find("torch_group"), std::string::npos) << err;
  char buf[128];
  EXPECT_EQ(nccl_parse_options(nullptr, 1, &o, buf, sizeof buf), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nccl_parse_options(nullptr, 0, &o, buf, sizeof buf), WSYNC_OK);
}

// ---- the poll loop, with a fake clock ------------------------------------------------------------

struct Fake {
  int64_t now = 0;
  int64_t step = 10;                // each pause advances the clock this much
  int looks = 0;                    // calls of state()
  int done_at = -1;                 // state() says DONE from this look on (1-based); -1 never
  int fail_at = -1;                 // state() says FAILED at this look
  int abort_after = -1;             // aborted() is true once this many looks happened
  std::vector<uint64_t> pauses;     // iteration numbers given to pause()
};

nccl_poll_state_t FakeState(void* a) {
  Fake* f = static_cast<Fake*>(a);
  ++f->looks;
  if (f->fail_at == f->looks) return NCCL_POLL_FAILED;
  if (f->done_at >= 0 && f->looks >= f->done_at) return NCCL_POLL_DONE;
  return NCCL_POLL_PENDING;
}
int FakeAborted(void* a) {
  Fake* f = static_cast<Fake*>(a);
  return f->abort_after >= 0 && f->looks >= f->abort_after;
}
int64_t FakeNow(void* a) { return static_cast<Fake*>(a)->now; }
void FakePause(void* a, uint64_t iteration) {
  Fake* f = static_cast<Fake*>(a);
  f->pauses.push_back(iteration);
  f->now += f->step;
}

nccl_wait_result_t RunPoll(Fake* f, int64_t deadline) {
  nccl_poller_t p = {FakeState, FakeAborted, FakeNow, FakePause, f};
  return nccl_poll_until(&p, deadline);
}

TEST(NcclPoll, DoneBeforeTheDeadline) {
  Fake f;
  f.done_at = 3;
  EXPECT_EQ(RunPoll(&f, 100), NCCL_WAIT_DONE);
  EXPECT_EQ(f.looks, 3);
  EXPECT_EQ(f.now, 20);
  EXPECT_EQ(f.pauses, (std::vector<uint64_t>{0, 1}));
}

TEST(NcclPoll, InProgressPastTheDeadlineTimesOut) {
  Fake f;  // never done
  EXPECT_EQ(RunPoll(&f, 50), NCCL_WAIT_TIMEOUT);
  EXPECT_EQ(f.looks, 6);  // at 0, 10, 20, 30, 40 and 50
  EXPECT_EQ(f.now, 50);
}

TEST(NcclPoll, ExpiredDeadlineStillLooksOnce) {
  Fake f;
  f.now = 500;
  f.done_at = 1;
  EXPECT_EQ(RunPoll(&f, 100), NCCL_WAIT_DONE);  // a wait with timeout 0 notices finished work
  Fake g;
  g.now = 500;
  EXPECT_EQ(RunPoll(&g, 100), NCCL_WAIT_TIMEOUT);
  EXPECT_EQ(g.looks, 1);
  EXPECT_TRUE(g.pauses.empty());
}

TEST(NcclPoll, ErrorIsReportedAtOnce) {
  Fake f;
  f.fail_at = 2;
  f.done_at = 5;
  EXPECT_EQ(RunPoll(&f, 1000), NCCL_WAIT_FAILED);
  EXPECT_EQ(f.looks, 2);
}

TEST(NcclPoll, AbortFlagWins) {
  Fake f;
  f.abort_after = 2;
  EXPECT_EQ(RunPoll(&f, 1000), NCCL_WAIT_ABORTED);
  EXPECT_EQ(f.looks, 2);
  Fake g;
  g.abort_after = 0;  // aborted before the call: no look at all
  g.done_at = 1;
  EXPECT_EQ(RunPoll(&g, 1000), NCCL_WAIT_ABORTED);
  EXPECT_EQ(g.looks, 0);
}

TEST(NcclPoll, NoAbortOrPauseFunctions) {
  Fake f;
  f.done_at = 4;
  nccl_poller_t p = {FakeState, nullptr, FakeNow, nullptr, &f};
  EXPECT_EQ(nccl_poll_until(&p, 10), NCCL_WAIT_DONE);
  EXPECT_EQ(f.looks, 4);
}

TEST(NcclPoll, Deadline) {
  EXPECT_EQ(nccl_deadline(100, 50), 150);
  EXPECT_EQ(nccl_deadline(100, 0), 100);
  EXPECT_EQ(nccl_deadline(100, -1), 100);
  EXPECT_EQ(nccl_deadline(100, INT64_MAX), INT64_MAX);
}

TEST(NcclPoll, RealClockTimesOut) {
  Fake f;  // never done; real clock and the plugin's pause
  nccl_poller_t p = {FakeState, nullptr, [](void*) { return nccl_mono_ms(); }, nccl_default_pause, &f};
  const int64_t t0 = nccl_mono_ms();
  EXPECT_EQ(nccl_poll_until(&p, nccl_deadline(t0, 60)), NCCL_WAIT_TIMEOUT);
  const int64_t took = nccl_mono_ms() - t0;
  EXPECT_GE(took, 60);
  EXPECT_LT(took, 1000);
  EXPECT_GT(f.looks, 1);
}

}  // namespace
