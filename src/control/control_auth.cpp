// The control channel's proofs of the group secret (see control/control_auth.h).
#include "control/control_auth.h"

namespace wsync {

Mac control_hello_proof(const std::string& secret, const std::string& group, uint32_t rank, uint32_t pid,
                        const std::vector<uint8_t>& tx_nonce, const std::vector<uint8_t>& rx_nonce) {
  Hmac h(secret);
  h.field(std::string("wsync-control-hello")).field(group).field_u64(rank).field_u64(pid).field(tx_nonce).field(rx_nonce);
  return h.finish();
}

Mac control_welcome_proof(const std::string& secret, const std::string& group, uint32_t rank, uint32_t world_size,
                          const std::vector<uint8_t>& tx_nonce, const std::vector<uint8_t>& rx_nonce) {
  Hmac h(secret);
  h.field(std::string("wsync-control-welcome")).field(group).field_u64(rank).field_u64(world_size).field(tx_nonce);
  h.field(rx_nonce);
  return h.finish();
}

std::string transport_auth_key(const std::string& secret) {
  Hmac h(secret);
  h.field(std::string("wsync transport key"));
  const Mac key = h.finish();
  return to_hex(key.data(), key.size());
}

bool proof_matches(const std::vector<uint8_t>& proof, const Mac& want) {
  return proof.size() == want.size() && equal_ct(proof.data(), want.data(), want.size());
}

}  // namespace wsync
