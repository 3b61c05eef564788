// store_probe.h — a TCP connection attempt to the trainer's store, standing for the torch
// rendezvous a real engine runs before torch refuses a group name that exists already (SGLang):
// the refusal comes back only once the store answered.
#pragma once

#include <cstdint>
#include <string>

namespace refeng {

// Connects to host:port (retrying until timeout_ms), then closes. "" on success, else torch's
// wording of a client socket that timed out.
std::string probe_store(const std::string& host, int64_t port, int64_t timeout_ms);

}  // namespace refeng
