// Proofs of the group secret on the control channel. The sender opens every connection with a
// CHALLENGE (a fresh nonce); the receiver's HELLO carries its own nonce and
//   HMAC(secret, "wsync-control-hello", group, rank, pid, sender nonce, receiver nonce);
// the sender's WELCOME carries
//   HMAC(secret, "wsync-control-welcome", group, rank, world_size, sender nonce, receiver nonce).
// Each side checks the other's proof before it trusts anything else the peer says, the secret
// never crosses the wire, and a recorded exchange cannot be replayed (both nonces are fresh).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/auth.h"

namespace wsync {

Mac control_hello_proof(const std::string& secret, const std::string& group, uint32_t rank, uint32_t pid,
                        const std::vector<uint8_t>& tx_nonce, const std::vector<uint8_t>& rx_nonce);
Mac control_welcome_proof(const std::string& secret, const std::string& group, uint32_t rank, uint32_t world_size,
                          const std::vector<uint8_t>& tx_nonce, const std::vector<uint8_t>& rx_nonce);
// The key transports that open connections of their own admit peers with (the hint auth_key,
// plugin ABI 1.6): HMAC(secret, "wsync transport key"), as 64 hex digits. The same in every member;
// the secret itself never leaves the core. The transport mixes each world's name into its proofs.
std::string transport_auth_key(const std::string& secret);
// True when `proof` (any length) equals `want`, compared in constant time.
bool proof_matches(const std::vector<uint8_t>& proof, const Mac& want);

}  // namespace wsync
