// Receiver option rejoin: a trainer that dies, or ends its group, and starts again from its
// checkpoint (a new process at the same store address) finds its engines' receivers waiting. The
// receiver keeps what the engine gave it (registered buffers, receive mode, committed version,
// staged blocks) and replaces only its link: the next wsync_receiver_next after the sender is gone
// drops the update that was in flight (staged: the registered buffers still hold the last
// committed version), closes the old link and joins the group at the same store with the same
// rank, as init did. Until the successor is up each call returns WSYNC_ERR_TIMEOUT within its own
// timeout and the engine goes on serving.
#include <cstring>

#include "common/error.h"
#include "receiver/receiver.h"

namespace wsync {

wsync_status_t rejoin_keep(const wsync_receiver_config_t* config, wsync_receiver_t* receiver) {
  if (!receiver->shared.rejoin) return WSYNC_OK;
  Link* l = receiver->link0();
  if (receiver->links.size() > 1)
    return fail(WSYNC_ERR_UNSUPPORTED, "receiver option rejoin is for a group of one sender; group '%s' has %u "
                "senders (joining a restarted sender of many is not supported yet)", l->group_name.c_str(),
                l->num_senders);
  wsync_receiver_config_t c = WSYNC_RECEIVER_CONFIG_INIT;
  std::memcpy(&c, config, std::min<size_t>(config->struct_size, sizeof c));
  RejoinConfig& k = receiver->rejoin;
  k.store_addr = c.store_addr;
  k.has_group_name = c.group_name != nullptr;
  k.group_name = c.group_name ? c.group_name : "";
  k.has_transport = c.transport != nullptr;
  k.transport = c.transport ? c.transport : "";
  wsync_status_t st = copy_options(c.options, c.num_options, &k.options);
  if (st != WSYNC_OK) return st;
  k.rank = l->rank;
  k.timeout_ms = l->timeout_ms;
  return WSYNC_OK;
}

bool rejoin_due(wsync_receiver_t* receiver) {
  if (!receiver->shared.rejoin || receiver->links.size() != 1) return false;
  Link* l = receiver->link0();
  if (l->closed) return true;  // the sender closed its group (CLOSE): a successor may come
  // An update this receiver took part of, whose loss the engine has not heard yet: next() reports
  // it first (the sender is gone: PEER_FAILED), then the call after it rejoins.
  if ((l->accepted_bucket > 0 || !l->flight.empty()) && receiver->shared.update_void.empty()) return false;
  l->conn.pump();
  return l->conn.closed() && !l->conn.has_frame();  // gone, and what it said was read
}

bool rejoin_nothing_to_report(wsync_receiver_t* receiver) {
  if (!receiver->shared.rejoin || receiver->links.size() != 1) return false;
  const Link* l = receiver->link0();
  return !receiver->shared.update_void.empty() || (l->accepted_bucket == 0 && l->flight.empty());
}

wsync_status_t rejoin(wsync_receiver_t* receiver, int64_t timeout_ms) {
  RejoinConfig& k = receiver->rejoin;
  Link* old = receiver->link0();
  const std::string store = k.store_addr;
  if (old->transport_self != nullptr || old->conn.open()) {  // (once: a later try finds it closed)
    WSYNC_LOGW("receiver rank %u: the sender of group '%s' is gone; joining its successor at %s (receiver option "
               "rejoin)", old->rank, old->group_name.c_str(), store.c_str());
    drop_update(old, "the sender is gone");
    old->pending_commit = 0;  // (it cannot be told: that version never committed)
    link_teardown(old);
  }
  RxShared& sh = receiver->shared;
  sh.update = 0;  // the successor numbers its updates afresh
  sh.update_void.clear();
  sh.needs_published = 0;  // said again, in the successor's store
  sh.needs_said.clear();
  const std::vector<wsync_option_t> opts = to_c_options(k.options);
  wsync_receiver_config_t c = WSYNC_RECEIVER_CONFIG_INIT;
  c.rank = k.rank;
  c.store_addr = k.store_addr.c_str();
  c.group_name = k.has_group_name ? k.group_name.c_str() : nullptr;
  c.transport = k.has_transport ? k.transport.c_str() : nullptr;
  c.options = opts.empty() ? nullptr : opts.data();
  c.num_options = opts.size();
  c.timeout_ms = timeout_ms < 0 ? k.timeout_ms : std::max<int64_t>(timeout_ms, 1);
  auto fresh = std::make_unique<Link>(&sh);
  wsync_status_t st = receiver_init(&c, fresh.get());
  if (st != WSYNC_OK) {
    const std::string why = last_error();
    link_teardown(fresh.get());
    return fail(st, "receiver rank %u: the sender is gone and no successor took the group at %s within %lld ms "
                "(receiver option rejoin; the next wsync_receiver_next tries again): %s",
                k.rank, store.c_str(), static_cast<long long>(c.timeout_ms), why.c_str());
  }
  if (fresh->num_senders > 1) {
    link_teardown(fresh.get());
    return fail(WSYNC_ERR_UNSUPPORTED, "receiver rank %u: the group at %s now has %u senders; receiver option rejoin "
                "follows a group of one sender", k.rank, store.c_str(), fresh->num_senders);
  }
  receiver->links[0] = std::move(fresh);  // (the old link's transports are destroyed: nothing writes for it)
  ++k.rejoins;
  WSYNC_LOGI("receiver rank %u rejoined group '%s' at %s (committed version %llu kept; rejoin %llu)", k.rank,
             receiver->link0()->group_name.c_str(), store.c_str(), static_cast<unsigned long long>(sh.committed),
             static_cast<unsigned long long>(k.rejoins));
  return WSYNC_OK;
}

}  // namespace wsync
