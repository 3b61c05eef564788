// lmdeploy_common.cpp — see lmdeploy_common.h.
#include "lmdeploy_common.h"

#include <cctype>
#include <cstdio>

#include "replies.h"

namespace refeng {
namespace {

bool exactly_json(const httplib::Request& req) {
  std::string ct = req.get_header_value("Content-Type");
  for (auto& c : ct) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ct.substr(0, ct.find(';')) == "application/json";
}

}  // namespace

JsonPtr lmdeploy_parse(Shared& s, const httplib::Request& req, httplib::Response& res, const ModelSpec& spec) {
  std::string ct = req.get_header_value("Content-Type");
  if (!req.body.empty() && fastapi_reads_json(ct)) {  // FastAPI decodes the body before any dependency
    size_t pos = 0;
    const char* why = "Expecting value";
    if (!json_parse(req.body, &pos, &why)) {
      Validated v = validate_model(req.body, ct, spec);
      reply_lmdeploy_validation(res, s.fam, v.errors, v.raw.get());
      return nullptr;
    }
  }
  if (!exactly_json(req)) {
    reply_lmdeploy_media_type(res, s.fam);
    return nullptr;
  }
  Validated v = validate_model(req.body, ct, spec);
  if (!v.body) reply_lmdeploy_validation(res, s.fam, v.errors, v.raw.get());
  return std::move(v.body);
}

bool lmdeploy_json_media(Shared& s, const httplib::Request& req, httplib::Response& res) {
  if (exactly_json(req)) return true;
  reply_lmdeploy_media_type(res, s.fam);
  return false;
}

bool lmdeploy_backend_refused(Shared& s, httplib::Response& res) {
  if (s.opt.lmdeploy_backend == "pytorch") return false;
  reply_lmdeploy_error(res, 501, "Disaggregated weight-update endpoints require backend=\"pytorch\", got " +
                                     py_str_repr(s.opt.lmdeploy_backend) + ".");
  return true;
}

bool lmdeploy_executor_refused(Shared& s, httplib::Response& res) {
  if (s.opt.lmdeploy_executor != "uni") return false;
  std::fprintf(stderr, "wsync-reference-engine: NotImplementedError: Not Implemented. (uni executor)\n");
  reply_internal_error(res);
  return true;
}

void lmdeploy_reduce(httplib::Response& res, const std::string& op, const std::vector<RankResult>& ranks) {
  bool ok = true;
  for (const auto& r : ranks) ok = ok && r.ok;
  if (ok) return reply_success(res, true, ranks.empty() ? "" : ranks[0].message);
  std::string msg = op + ": ";
  for (size_t i = 0; i < ranks.size(); ++i) msg += (i ? " | rank" : "rank") + std::to_string(i) + ": " + ranks[i].message;
  reply_success(res, false, msg);
}

std::vector<RankResult> lmdeploy_all_ranks(const Shared& s, bool ok, const std::string& message) {
  return std::vector<RankResult>(s.engine.gpus(), RankResult{ok, message});
}

}  // namespace refeng
