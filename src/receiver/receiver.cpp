// The receiver half: join a group, then turn control messages into events for the engine.
// Bytes of registered tensors land in the engine's buffers; the rest in wsync staging, handed
// out as views that stay valid until the next call.
#include "receiver/receiver.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "common/error.h"
#include "common/options.h"
#include "common/tensors.h"
#include "control/group_info.h"
#include "device/cuda_rt.h"
#include "manifest/manifest.h"
#include "planner/bucket_planner.h"
#include "store/host_port.h"

using namespace wsync;

namespace {

constexpr int64_t kSliceMs = 20;
// Limits on what a manifest may ask of this process (the sender refuses larger buckets too).
constexpr uint64_t kMaxBucketBytes = 1ull << 40;
constexpr uint64_t kMaxPadding = 64u << 10;  // between entries; the native layout pads < 256 bytes

bool is_local_host(const std::string& h) {
  return h == "127.0.0.1" || h == "localhost" || h == "::1" || h == "0.0.0.0" || h == "::" || h.empty();
}

void send_status(wsync_receiver_t* rx, MsgType type, uint64_t seq, wsync_status_t code, const std::string& why) {
  ByteWriter w;
  w.u64(seq);
  w.i32(code);
  w.str(why);
  rx->conn.send(type, w.data(), 1000);
}

// Forget half-assembled tensors. Once the transport was told to forget the sender (rx->broken),
// a posted receive may still land in their buffers, so those are kept until destroy.
void drop_assemblies(wsync_receiver_t* rx) {
  if (!rx->broken.empty())
    for (auto& kv : rx->assembling)
      if (kv.second.owned.data()) rx->graveyard.push_back(std::move(kv.second.owned));
  rx->assembling.clear();
}

// Refuse a bucket: tell the sender (NACK) and return the same error to the engine.
wsync_status_t refuse(wsync_receiver_t* rx, uint64_t seq, wsync_status_t st) {
  std::string why = last_error();
  send_status(rx, MsgType::kNack, seq, st, why);
  drop_assemblies(rx);
  return fail_msg(st, "bucket refused: " + why);
}

wsync_status_t receiver_init(const wsync_receiver_config_t* config, wsync_receiver_t* rx) {
  const wsync_receiver_config_t defaults = WSYNC_RECEIVER_CONFIG_INIT;
  wsync_receiver_config_t cfg;
  wsync_status_t st = read_struct(config, "config", &cfg, defaults);
  if (st != WSYNC_OK) return st;
  if (cfg.store_addr == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "config->store_addr is NULL");
  if (cfg.rank == 0) return fail(WSYNC_ERR_INVALID_ARGUMENT, "config->rank is 0; rank 0 is the sender, receivers are 1..N");
  rx->rank = cfg.rank;
  rx->group_name = cfg.group_name ? cfg.group_name : "wsync";
  OptionList opts;
  if ((st = copy_options(cfg.options, cfg.num_options, &opts)) != WSYNC_OK) return st;
  for (const auto& kv : opts) {
    if (kv.first == "timeout_ms") {
      uint64_t n = 0;
      if ((st = parse_u64_option(kv.first, kv.second, 1, 24ull * 3600 * 1000, &n)) != WSYNC_OK) return st;
      rx->timeout_ms = static_cast<int64_t>(n);
    } else if (kv.first == "device") {
      uint64_t n = 0;
      if ((st = parse_u64_option(kv.first, kv.second, 0, 1023, &n)) != WSYNC_OK) return st;
      rx->device = static_cast<int>(n);
    } else if (kv.first.compare(0, 10, "transport.") != 0) {
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "unknown receiver option '%s' (known: timeout_ms, device, transport.*)",
                  kv.first.c_str());
    }
  }
  const int64_t init_timeout = cfg.timeout_ms >= 0 ? cfg.timeout_ms : rx->timeout_ms;
  const int64_t deadline = deadline_after(init_timeout);

  std::string host;
  uint16_t port = 0;
  if ((st = parse_host_port(cfg.store_addr, &host, &port)) != WSYNC_OK) return st;
  if ((st = TcpStoreClient::connect(host, port, init_timeout, &rx->store_client)) != WSYNC_OK)
    return fail_msg(st, "cannot reach the group's store at " + std::string(cfg.store_addr) + ": " + last_error());
  rx->store_handle.client = rx->store_client.get();
  std::vector<uint8_t> blob;
  if ((st = rx->store_client->get(kGroupInfoKey, &blob, std::max<int64_t>(deadline - now_ms(), 1))) != WSYNC_OK)
    return fail_msg(st, "the store at " + std::string(cfg.store_addr) + " announced no wsync group: " + last_error());
  GroupInfo info;
  if ((st = decode_group_info(blob, &info)) != WSYNC_OK) return st;
  if (info.group_name != rx->group_name)
    return fail(WSYNC_ERR_REJECTED, "this receiver asked for group '%s' but the store at %s hosts group '%s'",
                rx->group_name.c_str(), cfg.store_addr, info.group_name.c_str());
  if (info.protocol != kControlProtocolVersion)
    return fail(WSYNC_ERR_VERSION_MISMATCH, "the sender speaks control protocol %u, this receiver speaks %u",
                info.protocol, kControlProtocolVersion);
  if (cfg.rank >= info.world_size)
    return fail(WSYNC_ERR_REJECTED, "rank %u is out of range: group '%s' has receivers 1..%u", cfg.rank,
                rx->group_name.c_str(), info.world_size - 1);
  rx->world_size = info.world_size;

  // A name read from the (unauthenticated) store is only ever a plugin name, never a path.
  if (cfg.transport == nullptr &&
      (info.transport.empty() || info.transport.find_first_not_of(
                                     "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != std::string::npos))
    return fail(WSYNC_ERR_PROTOCOL, "the store at %s announces transport '%s', which is not a plugin name",
                cfg.store_addr, info.transport.c_str());
  if ((st = load_transport(cfg.transport ? cfg.transport : info.transport, &rx->transport)) != WSYNC_OK) return st;
  if (std::string(rx->transport.table->name) != info.transport)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "the group uses transport '%s' but this receiver loaded '%s' (%s)",
                info.transport.c_str(), rx->transport.table->name, rx->transport.path.c_str());

  // A transport that moves device memory only gets device memory: staging, padding and
  // assemblies live on this receiver's CUDA device (option `device`, else the current one).
  const uint64_t caps = rx->transport.table->caps;
  if (!(caps & (WSYNC_TRANSPORT_CAP_HOST_MEMORY | WSYNC_TRANSPORT_CAP_CUDA_MEMORY)))
    return fail(WSYNC_ERR_UNSUPPORTED, "transport '%s' declares neither host nor CUDA memory", rx->transport.table->name);
  rx->device_memory = !(caps & WSYNC_TRANSPORT_CAP_HOST_MEMORY);
  if (rx->device_memory) {
    const CudaRt* rt = cuda_runtime();
    if (rt == nullptr)
      return fail_msg(last_status(), "transport '" + std::string(rx->transport.table->name) +
                                         "' moves CUDA memory, but " + last_error());
    if ((st = cuda_pick_device(rt, rx->device, &rx->device)) != WSYNC_OK) return st;
  } else {
    rx->device = -1;
  }

  // A sender bound to a wildcard or loopback address announces 127.0.0.1; a receiver on another
  // host reaches the control port where it reached the store.
  std::string control_host = info.control_host;
  if (is_local_host(control_host) && !is_local_host(host)) control_host = host;
  if ((st = ControlConn::connect(control_host, info.control_port, std::max<int64_t>(deadline - now_ms(), 1),
                                 &rx->conn)) != WSYNC_OK)
    return fail_msg(st, "cannot reach the sender's control port: " + last_error());
  rx->conn.set_peer_name("the sender of group '" + rx->group_name + "'");
  ByteWriter hello;
  hello.u32(kControlProtocolVersion);
  hello.u32(cfg.rank);
  hello.u32(static_cast<uint32_t>(getpid()));
  hello.str(rx->group_name);
  if ((st = rx->conn.send(MsgType::kHello, hello.data(), init_timeout)) != WSYNC_OK) return st;
  Frame f;
  for (;;) {
    st = rx->conn.recv(&f, std::max<int64_t>(deadline - now_ms(), 0));
    if (st == WSYNC_ERR_TIMEOUT)
      return fail(WSYNC_ERR_TIMEOUT, "the sender did not answer rank %u's join within %lld ms", cfg.rank,
                  static_cast<long long>(init_timeout));
    if (st != WSYNC_OK) return st;
    break;
  }
  ByteReader r(f.body);
  if (f.type == static_cast<uint16_t>(MsgType::kReject)) {
    int32_t code = WSYNC_ERR_REJECTED;
    std::string why;
    r.i32(&code);
    r.str(&why, 1 << 16);
    return fail(wire_failure(code, WSYNC_ERR_REJECTED), "the sender refused rank %u: %s", cfg.rank, why.c_str());
  }
  uint32_t world = 0;
  if (f.type != static_cast<uint16_t>(MsgType::kWelcome) || !r.u32(&world) || world != rx->world_size)
    return fail(WSYNC_ERR_PROTOCOL, "the sender answered the join with %s", msg_type_name(f.type));

  // The sender's transport options first, then this receiver's own (a later key wins).
  OptionList t_opts;
  for (const auto& kv : info.transport_options) {
    bool overridden = false;
    for (const auto& mine : options_with_prefix(opts, "transport.")) overridden |= mine.first == kv.first;
    if (!overridden) t_opts.push_back(kv);
  }
  for (const auto& kv : options_with_prefix(opts, "transport.")) t_opts.push_back(kv);
  std::vector<wsync_option_t> t_c = to_c_options(t_opts);
  wsync_transport_params_t tp = {sizeof(wsync_transport_params_t), cfg.rank, rx->world_size, 0,
                                 rx->group_name.c_str(), &rx->store_handle, t_c.data(), t_c.size(),
                                 std::max<int64_t>(deadline - now_ms(), 1), rx->device, 0};
  clear_error();
  st = rx->transport.table->create(&tp, &rx->transport_self);
  if (st == WSYNC_OK) {
    clear_error();
    st = rx->transport.table->connect(rx->transport_self, std::max<int64_t>(deadline - now_ms(), 1));
  }
  if (st != WSYNC_OK) {
    std::string prefix = "transport '" + std::string(rx->transport.table->name) + "'";
    std::string why = last_error().compare(0, prefix.size(), prefix) == 0 ? last_error() : prefix + ": " + last_error();
    send_status(rx, MsgType::kNack, 0, st, why);
    return fail_msg(st, why);
  }
  if ((st = rx->conn.send(MsgType::kJoined, {}, init_timeout)) != WSYNC_OK) return st;
  WSYNC_LOGI("receiver rank %u joined group '%s' (world %u) via transport '%s'", rx->rank, rx->group_name.c_str(),
             rx->world_size, rx->transport.table->name);
  return WSYNC_OK;
}

void release_event(wsync_receiver_t* rx) {
  rx->ev_names.clear();
  rx->ev_tensors.clear();
  rx->ev_placed.clear();
  rx->ev_owned.clear();
}

void add_event_tensor(wsync_receiver_t* rx, const std::string& name, int32_t dtype, int32_t ndim, const int64_t* shape,
                      void* data, uint64_t nbytes, bool placed) {
  int32_t device_type = rx->device_memory ? WSYNC_DEVICE_CUDA : WSYNC_DEVICE_CPU;
  int32_t device_index = rx->device_memory ? rx->device : 0;
  if (placed) {
    const Registered& reg = rx->registry.at(name);
    device_type = reg.device_type;
    device_index = reg.device_index;
  }
  rx->ev_names.push_back(name);
  wsync_tensor_t t = WSYNC_TENSOR_INIT;
  t.dtype = dtype;
  t.ndim = ndim;
  std::memcpy(t.shape, shape, sizeof t.shape);
  t.data = nbytes ? data : nullptr;
  t.nbytes = nbytes;
  t.device_type = device_type;
  t.device_index = device_index;
  rx->ev_tensors.push_back(t);
  rx->ev_placed.push_back(placed ? 1 : 0);
}

bool same_shape(const Registered& r, const ManifestEntry& e) {
  if (r.dtype != e.dtype || r.ndim != e.ndim || r.nbytes != e.tensor_bytes) return false;
  for (int d = 0; d < e.ndim; ++d)
    if (r.shape[d] != e.shape[d]) return false;
  return true;
}

std::string shape_str(int32_t dtype, int32_t ndim, const int64_t* shape) {
  std::string s = std::string(wsync_dtype_name(dtype)) + "[";
  for (int d = 0; d < ndim; ++d) s += (d ? "," : "") + std::to_string(shape[d]);
  return s + "]";
}

// Wait for bucket `seq` to land, watching the sender's connection.
wsync_status_t wait_recv(wsync_receiver_t* rx, uint64_t seq, const std::string& what) {
  const int64_t deadline = deadline_after(rx->timeout_ms);
  for (;;) {
    clear_error();
    wsync_status_t st = rx->transport.table->recv_wait(rx->transport_self, seq, kSliceMs);
    if (st == WSYNC_OK) return WSYNC_OK;
    std::string why = last_error();
    rx->conn.pump();
    if (rx->conn.closed() || rx->conn.has_frame()) {
      rx->transport.table->forget_peer(rx->transport_self, 0);
      rx->broken = "the sender stopped during " + what;
      return fail(rx->conn.closed() ? WSYNC_ERR_PEER_FAILED : WSYNC_ERR_ABORTED, "the sender %s during %s",
                  rx->conn.closed() ? "vanished" : "abandoned the bucket", what.c_str());
    }
    if (st != WSYNC_ERR_TIMEOUT) {
      rx->transport.table->forget_peer(rx->transport_self, 0);
      rx->broken = "the transport failed during " + what;
      return fail(st, "transport '%s' failed during %s: %s", rx->transport.table->name, what.c_str(), why.c_str());
    }
    if (now_ms() >= deadline) {
      rx->transport.table->forget_peer(rx->transport_self, 0);
      rx->broken = "a bucket timed out";
      return fail(WSYNC_ERR_TIMEOUT, "%s did not arrive within %lld ms", what.c_str(),
                  static_cast<long long>(rx->timeout_ms));
    }
  }
}

wsync_status_t handle_manifest(wsync_receiver_t* rx, const Frame& f, wsync_receiver_event_t* ev) {
  ByteReader r(f.body);
  uint64_t seq = 0;
  std::vector<uint8_t> raw;
  if (!r.u64(&seq) || !r.bytes(&raw, kControlMaxBody) || !r.at_end())
    return refuse(rx, seq, fail(WSYNC_ERR_PROTOCOL, "MANIFEST message is malformed"));
  if (!rx->broken.empty())
    return refuse(rx, seq, fail(WSYNC_ERR_INVALID_STATE, "receiver rank %u cannot take more buckets: %s", rx->rank,
                                rx->broken.c_str()));
  Manifest m;
  wsync_status_t st = decode_manifest(raw.data(), raw.size(), &m);
  if (st != WSYNC_OK) return refuse(rx, seq, st);
  if (m.update_id != rx->current_update) {
    if (!rx->assembling.empty())
      return refuse(rx, seq, fail(WSYNC_ERR_PROTOCOL, "update %llu started while tensor '%s' of update %llu was incomplete",
                                  static_cast<unsigned long long>(m.update_id), rx->assembling.begin()->first.c_str(),
                                  static_cast<unsigned long long>(rx->current_update)));
    rx->current_update = m.update_id;
    rx->expected_bucket = 0;
  }
  if (m.bucket_index != rx->expected_bucket)
    return refuse(rx, seq, fail(WSYNC_ERR_PROTOCOL, "bucket %llu arrived where bucket %llu was expected",
                                static_cast<unsigned long long>(m.bucket_index),
                                static_cast<unsigned long long>(rx->expected_bucket)));
  const std::string what = "bucket " + std::to_string(m.bucket_index) + " of update " + std::to_string(m.update_id);
  if (m.bucket_bytes > kMaxBucketBytes)
    return refuse(rx, seq, fail(WSYNC_ERR_PROTOCOL, "%s claims %llu bytes, more than the %llu a bucket may hold",
                                what.c_str(), static_cast<unsigned long long>(m.bucket_bytes),
                                static_cast<unsigned long long>(kMaxBucketBytes)));

  if ((m.flags & kManifestFlagPayloadChecksum) && rx->device_memory)
    return refuse(rx, seq, fail(WSYNC_ERR_UNSUPPORTED, "%s asks for a payload checksum, which wsync computes on the host; "
                                "this receiver's bytes land in CUDA memory", what.c_str()));

  // Where each byte range of the bucket goes.
  std::vector<wsync_iov_t> iov;
  auto add_piece = [&](uint8_t* base, uint64_t len) {
    if (len == 0) return;
    // Adjacent host regions merge; device regions never do (two cudaMalloc blocks may be adjacent
    // in the address space, and one copy may not span both).
    if (!rx->device_memory && !iov.empty() && static_cast<uint8_t*>(iov.back().base) + iov.back().len == base)
      iov.back().len += len;
    else
      iov.push_back(wsync_iov_t{base, len});
  };
  uint64_t staging_need = 0, max_gap = 0, cursor = 0;
  for (const auto& e : m.entries) {
    if (e.tensor_bytes > kMaxBucketBytes)
      return refuse(rx, seq, fail(WSYNC_ERR_PROTOCOL, "tensor '%s' claims %llu bytes, more than wsync moves",
                                  e.name.c_str(), static_cast<unsigned long long>(e.tensor_bytes)));
    max_gap = std::max(max_gap, e.bucket_offset - cursor);
    cursor = e.bucket_offset + e.length;
    bool whole = e.tensor_offset == 0 && e.length == e.tensor_bytes;
    auto reg = rx->registry.find(e.name);
    if (reg != rx->registry.end() && !same_shape(reg->second, e))
      return refuse(rx, seq, fail(WSYNC_ERR_PROTOCOL, "tensor '%s' is registered as %s but the sender sends %s",
                                  e.name.c_str(), shape_str(reg->second.dtype, reg->second.ndim, reg->second.shape).c_str(),
                                  shape_str(e.dtype, e.ndim, e.shape).c_str()));
    if (reg == rx->registry.end() && whole) staging_need = std::max(staging_need, e.bucket_offset + e.length);
  }
  max_gap = std::max(max_gap, m.bucket_bytes - cursor);
  if (max_gap > kMaxPadding)
    return refuse(rx, seq, fail(WSYNC_ERR_PROTOCOL, "%s has %llu bytes of padding between entries (at most %llu)",
                                what.c_str(), static_cast<unsigned long long>(max_gap),
                                static_cast<unsigned long long>(kMaxPadding)));
  if (staging_need > rx->staging.size()) {
    rx->staging.reset();  // first: on a full engine GPU, old and new together may not fit
    MemBlock grown;
    if ((st = MemBlock::alloc((staging_need + 4095) / 4096 * 4096, rx->device, &grown)) != WSYNC_OK)
      return refuse(rx, seq, fail_msg(st, "cannot allocate staging for " + what + ": " + last_error()));
    rx->staging = std::move(grown);
  }
  if (max_gap > rx->scratch.size() && (st = MemBlock::alloc(max_gap, rx->device, &rx->scratch)) != WSYNC_OK)
    return refuse(rx, seq, fail_msg(st, "cannot allocate padding scratch for " + what + ": " + last_error()));
  cursor = 0;
  for (const auto& e : m.entries) {
    if (e.bucket_offset > cursor) add_piece(rx->scratch.data(), e.bucket_offset - cursor);
    cursor = e.bucket_offset + e.length;
    bool whole = e.tensor_offset == 0 && e.length == e.tensor_bytes;
    auto reg = rx->registry.find(e.name);
    if (whole) {
      add_piece(reg != rx->registry.end() ? static_cast<uint8_t*>(reg->second.data) : rx->staging.data() + e.bucket_offset,
                e.length);
      continue;
    }
    auto it = rx->assembling.find(e.name);
    if (it == rx->assembling.end()) {
      Assembly a;
      a.tensor_bytes = e.tensor_bytes;
      a.dtype = e.dtype;
      a.ndim = e.ndim;
      std::memcpy(a.shape, e.shape, sizeof a.shape);
      if (reg != rx->registry.end()) {
        a.dst = static_cast<uint8_t*>(reg->second.data);
        a.placed = true;
      } else {
        if ((st = MemBlock::alloc(e.tensor_bytes, rx->device, &a.owned)) != WSYNC_OK)
          return refuse(rx, seq, fail_msg(st, "cannot allocate " + std::to_string(e.tensor_bytes) +
                                                  " bytes to assemble tensor '" + e.name + "': " + last_error()));
        a.dst = a.owned.data();
      }
      it = rx->assembling.emplace(e.name, std::move(a)).first;
    } else if (it->second.tensor_bytes != e.tensor_bytes || it->second.dtype != e.dtype) {
      return refuse(rx, seq, fail(WSYNC_ERR_PROTOCOL, "chunks of tensor '%s' disagree on its size or dtype", e.name.c_str()));
    }
    if (it->second.received + e.length > it->second.tensor_bytes)
      return refuse(rx, seq, fail(WSYNC_ERR_PROTOCOL, "chunks of tensor '%s' add up to more than its %llu bytes",
                                  e.name.c_str(), static_cast<unsigned long long>(e.tensor_bytes)));
    add_piece(it->second.dst + e.tensor_offset, e.length);
  }
  if (m.bucket_bytes > cursor) add_piece(rx->scratch.data(), m.bucket_bytes - cursor);

  if (m.bucket_bytes > 0) {
    clear_error();
    if ((st = rx->transport.table->recv_post(rx->transport_self, seq, iov.data(), iov.size())) != WSYNC_OK)
      return refuse(rx, seq, fail(st, "transport '%s' could not post the receive of %s: %s", rx->transport.table->name,
                                  what.c_str(), last_error().c_str()));
  }
  ByteWriter ready;
  ready.u64(seq);
  if ((st = rx->conn.send(MsgType::kReady, ready.data(), rx->timeout_ms)) != WSYNC_OK) {
    if (m.bucket_bytes > 0) {
      rx->transport.table->forget_peer(rx->transport_self, 0);
      rx->broken = "the sender went away while " + what + " was posted";  // buffers go to the graveyard
    }
    return st;
  }
  if (m.bucket_bytes > 0 && (st = wait_recv(rx, seq, what)) != WSYNC_OK) {
    std::string why = last_error();
    // A local failure (transport error, timeout) is reported so the sender learns why at once.
    // Not when the sender itself abandoned the bucket or is gone: it knows, and a message landing
    // on a socket it is closing would reset the connection and destroy its last frames.
    if (st != WSYNC_ERR_ABORTED && st != WSYNC_ERR_PEER_FAILED && rx->conn.open())
      send_status(rx, MsgType::kAck, seq, st, why);
    drop_assemblies(rx);
    return fail_msg(st, why);
  }

  // Record the bytes of split tensors only once they are really in place.
  for (const auto& e : m.entries) {
    auto it = rx->assembling.find(e.name);
    if (it != rx->assembling.end() && !(e.tensor_offset == 0 && e.length == e.tensor_bytes)) it->second.received += e.length;
  }
  if (m.flags & kManifestFlagPayloadChecksum) {
    XXH3_state_t* s = XXH3_createState();
    XXH3_64bits_reset(s);
    for (const auto& e : m.entries) {
      if (e.length == 0) continue;
      auto reg = rx->registry.find(e.name);
      const uint8_t* p;
      bool whole = e.tensor_offset == 0 && e.length == e.tensor_bytes;
      if (whole)
        p = reg != rx->registry.end() ? static_cast<uint8_t*>(reg->second.data) : rx->staging.data() + e.bucket_offset;
      else
        p = rx->assembling[e.name].dst + e.tensor_offset;
      XXH3_64bits_update(s, p, e.length);
    }
    uint64_t h = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    if (h != m.payload_checksum) {
      fail(WSYNC_ERR_PROTOCOL, "payload checksum mismatch in %s (got %016llx, sender computed %016llx)", what.c_str(),
           static_cast<unsigned long long>(h), static_cast<unsigned long long>(m.payload_checksum));
      std::string why = last_error();
      send_status(rx, MsgType::kAck, seq, WSYNC_ERR_PROTOCOL, why);
      drop_assemblies(rx);
      return fail_msg(WSYNC_ERR_PROTOCOL, why);
    }
  }
  send_status(rx, MsgType::kAck, seq, WSYNC_OK, "");
  rx->expected_bucket++;

  for (const auto& e : m.entries) {
    bool whole = e.tensor_offset == 0 && e.length == e.tensor_bytes;
    auto reg = rx->registry.find(e.name);
    if (whole) {
      bool placed = reg != rx->registry.end();
      add_event_tensor(rx, e.name, e.dtype, e.ndim, e.shape, placed ? reg->second.data : rx->staging.data() + e.bucket_offset,
                       e.length, placed);
      continue;
    }
    auto it = rx->assembling.find(e.name);
    if (it == rx->assembling.end() || it->second.received != it->second.tensor_bytes) continue;
    Assembly& a = it->second;
    add_event_tensor(rx, e.name, a.dtype, a.ndim, a.shape, a.dst, a.tensor_bytes, a.placed);
    if (a.owned.data()) rx->ev_owned.push_back(std::move(a.owned));
    rx->assembling.erase(it);
  }
  for (size_t i = 0; i < rx->ev_tensors.size(); ++i) rx->ev_tensors[i].name = rx->ev_names[i].c_str();
  ev->kind = WSYNC_EVENT_BUCKET;
  ev->bucket_index = m.bucket_index;
  ev->num_tensors = rx->ev_tensors.size();
  ev->tensors = rx->ev_tensors.data();
  ev->placed = rx->ev_placed.data();
  ev->bytes = m.bucket_bytes;
  return WSYNC_OK;
}

wsync_status_t next_event(wsync_receiver_t* rx, wsync_receiver_event_t* ev, int64_t timeout_ms) {
  release_event(rx);
  if (rx->closed) {
    ev->kind = WSYNC_EVENT_CLOSED;
    return WSYNC_OK;
  }
  if (rx->pending_commit)
    return fail(WSYNC_ERR_INVALID_STATE, "version %llu is waiting for wsync_receiver_commit",
                static_cast<unsigned long long>(rx->pending_commit));
  Frame f;
  const int64_t tmo = timeout_ms < 0 ? rx->timeout_ms : timeout_ms;
  wsync_status_t st = rx->conn.recv(&f, tmo);
  if (st == WSYNC_ERR_TIMEOUT)
    return fail(WSYNC_ERR_TIMEOUT, "no message from the sender within %lld ms", static_cast<long long>(tmo));
  if (st != WSYNC_OK) return st;
  ByteReader r(f.body);
  switch (static_cast<MsgType>(f.type)) {
    case MsgType::kManifest:
      return handle_manifest(rx, f, ev);
    case MsgType::kEndUpdate: {
      uint64_t version = 0, update = 0, buckets = 0;
      if (!r.u64(&version) || !r.u64(&update) || !r.u64(&buckets))
        return refuse(rx, 0, fail(WSYNC_ERR_PROTOCOL, "END_UPDATE message is malformed"));
      if (!rx->assembling.empty())
        return refuse(rx, 0, fail(WSYNC_ERR_PROTOCOL, "the sender finalized version %llu while tensor '%s' was incomplete",
                                  static_cast<unsigned long long>(version), rx->assembling.begin()->first.c_str()));
      uint64_t got = update == rx->current_update ? rx->expected_bucket : 0;
      if (got != buckets)
        return refuse(rx, 0, fail(WSYNC_ERR_PROTOCOL,
                                  "the sender finalized version %llu after %llu buckets but this receiver got %llu",
                                  static_cast<unsigned long long>(version), static_cast<unsigned long long>(buckets),
                                  static_cast<unsigned long long>(got)));
      if (version == 0)
        return refuse(rx, 0, fail(WSYNC_ERR_PROTOCOL, "the sender finalized version 0, which is never valid"));
      rx->current_update = update + 1;
      rx->expected_bucket = 0;
      rx->pending_commit = version;
      ev->kind = WSYNC_EVENT_COMMIT;
      ev->version = version;
      return WSYNC_OK;
    }
    case MsgType::kAbortUpdate: {
      std::string why;
      r.str(&why, 1 << 16);
      WSYNC_LOGW("receiver rank %u: the sender aborted the update: %s", rx->rank, why.c_str());
      drop_assemblies(rx);
      ev->kind = WSYNC_EVENT_ABORTED;
      return WSYNC_OK;
    }
    case MsgType::kClose:
      rx->closed = true;
      ev->kind = WSYNC_EVENT_CLOSED;
      return WSYNC_OK;
    default:
      return refuse(rx, 0, fail(WSYNC_ERR_PROTOCOL, "unexpected %s message from the sender", msg_type_name(f.type)));
  }
}

}  // namespace

extern "C" {

WSYNC_API wsync_status_t wsync_receiver_init(const wsync_receiver_config_t* config, wsync_receiver_t** out) {
  clear_error();
  if (out == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = nullptr;
  auto* rx = new (std::nothrow) wsync_receiver();
  if (rx == nullptr) return fail(WSYNC_ERR_OUT_OF_MEMORY, "cannot allocate a receiver");
  wsync_status_t st = WSYNC_ERR_INTERNAL;
  try {
    st = receiver_init(config, rx);
  } catch (const std::bad_alloc&) {
    st = fail(WSYNC_ERR_OUT_OF_MEMORY, "out of memory during receiver init");
  } catch (...) {
    st = fail(WSYNC_ERR_INTERNAL, "internal error during receiver init (please report)");
  }
  if (st != WSYNC_OK) {
    std::string why = last_error();
    wsync_receiver_destroy(rx);
    return fail_msg(st, why);
  }
  *out = rx;
  return WSYNC_OK;
}

WSYNC_API wsync_status_t wsync_receiver_register(wsync_receiver_t* rx, const wsync_tensor_t* buffers, uint64_t n) {
  clear_error();
  if (rx == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "receiver is NULL");
  std::vector<wsync_tensor_t> t;
  wsync_status_t st = copy_tensor_descs(buffers, n, "buffers", &t);
  if (st != WSYNC_OK) return st;
  for (const auto& b : t) {
    if ((st = validate_tensor_shape(b.name, b.dtype, b.ndim, b.shape, b.nbytes)) != WSYNC_OK) return st;
    const bool cuda = b.device_type == WSYNC_DEVICE_CUDA;
    if (cuda && !rx->device_memory)
      return fail(WSYNC_ERR_UNSUPPORTED, "buffer '%s' is in CUDA memory, but transport '%s' moves host memory only; "
                  "register host buffers or use a CUDA transport (cuda_ipc, nccl)", b.name, rx->transport.table->name);
    if (!cuda && rx->device_memory)
      return fail(WSYNC_ERR_UNSUPPORTED, "buffer '%s' is in host memory, but transport '%s' moves CUDA memory only; "
                  "register CUDA buffers", b.name, rx->transport.table->name);
    if (cuda && b.device_index != rx->device)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "buffer '%s' is on CUDA device %d but this receiver works on device %d "
                  "(receiver option 'device')", b.name, b.device_index, rx->device);
  }
  for (const auto& b : t) {
    if (rx->assembling.count(b.name))
      return fail(WSYNC_ERR_INVALID_STATE, "tensor '%s' is arriving in chunks right now; register it between updates", b.name);
    Registered reg;
    reg.data = b.data;
    reg.nbytes = b.nbytes;
    reg.dtype = b.dtype;
    reg.ndim = b.ndim;
    std::memcpy(reg.shape, b.shape, sizeof reg.shape);
    reg.device_type = b.device_type;
    reg.device_index = b.device_type == WSYNC_DEVICE_CUDA ? b.device_index : 0;
    rx->registry[b.name] = reg;
  }
  return WSYNC_OK;
}

WSYNC_API wsync_status_t wsync_receiver_next(wsync_receiver_t* rx, wsync_receiver_event_t* event, int64_t timeout_ms) {
  clear_error();
  if (rx == nullptr || event == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "receiver or event is NULL");
  const uint32_t size = event->struct_size;
  if (size < 2 * sizeof(uint32_t) || size % 8 != 0)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "event->struct_size is %u; initialise with WSYNC_RECEIVER_EVENT_INIT", size);
  wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
  wsync_status_t st;
  WSYNC_GUARD(st = next_event(rx, &ev, timeout_ms));
  // A caller built against an older, shorter event gets the fields it knows of.
  ev.struct_size = size < sizeof ev ? size : static_cast<uint32_t>(sizeof ev);
  std::memcpy(event, &ev, ev.struct_size);
  return st;
}

WSYNC_API wsync_status_t wsync_receiver_commit(wsync_receiver_t* rx, uint64_t version) {
  clear_error();
  if (rx == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "receiver is NULL");
  if (rx->pending_commit == 0)
    return fail(WSYNC_ERR_INVALID_STATE, "no version to commit: wait for a WSYNC_EVENT_COMMIT first");
  if (version != rx->pending_commit)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "version %llu does not match the version %llu the sender finalized",
                static_cast<unsigned long long>(version), static_cast<unsigned long long>(rx->pending_commit));
  ByteWriter w;
  w.u64(version);
  wsync_status_t st = rx->conn.send(MsgType::kCommitted, w.data(), rx->timeout_ms);
  if (st != WSYNC_OK) return st;
  rx->committed = version;
  rx->pending_commit = 0;
  return WSYNC_OK;
}

WSYNC_API uint64_t wsync_receiver_committed_version(const wsync_receiver_t* rx) { return rx ? rx->committed : 0; }

WSYNC_API void wsync_receiver_destroy(wsync_receiver_t* rx) {
  if (rx == nullptr) return;
  // The transport first: it may still be writing into staging and the graveyard.
  if (rx->transport_self) rx->transport.table->destroy(rx->transport_self);
  rx->conn.close();
  rx->store_client.reset();
  delete rx;
}

}  // extern "C"
