// sglang_common.h — helpers shared by the SGLang route files: body validation in SGLang's
// error shape, the scheduler crash emulation, and the texts of SGLang's failure replies.
#pragma once

#include <httplib.h>

#include <string>
#include <vector>

#include "json_util.h"
#include "schemas.h"
#include "state.h"

namespace refeng {

extern const char* const kSglangDefaultGroup;  // "weight_update_group"

// Validates the body; on errors answers SGLang's 400 (or Starlette's 500) and returns null.
JsonPtr sglang_parse(const httplib::Request& req, httplib::Response& res, const ModelSpec& spec);

// The scheduler process raised outside its try (run_scheduler_process logs "Scheduler hit an
// exception" and SIGQUITs the server): log why and exit with status 3, no reply.
[[noreturn]] void sglang_crash(const Shared& s, const std::string& exception);

// The tokenizer-side DP assert of init/destroy/update: with dp_size > 1 and no DP attention the
// route answers Starlette's 500 text. Returns true when it answered.
bool sglang_dp_refused(Shared& s, httplib::Response& res);

// The 400 text of a failed receive/load in this family.
std::string sglang_update_failure(const SglangFeatures& f, const std::string& why);

// Python's repr of a list of str: "['a', 'b']".
std::string py_str_list(const std::vector<std::string>& v);

// {"message": message, "status": "ok"} 200.
void sglang_status_ok(httplib::Response& res, const char* message);

// SGLang routes that run a generation (/health, /health_generate) wait while generation is
// paused or an update holds the writer lock; after SGLANG_HEALTH_CHECK_TIMEOUT (20 s) they give up.
bool sglang_wait_generation(Shared& s, int timeout_s);

// RAII: an update (or begin/end) holds the tokenizer's writer lock while it runs unpaused.
class WriterHold {
 public:
  WriterHold(Shared& s, bool hold);
  ~WriterHold();
  WriterHold(const WriterHold&) = delete;
  WriterHold& operator=(const WriterHold&) = delete;

 private:
  Shared& s_;
  bool hold_;
};

}  // namespace refeng
