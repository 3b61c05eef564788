// The exported wsync_receiver_* functions, every one behind api_call (no C++ exception crosses
// into C).
#include <cstring>
#include <new>

#include "common/api_guard.h"
#include "common/clock.h"
#include "common/names.h"
#include "common/tensors.h"
#include "control/frames.h"
#include "planner/bucket_planner.h"
#include "receiver/receiver.h"

using namespace wsync;

namespace {

wsync_status_t check_buffer(const Link* rx, const wsync_tensor_t& b) {
  // A name no sender may send (invalid UTF-8, a control character) could never match, and could
  // print or hash as another name in the engine.
  const size_t len = strnlen(b.name, kMaxTensorNameBytes + 1);
  const std::string problem = tensor_name_problem(b.name, len);
  if (!problem.empty())
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "buffer name '%s' is not a valid tensor name: %s",
                printable_name(b.name, len).c_str(), problem.c_str());
  wsync_status_t st = validate_tensor_shape(b.name, b.dtype, b.ndim, b.shape, b.nbytes);
  if (st != WSYNC_OK) return st;
  if (b.flags & ~WSYNC_TENSOR_SLICE)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "buffer '%s' has flags 0x%x; a receiver takes WSYNC_TENSOR_SLICE only", b.name,
                b.flags);
  if (b.flags & WSYNC_TENSOR_SLICE) {
    if (!rx->planned)
      return fail(WSYNC_ERR_UNSUPPORTED, "buffer '%s' is a slice, but the senders of group '%s' do not plan: slices are "
                  "taken when the senders set the group option num_senders (1 too), and then send each receiver what "
                  "it asked for", b.name, rx->group_name.c_str());
    Box box;
    box.ndim = b.ndim;
    for (int d = 0; d < b.ndim; ++d) {
      box.offset[d] = b.box_offset[d];
      box.extent[d] = b.shape[d];
    }
    std::string why;
    if (!box_within(box, b.ndim, b.full_shape, &why))
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "buffer '%s': slice %s does not fit its full shape: %s", b.name,
                  box_str(box).c_str(), why.c_str());
  }
  const bool cuda = b.device_type == WSYNC_DEVICE_CUDA;
  if (cuda && !rx->device_memory)
    return fail(WSYNC_ERR_UNSUPPORTED, "buffer '%s' is in CUDA memory, but transport '%s' moves host memory only; "
                "register host buffers or use a transport that moves CUDA memory", b.name, rx->transport.table->name);
  if (!cuda && rx->device_memory)
    return fail(WSYNC_ERR_UNSUPPORTED, "buffer '%s' is in host memory, but transport '%s' moves CUDA memory only; "
                "register CUDA buffers", b.name, rx->transport.table->name);
  if (cuda && b.device_index != rx->device)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "buffer '%s' is on CUDA device %d but this receiver works on device %d "
                "(receiver option 'device')", b.name, b.device_index, rx->device);
  if (rx->sh->assembling.count(b.name))
    return fail(WSYNC_ERR_INVALID_STATE, "tensor '%s' is arriving in chunks right now; register it between updates", b.name);
  if (rx->planned && (b.flags & WSYNC_TENSOR_SLICE) && (!rx->sh->arrived.empty() || !rx->sh->claimed.empty()))
    return fail(WSYNC_ERR_INVALID_STATE, "buffer '%s': a slice is registered between updates (the senders cut every "
                "batch of an update by what this receiver needs)", b.name);
  if (rx->sh->staged && rx->sh->touched_set.count(b.name))
    return fail(WSYNC_ERR_INVALID_STATE, "tensor '%s' has staged bytes waiting for wsync_receiver_commit; register it "
                "again after the commit", b.name);
  return WSYNC_OK;
}

wsync_status_t register_buffers(Link* rx, const wsync_tensor_t* buffers, uint64_t n) {
  std::vector<wsync_tensor_t> t;
  wsync_status_t st = copy_tensor_descs(buffers, n, "buffers", &t);
  if (st != WSYNC_OK) return st;
  for (const auto& b : t)  // all or nothing: every buffer is checked before any is registered
    if ((st = check_buffer(rx, b)) != WSYNC_OK) return st;
  rx->sh->registry.reserve(rx->sh->registry.size() + t.size());
  for (const auto& b : t) {
    Registered& reg = rx->sh->registry[b.name];
    reg.data = b.data;
    reg.nbytes = b.nbytes;
    reg.dtype = b.dtype;
    reg.ndim = b.ndim;
    std::memcpy(reg.shape, b.shape, sizeof reg.shape);
    reg.device_type = b.device_type;
    reg.device_index = b.device_type == WSYNC_DEVICE_CUDA ? b.device_index : 0;
    reg.slice = (b.flags & WSYNC_TENSOR_SLICE) != 0;
    reg.held = false;  // (what the engine put there, until an update or a catch-up commits into it)
    reg.box = Box();
    std::memset(reg.full_shape, 0, sizeof reg.full_shape);
    if (reg.slice) {
      reg.box.ndim = b.ndim;
      for (int d = 0; d < b.ndim; ++d) {
        reg.box.offset[d] = b.box_offset[d];
        reg.box.extent[d] = b.shape[d];
      }
      std::memcpy(reg.full_shape, b.full_shape, sizeof reg.full_shape);
    }
  }
  // Many senders: every sender learns what this receiver now needs (a slice, or the whole tensor).
  if (rx->planned) return links_publish_needs(rx);
  return WSYNC_OK;
}

}  // namespace

namespace wsync {

void link_teardown(Link* l) {
  if (l->transport.table != nullptr) {
    if (l->relay_self) l->transport.table->destroy(l->relay_self);
    if (l->catchup_self) l->transport.table->destroy(l->catchup_self);
    if (l->recv_self && l->recv_self != l->transport_self) l->transport.table->destroy(l->recv_self);
    if (l->transport_self) l->transport.table->destroy(l->transport_self);
  }
  l->relay_self = l->catchup_self = l->recv_self = l->transport_self = nullptr;
  l->relay_fd = l->recv_fd = l->transport_fd = -1;
  l->conn.close();
  l->store_client.reset();
}

}  // namespace wsync

extern "C" {

WSYNC_API wsync_status_t wsync_receiver_init(const wsync_receiver_config_t* config, wsync_receiver_t** out) {
  return api_call("wsync_receiver_init", [&] {
    return create_object(
        "wsync_receiver_init", "a receiver", out,
        [&](wsync_receiver_t* receiver) {
          receiver->links.push_back(std::make_unique<Link>(&receiver->shared));
          wsync_status_t st = receiver_init(config, receiver->link0());
          if (st == WSYNC_OK) st = links_join(config, receiver);  // many senders: join the others too
          return st == WSYNC_OK ? rejoin_keep(config, receiver) : st;
        },
        [](wsync_receiver_t* rx) { wsync_receiver_destroy(rx); });
  });
}

WSYNC_API wsync_status_t wsync_receiver_register(wsync_receiver_t* receiver, const wsync_tensor_t* buffers, uint64_t n) {
  return api_call("wsync_receiver_register", [&] {
    if (receiver == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "receiver is NULL");
    return register_buffers(receiver->link0(), buffers, n);
  });
}

WSYNC_API wsync_status_t wsync_receiver_next(wsync_receiver_t* receiver, wsync_receiver_event_t* event, int64_t timeout_ms) {
  return api_call("wsync_receiver_next", [&] {
    if (receiver == nullptr || event == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "receiver or event is NULL");
    const uint32_t size = event->struct_size;
    wsync_status_t st = check_out_struct(size, "event", "WSYNC_RECEIVER_EVENT_INIT");
    if (st != WSYNC_OK) return st;
    wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
    if (rejoin_due(receiver) && (st = rejoin(receiver, timeout_ms)) != WSYNC_OK) return st;
    const RejoinWatch watch = rejoin_watch(receiver);
    const int64_t deadline = timeout_ms < 0 ? -1 : deadline_after(timeout_ms);
    st = receiver_next(receiver->link0(), &ev, timeout_ms);
    // Receiver option rejoin: a sender lost (or closed) while this receiver owes the engine no news
    // (it removed us after a loss already reported, or between updates, and this call began no
    // bucket) is joined again in this call.
    if (st != WSYNC_OK && ev.kind == WSYNC_EVENT_NONE && rejoin_in_call(receiver, watch)) {
      const int64_t left = deadline < 0 ? -1 : std::max<int64_t>(remaining_ms(deadline), 1);
      clear_error();
      if ((st = rejoin(receiver, left)) != WSYNC_OK) return st;
      st = receiver_next(receiver->link0(), &ev, deadline < 0 ? -1 : std::max<int64_t>(remaining_ms(deadline), 1));
    }
    write_struct(ev, size, event);
    return st;
  });
}

WSYNC_API wsync_status_t wsync_receiver_commit(wsync_receiver_t* receiver, uint64_t version) {
  return api_call("wsync_receiver_commit", [&] {
    if (receiver == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "receiver is NULL");
    Link* rx = receiver->link0();
    if (rx->sh->links.size() > 1) return links_commit(rx, version);
    if (rx->pending_commit == 0)
      return fail(WSYNC_ERR_INVALID_STATE, "no version to commit: wait for a WSYNC_EVENT_COMMIT first");
    if (version != rx->pending_commit)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "version %llu does not match the version %llu the sender finalized",
                  static_cast<unsigned long long>(version), static_cast<unsigned long long>(rx->pending_commit));
    // END_UPDATE checked it; asked again where the copy happens. Refused, nothing is applied and
    // the sender hears why instead of COMMITTED.
    wsync_status_t st = check_staged_arrived(rx);
    if (st != WSYNC_OK) {
      rx->pending_commit = 0;
      if (rx->catchup_commit) {  // (the sender hears it as a failed catch-up, no update's loss)
        rx->catchup_commit = false;
        const std::string why = last_error();
        send_status(rx, MsgType::kCatchupFailed, 0, st, "the caught-up version cannot commit: " + why);
        drop_update(rx, why);
        rx->broken = why;
        return fail(st, "%s", why.c_str());
      }
      return refuse(rx, 0, st);
    }
    // The sender first: if it cannot be told, staged bytes are not applied and the registered
    // buffers keep the previous version, which is what this receiver then still reports. A sender
    // whose end closed without a word (it died after it finalized) is not told: the kernel would
    // take the COMMITTED for a peer that is gone. (One that closed its group after its finalize
    // returned, CLOSE then a half-close, still reads it.) (A catch-up's version: the sender waits
    // for no COMMITTED of it.)
    if (!rx->catchup_commit)
      st = rx->conn.hung_up() && inbox_next_type(rx) == 0 && rx->conn.closed()
               ? fail(WSYNC_ERR_PEER_FAILED, "%s closed its connection before it heard COMMITTED of version %llu",
                      rx->conn.peer_name().c_str(), static_cast<unsigned long long>(version))
               : rx->conn.send(MsgType::kCommitted, encode_committed({version}), rx->timeout_ms);
    if (st != WSYNC_OK) {  // the version is lost here (with option rejoin the next call joins again)
      const std::string why = last_error();
      rx->pending_commit = 0;
      drop_update(rx, why);
      // (a sender that took no COMMITTED within timeout_ms may hold part of it: the connection
      // cannot go on, and the next call finds the sender gone)
      if (st != WSYNC_ERR_PEER_FAILED) rx->conn.close();
      return fail_msg(st, why);
    }
    rx->catchup_commit = false;
    rx->sh->committed = version;
    rx->pending_commit = 0;
    return apply_commit(rx);
  });
}

WSYNC_API uint64_t wsync_receiver_committed_version(const wsync_receiver_t* receiver) {
  return receiver ? receiver->shared.committed : 0;
}

WSYNC_API wsync_status_t wsync_receiver_get_state(const wsync_receiver_t* receiver, wsync_receiver_state_t* state) {
  return api_call("wsync_receiver_get_state", [&] {
    if (receiver == nullptr || state == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "receiver or state is NULL");
    const uint32_t size = state->struct_size;
    wsync_status_t st = check_out_struct(size, "state", "WSYNC_RECEIVER_STATE_INIT");
    if (st != WSYNC_OK) return st;
    wsync_receiver_state_t s = WSYNC_RECEIVER_STATE_INIT;
    fill_state(receiver->link0(), &s);
    write_struct(s, size, state);
    return WSYNC_OK;
  });
}

// Cannot throw: an index into a vector the receiver owns.
WSYNC_API const char* wsync_receiver_touched_name(const wsync_receiver_t* receiver, uint64_t index) {
  if (receiver == nullptr || index >= receiver->shared.touched.size()) return nullptr;
  return receiver->shared.touched[static_cast<size_t>(index)].c_str();
}

WSYNC_API void wsync_receiver_destroy(wsync_receiver_t* receiver) {
  if (receiver == nullptr) return;
  guard_void("wsync_receiver_destroy", [&] {
    receiver->shared.links.clear();
    // The other senders' links first, then link 0; of each, the transport first: it may still be
    // writing into staging and the graveyard.
    for (size_t i = receiver->links.size(); i-- > 0;) link_teardown(receiver->links[i].get());
    receiver->links.clear();
    delete receiver;
  });
}

}  // extern "C"
