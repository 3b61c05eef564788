// lmdeploy_common.h — helpers shared by the LMDeploy route files: validation in the family's
// shape (with the validate_json_request dependency), the Ray executor gate, and the per-rank
// failure texts of RayExecutor._reduce_worker_status.
#pragma once

#include <httplib.h>

#include <string>
#include <vector>

#include "json_util.h"
#include "receiver_side.h"
#include "schemas.h"
#include "state.h"

namespace refeng {

// FastAPI's order for a route with a body model and Depends(validate_json_request): a JSON
// decode error first (JSON Content-Types only), then the media type (exactly application/json),
// then the fields. Answers the family's validation reply and returns null on errors.
JsonPtr lmdeploy_parse(Shared& s, const httplib::Request& req, httplib::Response& res, const ModelSpec& spec);

// validate_json_request alone (/sleep, /wakeup: no body model). Answers and returns false.
bool lmdeploy_json_media(Shared& s, const httplib::Request& req, httplib::Response& res);

// --lmdeploy-backend turbomind: _check_pytorch_backend_for_disagg_weight_update, which runs in the
// handler, after the body's validation: 501 ErrorResponse naming the backend. True when answered.
bool lmdeploy_backend_refused(Shared& s, httplib::Response& res);

// --lmdeploy-executor uni: ExecutorBase raises NotImplementedError -> 500 text. True when answered.
bool lmdeploy_executor_refused(Shared& s, httplib::Response& res);

// {"success","message"}: rank 0's message when every rank succeeded, else
// "<op>: rank0: <msg0> | rank1: <msg1> | .." (every rank, the successful ones too).
void lmdeploy_reduce(httplib::Response& res, const std::string& op, const std::vector<RankResult>& ranks);

// The same result on every local rank.
std::vector<RankResult> lmdeploy_all_ranks(const Shared& s, bool ok, const std::string& message);

}  // namespace refeng
