// The declared update (wsync_group_declare_update; group_declare.cpp).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "planner/bucket_planner.h"
#include "wsync.h"

namespace wsync {

// The whole next update as the trainer declared it: whole tensors (full shapes, no data), in
// declaration order; `all` lists every one (the CHECK step's "bucket"). Immutable once made.
struct Declared {
  std::vector<wsync_tensor_t> tensors;  // names point into `names`
  std::vector<std::string> names;
  std::unordered_map<std::string, size_t> index;
  PlanBucket all;
};

// Caller thread: declare (refused once a batch of the update started), check a batch's
// descriptors against the declaration (a tensor not declared, or another dtype or full shape),
// check at finalize that every declared tensor was sent (one sender only), and forget it when the
// update ended.
wsync_status_t group_declare_update(wsync_group_t* g, const wsync_tensor_t* tensors, uint64_t n);
wsync_status_t declared_check_batch(const wsync_group_t* g, const std::vector<wsync_tensor_t>& tensors);
wsync_status_t declared_check_finalize(const wsync_group_t* g);
void declared_update_ended(wsync_group_t* g);
// Pipeline thread, when an update opens: the declaration for the engines' CHECK (once; NULL when
// none was declared).
std::shared_ptr<const Declared> declared_take_for_engines(wsync_group_t* g);

}  // namespace wsync
