// Transport 'cuda_ipc' on a real GPU: a sender and receivers in separate processes on one device,
// loaded through the core's loader, rendezvousing through a real TcpStoreServer. Per bucket the
// children follow the core's plugin ABI 1.2 order, with a pipe pair standing in for the core's
// control channel (it carries the transport's records with MANIFEST, READY and ACK):
//
//   sender describe_send -> [MANIFEST + bucket record] -> receiver peer_blob, recv_post,
//   describe_recv(READY) -> [READY] -> sender send_post -> receiver recv_wait, describe_recv(ACK)
//   -> [ACK + done record] -> sender peer_blob -> send_wait
//
// CUDA does not survive fork() once initialised, so this process never touches CUDA: the probe
// for a device and every rank run in forked children, all forked before the store server starts
// its thread; the parent hosts the store, hands each child the port through a pipe and collects
// exit codes. Without a device the whole program prints why and exits 77 (ctest: Skipped).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "loader/plugin_loader.h"
#include "store/store_handle.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

namespace {

using Clock = std::chrono::steady_clock;

int64_t MsSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

// In a child: report and return 1 (gtest assertions would not reach the parent).
#define CHECK(cond, ...)                                                                              \
  do {                                                                                                \
    if (!(cond)) {                                                                                    \
      std::fprintf(stderr, "[pid %d] %s:%d: CHECK(%s) failed: ", getpid(), __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                              \
      std::fprintf(stderr, "\n  last error: %s\n", wsync::last_error().c_str());                     \
      return 1;                                                                                       \
    }                                                                                                 \
  } while (0)

#define CUDA_CHECK(call) CHECK((call) == cudaSuccess, "%s", #call)

// ---- processes ---------------------------------------------------------------------------------

struct Child {
  pid_t pid = -1;
  int port_fd = -1;  // the parent writes the store port here
};

// Fork a child that waits for the store port, runs body(port) and exits with its result.
Child Spawn(const std::function<int(uint16_t)>& body) {
  int fds[2];
  if (pipe(fds) != 0) return Child{};
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[1]);
    signal(SIGPIPE, SIG_IGN);  // a peer that died shows as a failed write, not as our death
    uint16_t port = 0;
    const bool got = read(fds[0], &port, sizeof port) == static_cast<ssize_t>(sizeof port);
    close(fds[0]);
    int rc = got ? body(port) : 2;
    std::fflush(nullptr);
    _exit(rc);
  }
  close(fds[0]);
  return Child{pid, fds[1]};
}

// Host the store, release the children, wait for them (killing them after timeout_s). Exit codes
// in order; -1 for a child killed or crashed.
std::vector<int> RunChildren(std::vector<Child> kids, int timeout_s) {
  std::unique_ptr<wsync::TcpStoreServer> server;
  const wsync_status_t st = wsync::TcpStoreServer::start("127.0.0.1", 0, &server);
  const uint16_t port = st == WSYNC_OK ? server->port() : 0;
  for (auto& k : kids) {
    if (k.port_fd < 0) continue;
    if (write(k.port_fd, &port, sizeof port) != static_cast<ssize_t>(sizeof port)) std::perror("write port");
    close(k.port_fd);
  }
  std::vector<int> codes(kids.size(), -1);
  std::vector<bool> done(kids.size(), false);
  const auto t0 = Clock::now();
  for (size_t left = kids.size(); left > 0;) {
    for (size_t i = 0; i < kids.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      if (kids[i].pid <= 0 || waitpid(kids[i].pid, &status, WNOHANG) == kids[i].pid) {
        done[i] = true;
        --left;
        if (kids[i].pid > 0 && WIFEXITED(status)) codes[i] = WEXITSTATUS(status);
      }
    }
    if (left > 0 && MsSince(t0) > timeout_s * 1000) {
      for (size_t i = 0; i < kids.size(); ++i)
        if (!done[i]) {
          std::fprintf(stderr, "child %d did not finish in %d s: killed\n", kids[i].pid, timeout_s);
          kill(kids[i].pid, SIGKILL);
          waitpid(kids[i].pid, nullptr, 0);
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return codes;
}

std::string UniqueGroup(const char* base) {
  static int n = 0;
  return std::string(base) + "-" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

// ---- one rank in a child -----------------------------------------------------------------------

struct Rank {
  std::unique_ptr<wsync::TcpStoreClient> client;
  wsync_store store{};
  wsync::LoadedTransport lt;
  const wsync_transport_v1_t* T = nullptr;
  void* self = nullptr;
  ~Rank() {
    if (self) T->destroy(self);
  }
  // A test-only key, to line the processes up.
  void Set(const std::string& key) { client->set(key, "1", 1); }
  bool Wait(const std::string& key, int64_t ms) {
    std::vector<uint8_t> v;
    return client->get(key, &v, ms) == WSYNC_OK;
  }
};

wsync_status_t Open(Rank* r, uint16_t port, uint32_t rank, uint32_t world, const std::string& group) {
  wsync_status_t st = wsync::TcpStoreClient::connect("127.0.0.1", port, 10000, &r->client);
  if (st != WSYNC_OK) return st;
  r->store.client = r->client.get();
  if ((st = wsync::load_transport("cuda_ipc", &r->lt)) != WSYNC_OK) return st;
  r->T = r->lt.table;
  wsync_transport_params_t p = WSYNC_TRANSPORT_PARAMS_INIT;
  p.rank = rank;
  p.world_size = world;
  p.group_name = group.c_str();
  p.store = &r->store;
  p.timeout_ms = 20000;
  p.device_index = 0;
  return r->T->create(&p, &r->self);
}

template <typename F>
wsync_status_t InSlices(F once, int64_t total_ms) {  // the core waits in ~20 ms slices
  const auto t0 = Clock::now();
  for (;;) {
    const wsync_status_t rc = once(20);
    if (rc != WSYNC_ERR_TIMEOUT || MsSince(t0) > total_ms) return rc;
  }
}

std::vector<uint8_t> Bytes(uint64_t seed, size_t n) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

constexpr uint64_t kSlotBytes = 1u << 20;
uint64_t LenOf(uint64_t seq) { return 300000 + seq * 777; }  // bucket sizes differ
uint64_t OffsetOf(uint64_t seq) { return 4096 * seq; }       // and so do their places in a slot

wsync_buffer_t CudaBuffer(const void* p, uint64_t len, void* stream) {
  wsync_buffer_t b = WSYNC_BUFFER_INIT;
  b.device_type = WSYNC_DEVICE_CUDA;
  b.device_index = 0;
  b.data = p;
  b.len = len;
  b.stream = stream;
  return b;
}

// ---- the core's control channel, reduced to the transport's records ------------------------------

// One pipe each way between the sender child and a receiver child. A message: u64 seq, i32 kind
// (WSYNC_BLOB_*), u32 length, then the record (host byte order: both ends are on this machine).
struct Channel {
  int down[2] = {-1, -1};  // sender -> receiver: MANIFEST
  int up[2] = {-1, -1};    // receiver -> sender: READY, ACK
  bool Open() { return pipe(down) == 0 && pipe(up) == 0; }
  // In each child, close the ends it does not use, so that a peer's death reads as end-of-file.
  void SenderSide() {
    close(down[0]);
    close(up[1]);
  }
  void ReceiverSide() {
    close(down[1]);
    close(up[0]);
  }
  void CloseAll() {
    for (int fd : {down[0], down[1], up[0], up[1]})
      if (fd >= 0) close(fd);
  }
};

struct Msg {
  uint64_t seq = 0;
  int32_t kind = 0;
  std::vector<uint8_t> blob;
};

bool WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t k = write(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool ReadAll(int fd, void* p, size_t n, Clock::time_point deadline) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd pfd = {fd, POLLIN, 0};
    const int pr = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (pr < 0 && errno != EINTR) return false;
    if (pr <= 0) continue;
    const ssize_t k = read(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;  // an error, or the peer is gone
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool SendMsg(int fd, uint64_t seq, int32_t kind, const std::vector<uint8_t>& blob) {
  uint8_t head[16];
  const uint32_t len = static_cast<uint32_t>(blob.size());
  std::memcpy(head, &seq, 8);
  std::memcpy(head + 8, &kind, 4);
  std::memcpy(head + 12, &len, 4);
  return WriteAll(fd, head, sizeof head) && (blob.empty() || WriteAll(fd, blob.data(), blob.size()));
}

bool RecvMsg(int fd, int64_t timeout_ms, Msg* m) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  uint8_t head[16];
  uint32_t len = 0;
  if (!ReadAll(fd, head, sizeof head, deadline)) return false;
  std::memcpy(&m->seq, head, 8);
  std::memcpy(&m->kind, head + 8, 4);
  std::memcpy(&len, head + 12, 4);
  if (len > WSYNC_BLOB_MAX_BYTES) return false;
  m->blob.resize(len);
  return len == 0 || ReadAll(fd, m->blob.data(), len, deadline);
}

// The transport's side-channel calls, into a buffer of the core's size.
wsync_status_t DescribeSend(Rank* r, uint64_t seq, const wsync_buffer_t& b, std::vector<uint8_t>* blob) {
  uint64_t len = 0;
  blob->assign(WSYNC_BLOB_MAX_BYTES, 0);
  const wsync_status_t st = r->T->describe_send(r->self, seq, &b, blob->data(), blob->size(), &len);
  blob->resize(st == WSYNC_OK ? std::min<uint64_t>(len, WSYNC_BLOB_MAX_BYTES) : 0);
  return st;
}

wsync_status_t DescribeRecv(Rank* r, uint64_t seq, int32_t kind, std::vector<uint8_t>* blob) {
  uint64_t len = 0;
  blob->assign(WSYNC_BLOB_MAX_BYTES, 0);
  const wsync_status_t st = r->T->describe_recv(r->self, seq, kind, blob->data(), blob->size(), &len);
  blob->resize(st == WSYNC_OK ? std::min<uint64_t>(len, WSYNC_BLOB_MAX_BYTES) : 0);
  return st;
}

bool HasSideChannel(const Rank& r) {
  return WSYNC_HAS_FIELD(r.T, wsync_transport_v1_t, peer_blob) && r.T->describe_send != nullptr &&
         r.T->describe_recv != nullptr && r.T->peer_blob != nullptr;
}

uint32_t Le32(const std::vector<uint8_t>& b, size_t off) {
  return static_cast<uint32_t>(b[off]) | static_cast<uint32_t>(b[off + 1]) << 8 |
         static_cast<uint32_t>(b[off + 2]) << 16 | static_cast<uint32_t>(b[off + 3]) << 24;
}

// ---- the tests ---------------------------------------------------------------------------------

// Three buckets, alternating two staging slots (bucket 3 reuses slot 0 once bucket 1's done record
// came back); the receiver scatters each into two device regions and a host region, and checks an
// XXH3 of what arrived.
int SendThree(uint16_t port, const std::string& group, int to_rx, int from_rx) {
  Rank r;
  CHECK(Open(&r, port, 0, 2, group) == WSYNC_OK, "sender create");
  CHECK(HasSideChannel(r), "the plugin's table has no describe_send/describe_recv/peer_blob");
  void* slot[2] = {nullptr, nullptr};
  CUDA_CHECK(cudaMalloc(&slot[0], kSlotBytes));
  CUDA_CHECK(cudaMalloc(&slot[1], kSlotBytes));
  const wsync_buffer_t staging[2] = {CudaBuffer(slot[0], kSlotBytes, nullptr),
                                     CudaBuffer(slot[1], kSlotBytes, nullptr)};
  CHECK(r.T->register_staging(r.self, staging, 2) == WSYNC_OK, "register_staging");
  CHECK(r.T->connect(r.self, 20000) == WSYNC_OK, "sender connect");
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* pinned = nullptr;
  CUDA_CHECK(cudaMallocHost(&pinned, kSlotBytes));
  const uint32_t ranks[1] = {1};
  std::vector<uint8_t> record;
  Msg m;
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    const uint32_t s_index = static_cast<uint32_t>((seq - 1) % 2);
    uint8_t* dst = static_cast<uint8_t*>(slot[s_index]) + OffsetOf(seq);
    const std::vector<uint8_t> data = Bytes(seq, LenOf(seq));
    void* s = nullptr;
    if (seq < 3) {
      CUDA_CHECK(cudaMemcpy(dst, data.data(), data.size(), cudaMemcpyHostToDevice));
    } else {  // written on a stream the host does not wait for: the transport orders after it
      std::memcpy(pinned, data.data(), data.size());
      CUDA_CHECK(cudaMemcpyAsync(dst, pinned, data.size(), cudaMemcpyHostToDevice, stream));
      s = stream;
    }
    const wsync_buffer_t b = CudaBuffer(dst, data.size(), s);
    CHECK(DescribeSend(&r, seq, b, &record) == WSYNC_OK, "describe_send %llu", (unsigned long long)seq);
    CHECK(record.size() == 48, "bucket record of %zu bytes", record.size());
    CHECK(Le32(record, 24) == s_index, "bucket %llu in slot %u, expected slot %u", (unsigned long long)seq,
          Le32(record, 24), s_index);
    CHECK(SendMsg(to_rx, seq, WSYNC_BLOB_MANIFEST, record), "sending MANIFEST %llu", (unsigned long long)seq);
    CHECK(RecvMsg(from_rx, 30000, &m), "no READY for bucket %llu", (unsigned long long)seq);
    CHECK(m.seq == seq && m.kind == WSYNC_BLOB_READY, "READY expected, got kind %d of bucket %llu", m.kind,
          (unsigned long long)m.seq);
    if (!m.blob.empty())  // the core delivers only non-empty records
      CHECK(r.T->peer_blob(r.self, seq, 1, WSYNC_BLOB_READY, m.blob.data(), m.blob.size()) == WSYNC_OK, "READY record");
    CHECK(r.T->send_post(r.self, seq, &b, ranks, 1) == WSYNC_OK, "send_post %llu", (unsigned long long)seq);
    CHECK(RecvMsg(from_rx, 30000, &m), "no ACK for bucket %llu", (unsigned long long)seq);
    CHECK(m.seq == seq && m.kind == WSYNC_BLOB_ACK && m.blob.size() == 24, "ACK with a 24-byte done record "
          "expected, got kind %d of bucket %llu with %zu bytes", m.kind, (unsigned long long)m.seq, m.blob.size());
    // Until its done record arrives the slot is still the receiver's.
    CHECK(r.T->send_wait(r.self, seq, 0) == WSYNC_ERR_TIMEOUT, "send_wait %llu before the done record",
          (unsigned long long)seq);
    CHECK(r.T->peer_blob(r.self, seq, 1, WSYNC_BLOB_ACK, m.blob.data(), m.blob.size()) == WSYNC_OK, "done record %llu",
          (unsigned long long)seq);
    CHECK(InSlices([&](int64_t ms) { return r.T->send_wait(r.self, seq, ms); }, 20000) == WSYNC_OK, "send_wait %llu",
          (unsigned long long)seq);
  }
  // Ranges that are not inside one registered slot cannot be described, and nothing is sent that
  // was not described.
  const wsync_buffer_t outside = CudaBuffer(pinned, 16, nullptr);
  CHECK(DescribeSend(&r, 4, outside, &record) == WSYNC_ERR_INVALID_ARGUMENT, "outside");
  CHECK(wsync::last_error().find("not inside") != std::string::npos, "message");
  const wsync_buffer_t straddle = CudaBuffer(static_cast<uint8_t*>(slot[0]) + kSlotBytes - 8, 16, nullptr);
  CHECK(DescribeSend(&r, 4, straddle, &record) == WSYNC_ERR_INVALID_ARGUMENT, "straddling");
  const wsync_buffer_t undescribed = CudaBuffer(slot[1], 16, nullptr);
  CHECK(r.T->send_post(r.self, 4, &undescribed, ranks, 1) == WSYNC_ERR_INVALID_STATE, "send_post without describe");
  CHECK(r.Wait("test/" + group + "/rx_exit", 30000), "the receiver never finished");
  r.T->destroy(r.self);
  r.self = nullptr;
  CUDA_CHECK(cudaFreeHost(pinned));
  CUDA_CHECK(cudaStreamDestroy(stream));
  CUDA_CHECK(cudaFree(slot[0]));
  CUDA_CHECK(cudaFree(slot[1]));
  return 0;
}

int ReceiveThree(uint16_t port, const std::string& group, int from_tx, int to_tx) {
  Rank r;
  CHECK(Open(&r, port, 1, 2, group) == WSYNC_OK, "receiver create");
  CHECK(HasSideChannel(r), "the plugin's table has no describe_send/describe_recv/peer_blob");
  CHECK(r.T->connect(r.self, 20000) == WSYNC_OK, "receiver connect");
  uint8_t* dev = nullptr;
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dev), kSlotBytes));
  std::vector<uint8_t> host(kSlotBytes), blob;
  Msg m;
  int failures = 0;
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    const uint64_t len = LenOf(seq), a = len / 3, b = len / 4, c = len - a - b;
    const wsync_iov_t iov[3] = {{dev, a}, {host.data(), b}, {dev + a, c}};
    CUDA_CHECK(cudaMemset(dev, 0, kSlotBytes));
    CUDA_CHECK(cudaDeviceSynchronize());  // the transport copies on its own stream, unordered with ours
    CHECK(RecvMsg(from_tx, 30000, &m), "no MANIFEST for bucket %llu", (unsigned long long)seq);
    CHECK(m.seq == seq && m.kind == WSYNC_BLOB_MANIFEST && !m.blob.empty(), "MANIFEST with a record expected, got "
          "kind %d of bucket %llu with %zu bytes", m.kind, (unsigned long long)m.seq, m.blob.size());
    CHECK(r.T->peer_blob(r.self, seq, 0, WSYNC_BLOB_MANIFEST, m.blob.data(), m.blob.size()) == WSYNC_OK,
          "bucket record %llu", (unsigned long long)seq);
    CHECK(r.T->recv_post(r.self, seq, iov, 3) == WSYNC_OK, "recv_post %llu", (unsigned long long)seq);
    CHECK(DescribeRecv(&r, seq, WSYNC_BLOB_READY, &blob) == WSYNC_OK, "describe_recv READY %llu",
          (unsigned long long)seq);
    CHECK(SendMsg(to_tx, seq, WSYNC_BLOB_READY, blob), "sending READY %llu", (unsigned long long)seq);
    CHECK(InSlices([&](int64_t ms) { return r.T->recv_wait(r.self, seq, ms); }, 20000) == WSYNC_OK, "recv_wait %llu",
          (unsigned long long)seq);
    std::vector<uint8_t> got(len);
    CUDA_CHECK(cudaMemcpy(got.data(), dev, a, cudaMemcpyDeviceToHost));
    std::memcpy(got.data() + a, host.data(), b);
    CUDA_CHECK(cudaMemcpy(got.data() + a + b, dev + a, c, cudaMemcpyDeviceToHost));
    const std::vector<uint8_t> want = Bytes(seq, len);
    const XXH64_hash_t hg = XXH3_64bits(got.data(), got.size()), hw = XXH3_64bits(want.data(), want.size());
    if (hg != hw) {
      size_t i = 0;
      while (i < len && got[i] == want[i]) ++i;
      std::fprintf(stderr, "bucket %llu: XXH3 %016llx, expected %016llx; first difference at byte %zu\n",
                   (unsigned long long)seq, (unsigned long long)hg, (unsigned long long)hw, i);
      ++failures;
    }
    CHECK(DescribeRecv(&r, seq, WSYNC_BLOB_ACK, &blob) == WSYNC_OK && blob.size() == 24, "describe_recv ACK %llu",
          (unsigned long long)seq);
    CHECK(SendMsg(to_tx, seq, WSYNC_BLOB_ACK, blob), "sending ACK %llu", (unsigned long long)seq);
  }
  CUDA_CHECK(cudaFree(dev));
  r.T->destroy(r.self);  // close the mappings before the sender frees its staging
  r.self = nullptr;
  r.Set("test/" + group + "/rx_exit");
  return failures == 0 ? 0 : 1;
}

TEST(CudaIpcGpu, ThreeBucketsAlternatingSlots) {
  const std::string g = UniqueGroup("three");
  Channel ch;
  ASSERT_TRUE(ch.Open());
  std::vector<Child> kids = {Spawn([&](uint16_t p) {
                               ch.SenderSide();
                               return SendThree(p, g, ch.down[1], ch.up[0]);
                             }),
                             Spawn([&](uint16_t p) {
                               ch.ReceiverSide();
                               return ReceiveThree(p, g, ch.down[0], ch.up[1]);
                             })};
  ch.CloseAll();  // the parent's copies: only the children hold the pipes now
  const std::vector<int> codes = RunChildren(kids, 120);
  EXPECT_EQ(codes[0], 0) << "sender";
  EXPECT_EQ(codes[1], 0) << "receiver";
}

// world_size 3 with only rank 1 running: the sender's connect times out naming rank 2.
int SenderMissingRank(uint16_t port, const std::string& group) {
  Rank r;
  CHECK(Open(&r, port, 0, 3, group) == WSYNC_OK, "sender create");
  void* slot = nullptr;
  CUDA_CHECK(cudaMalloc(&slot, kSlotBytes));
  const wsync_buffer_t staging = CudaBuffer(slot, kSlotBytes, nullptr);
  CHECK(r.T->register_staging(r.self, &staging, 1) == WSYNC_OK, "register_staging");
  const auto t0 = Clock::now();
  const wsync_status_t st = r.T->connect(r.self, 1500);
  const int64_t ms = MsSince(t0);
  const std::string msg = wsync::last_error();
  CHECK(st == WSYNC_ERR_TIMEOUT, "connect returned %d: %s", st, msg.c_str());
  CHECK(msg.find("rank 2 did not map") != std::string::npos, "message: %s", msg.c_str());
  CHECK(ms >= 1400 && ms < 6000, "connect took %lld ms for a 1500 ms timeout", (long long)ms);
  r.Set("test/" + group + "/tx_exit");
  CHECK(r.Wait("test/" + group + "/rx_exit", 30000), "rank 1 never finished");
  r.T->destroy(r.self);
  r.self = nullptr;
  CUDA_CHECK(cudaFree(slot));
  return 0;
}

int ReceiverThatWaits(uint16_t port, const std::string& group, uint32_t world) {
  Rank r;
  CHECK(Open(&r, port, 1, world, group) == WSYNC_OK, "receiver create");
  CHECK(r.T->connect(r.self, 20000) == WSYNC_OK, "receiver connect");
  CHECK(r.Wait("test/" + group + "/tx_exit", 30000), "the sender never finished");
  r.T->destroy(r.self);
  r.self = nullptr;
  r.Set("test/" + group + "/rx_exit");
  return 0;
}

TEST(CudaIpcGpu, ConnectTimeoutNamesTheMissingRank) {
  const std::string g = UniqueGroup("missing");
  std::vector<Child> kids = {Spawn([&](uint16_t p) { return SenderMissingRank(p, g); }),
                             Spawn([&](uint16_t p) { return ReceiverThatWaits(p, g, 3); })};
  const std::vector<int> codes = RunChildren(kids, 90);
  EXPECT_EQ(codes[0], 0) << "sender";
  EXPECT_EQ(codes[1], 0) << "rank 1";
}

// abort from another thread ends a recv_wait that would otherwise wait 10 s for a bucket: the
// sender describes bucket 1 on a stream that a host function holds back, so the receiver's copies
// (queued behind the sender's event on the GPU) cannot complete until the receiver says so.
std::atomic<int> g_gate{0};

void CUDART_CB HoldStream(void*) {  // runs on a CUDA thread of the sender; bounded in case the receiver dies
  const auto t0 = Clock::now();
  while (g_gate.load() == 0 && MsSince(t0) < 30000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

int SenderThatHoldsTheBucket(uint16_t port, const std::string& group, int to_rx) {
  Rank r;
  CHECK(Open(&r, port, 0, 2, group) == WSYNC_OK, "sender create");
  CHECK(HasSideChannel(r), "the plugin's table has no describe_send/describe_recv/peer_blob");
  void* slot = nullptr;
  CUDA_CHECK(cudaMalloc(&slot, kSlotBytes));
  const wsync_buffer_t staging = CudaBuffer(slot, kSlotBytes, nullptr);
  CHECK(r.T->register_staging(r.self, &staging, 1) == WSYNC_OK, "register_staging");
  CHECK(r.T->connect(r.self, 20000) == WSYNC_OK, "sender connect");
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaLaunchHostFunc(stream, HoldStream, nullptr));
  const wsync_buffer_t b = CudaBuffer(slot, 4096, stream);
  std::vector<uint8_t> record;
  CHECK(DescribeSend(&r, 1, b, &record) == WSYNC_OK, "describe_send");
  CHECK(SendMsg(to_rx, 1, WSYNC_BLOB_MANIFEST, record), "sending MANIFEST");
  const bool aborted = r.Wait("test/" + group + "/aborted", 30000);
  g_gate.store(1);  // in every case: the stream must drain before the slot is freed
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CHECK(aborted, "the receiver never reported its abort");
  CHECK(r.Wait("test/" + group + "/rx_exit", 30000), "the receiver never finished");
  r.T->destroy(r.self);
  r.self = nullptr;
  CUDA_CHECK(cudaStreamDestroy(stream));
  CUDA_CHECK(cudaFree(slot));
  return 0;
}

int ReceiverAborted(uint16_t port, const std::string& group, int from_tx) {
  Rank r;
  CHECK(Open(&r, port, 1, 2, group) == WSYNC_OK, "receiver create");
  CHECK(HasSideChannel(r), "the plugin's table has no describe_send/describe_recv/peer_blob");
  CHECK(r.T->connect(r.self, 20000) == WSYNC_OK, "receiver connect");
  void* dev = nullptr;
  CUDA_CHECK(cudaMalloc(&dev, 4096));
  const wsync_iov_t iov[1] = {{dev, 4096}};
  Msg m;
  CHECK(RecvMsg(from_tx, 30000, &m) && m.seq == 1 && m.kind == WSYNC_BLOB_MANIFEST, "no MANIFEST for bucket 1");
  CHECK(r.T->peer_blob(r.self, 1, 0, WSYNC_BLOB_MANIFEST, m.blob.data(), m.blob.size()) == WSYNC_OK, "bucket record");
  CHECK(r.T->recv_post(r.self, 1, iov, 1) == WSYNC_OK, "recv_post");
  const wsync_transport_v1_t* T = r.T;
  void* self = r.self;
  std::thread aborter([T, self] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    T->abort(self);
  });
  const auto t0 = Clock::now();
  const wsync_status_t st = r.T->recv_wait(r.self, 1, 10000);
  const int64_t ms = MsSince(t0);
  aborter.join();
  r.Set("test/" + group + "/aborted");  // the sender lets its stream go on
  CHECK(st == WSYNC_ERR_ABORTED, "recv_wait returned %d", st);
  CHECK(ms >= 250 && ms < 5000, "recv_wait returned after %lld ms", (long long)ms);
  CHECK(r.T->recv_post(r.self, 2, iov, 1) != WSYNC_OK, "recv_post after abort");
  // Our copy is still queued behind the sender's event: let it end before its destination and the
  // mapping go (the plugin's stream lives in the same primary context as ours).
  CUDA_CHECK(cudaDeviceSynchronize());
  r.T->destroy(r.self);
  r.self = nullptr;
  CUDA_CHECK(cudaFree(dev));
  r.Set("test/" + group + "/rx_exit");
  return 0;
}

TEST(CudaIpcGpu, AbortEndsRecvWait) {
  const std::string g = UniqueGroup("abort");
  Channel ch;
  ASSERT_TRUE(ch.Open());
  std::vector<Child> kids = {Spawn([&](uint16_t p) {
                               ch.SenderSide();
                               return SenderThatHoldsTheBucket(p, g, ch.down[1]);
                             }),
                             Spawn([&](uint16_t p) {
                               ch.ReceiverSide();
                               return ReceiverAborted(p, g, ch.down[0]);
                             })};
  ch.CloseAll();
  const std::vector<int> codes = RunChildren(kids, 90);
  EXPECT_EQ(codes[0], 0) << "sender";
  EXPECT_EQ(codes[1], 0) << "receiver";
}

// Is there a CUDA device? Asked in a child, so that this process stays free to fork.
bool ProbeDevice(std::string* why) {
  int fds[2];
  if (pipe(fds) != 0) {
    *why = "pipe failed";
    return false;
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    char msg[256];
    std::snprintf(msg, sizeof msg, "cudaGetDeviceCount: %s, %d device(s)",
                  e == cudaSuccess ? "ok" : cudaGetErrorString(e), count);
    if (write(fds[1], msg, std::strlen(msg)) < 0) _exit(3);
    _exit(e == cudaSuccess && count > 0 ? 0 : 1);
  }
  close(fds[1]);
  char buf[256] = {0};
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  *why = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "the probe printed nothing";
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("WSYNC_PLUGIN_PATH", WSYNC_TEST_PLUGIN_DIR, 1);
  std::string why;
  if (!ProbeDevice(&why)) {
    std::printf("SKIPPED: no usable CUDA device (%s); gpu.cuda_ipc_plugin needs one\n", why.c_str());
    return 77;
  }
  std::printf("CUDA device found (%s)\n", why.c_str());
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
