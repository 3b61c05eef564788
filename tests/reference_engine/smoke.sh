#!/usr/bin/env bash
# smoke.sh ENGINE — checks wsync-reference-engine's routes, states and error shapes that need
# no trainer, with curl: identity routes, validation errors, state-machine refusals, the crash
# emulations. Exits 0 when every check passes, 1 on a mismatch, 77 (skipped) without curl.
set -u
ENGINE=${1:?usage: smoke.sh path/to/wsync-reference-engine}
command -v curl >/dev/null 2>&1 || { echo "smoke.sh: curl not found: skipped"; exit 77; }

TMP=$(mktemp -d)
PIDS=()
FAILS=0
CHECKS=0
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT

# start NAME PROTOCOL VERSION [FLAGS...]: runs an engine; sets PORT and PID.
start() {
  local name=$1 proto=$2 ver=$3
  shift 3
  rm -f "$TMP/$name.port"
  "$ENGINE" --protocol "$proto" --engine-version "$ver" --port 0 --port-file "$TMP/$name.port" "$@" \
    >"$TMP/$name.log" 2>&1 &
  PID=$!
  PIDS+=("$PID")
  for _ in $(seq 100); do [ -s "$TMP/$name.port" ] && break; sleep 0.05; done
  PORT=$(cat "$TMP/$name.port" 2>/dev/null)
  [ -n "$PORT" ] || { echo "FAIL: $name did not start"; cat "$TMP/$name.log"; exit 1; }
}

# check DESCRIPTION STATUS SUBSTRING CURL-ARGS...: the reply has that status and contains SUBSTRING.
check() {
  local desc=$1 want=$2 sub=$3
  shift 3
  CHECKS=$((CHECKS + 1))
  local got
  got=$(curl -s -o "$TMP/body" -w '%{http_code}' --max-time 30 "$@")
  if [ "$got" != "$want" ] || { [ -n "$sub" ] && ! grep -qF -- "$sub" "$TMP/body"; }; then
    FAILS=$((FAILS + 1))
    echo "FAIL: $desc: want $want containing '$sub', got $got: $(head -c 600 "$TMP/body")"
  fi
}
J=(-H 'Content-Type: application/json')
post() { echo -X POST "http://127.0.0.1:$PORT$1"; }

# expect_exit DESCRIPTION CODE CURL-ARGS...: the request kills the engine (PID) with that status.
expect_exit() {
  local desc=$1 code=$2
  shift 2
  CHECKS=$((CHECKS + 1))
  curl -s -o /dev/null --max-time 10 "$@"
  local rc=124
  for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || { wait "$PID"; rc=$?; break; }; sleep 0.05; done
  [ "$rc" = "$code" ] || { FAILS=$((FAILS + 1)); echo "FAIL: $desc: engine exit status $rc, want $code"; }
}

sglang_checks() {
  start sg sglang 0.5.23
  local U="http://127.0.0.1:$PORT"
  check "sglang get_server_info" 200 '"version":"0.5.23"' "$U/get_server_info"
  check "sglang server_info tp_size" 200 '"tp_size":1' "$U/server_info"
  check "sglang model_info" 200 '"weight_version":"default"' "$U/model_info"
  check "sglang 0.5.23 weight_version removed" 404 '{"detail":"Not Found"}' "$U/get_weight_version"
  check "sglang wrong method" 405 'Method Not Allowed' "$U/pause_generation"
  check "begin without body" 400 "'loc': ('body',), 'msg': 'Field required'" -X POST "$U/begin_weight_update"
  check "begin" 200 '"message":"Success"' "${J[@]}" -d '{}' -X POST "$U/begin_weight_update"
  check "begin while open" 400 'a weight-update session is already open; call end_weight_update() first' "${J[@]}" -d '{}' -X POST "$U/begin_weight_update"
  check "update unknown group in session" 400 'Failed to receive weights: Group nope not in []. Please call `init_weights_update_group` first.' "${J[@]}" -d '{"names":["a"],"dtypes":["bfloat16"],"shapes":[[2]],"group_name":"nope"}' -X POST "$U/update_weights_from_distributed"
  check "end" 200 '"success":true' "${J[@]}" -d '{}' -X POST "$U/end_weight_update"
  check "end without session" 400 'no weight-update session is open; call begin_weight_update() first' "${J[@]}" -d '{}' -X POST "$U/end_weight_update"
  check "update outside session" 400 'update_weights_from_distributed must run between begin_weight_update() and end_weight_update()' "${J[@]}" -d '{"names":["a"],"dtypes":["bfloat16"],"shapes":[[2]]}' -X POST "$U/update_weights_from_distributed"
  check "update missing fields" 400 '"object":"error"' "${J[@]}" -d '{"names":["a"]}' -X POST "$U/update_weights_from_distributed"
  check "destroy unknown" 400 'The group to be destroyed does not exist.' "${J[@]}" -d '{"group_name":"g"}' -X POST "$U/destroy_weights_update_group"
  check "init missing fields" 400 '"type":"Bad Request","param":null,"code":400' "${J[@]}" -d '{}' -X POST "$U/init_weights_update_group"
  check "pause bad mode" 400 'literal_error' "${J[@]}" -d '{"mode":"zz"}' -X POST "$U/pause_generation"
  check "pause unknown field ignored" 200 'Generation paused successfully.' "${J[@]}" -d '{"zzz":1}' -X POST "$U/pause_generation"
  check "continue" 200 'Generation continued successfully.' "${J[@]}" -d '{}' -X POST "$U/continue_generation"
  check "flush_cache" 200 'Cache flushed.' -X POST "$U/flush_cache"
  check "flush_cache negative timeout" 400 'greater_than_equal' -X POST "$U/flush_cache?timeout=-1"
  check "update_weight_version" 200 '"new_version":"v2"' "${J[@]}" -d '{"new_version":"v2"}' -X POST "$U/update_weight_version"
  check "state: abort_all_requests defaults to true" 200 '"aborted_requests":2' "$U/debug/state"
  check "update_weight_version no abort" 200 'Weight version updated to v3' "${J[@]}" -d '{"new_version":"v3","abort_all_requests":false}' -X POST "$U/update_weight_version"
  check "state after" 200 '"aborted_requests":2' "$U/debug/state"
  check "kill_receiver without receivers" 404 'no running receiver' -X POST "$U/debug/kill_receiver?rank=0"

  start sgbusy sglang 0.5.23 --flush-busy 1 --api-key k --dp-size 2
  U="http://127.0.0.1:$PORT"
  check "flush busy" 400 'Flush cache failed.' -H 'Authorization: Bearer k' -X POST "$U/flush_cache"
  check "auth refused" 401 '{"error":"Unauthorized"}' "$U/model_info"
  check "health needs no key" 200 '' "$U/health"
  check "dp replicas: init 500" 500 'Internal Server Error' -H 'Authorization: Bearer k' "${J[@]}" -d '{"master_address":"127.0.0.1","master_port":1,"rank_offset":1,"world_size":2}' -X POST "$U/init_weights_update_group"
  check "dp_size reported" 200 '"dp_size":2' -H 'Authorization: Bearer k' "$U/server_info"

  start sg55 sglang 0.5.5
  U="http://127.0.0.1:$PORT"
  check "0.5.5 server_info absent" 404 'Not Found' "$U/server_info"
  check "0.5.5 get_server_info" 200 '"version":"0.5.5"' "$U/get_server_info"
  check "0.5.5 get_weight_version" 200 '"weight_version":"default"' "$U/get_weight_version"
  check "0.5.5 no sessions" 404 'Not Found' "${J[@]}" -d '{}' -X POST "$U/begin_weight_update"
  check "0.5.5 pause reads no body" 200 'Generation paused' -X POST "$U/pause_generation"
  expect_exit "0.5.5 update with an unknown group crashes" 3 "${J[@]}" -d '{"names":["a"],"dtypes":["bfloat16"],"shapes":[[2]],"group_name":"nope"}' -X POST "$U/update_weights_from_distributed"

  start sg58 sglang 0.5.8
  U="http://127.0.0.1:$PORT"
  check "0.5.8 weight_version deprecated" 404 "is deprecated. Please use '/model_info' instead." "$U/weight_version"
  check "0.5.8 pause body required" 400 'Field required' -X POST "$U/pause_generation"
  start sgempty sglang 0.5.21
  U="http://127.0.0.1:$PORT"
  expect_exit "empty group_name in init crashes" 3 "${J[@]}" -d '{"master_address":"127.0.0.1","master_port":1,"rank_offset":1,"world_size":2,"group_name":""}' -X POST "$U/init_weights_update_group"
}

vllm_checks() {
  start vl vllm 0.33.0 --api-key k --world-size 4
  local U="http://127.0.0.1:$PORT"
  check "vllm version" 200 '{"version":"0.33.0"}' "$U/version"
  check "vllm world size" 200 '{"world_size":4}' "$U/get_world_size"
  check "weight_info default" 200 '{"weight_version":"default"}' "$U/weight_info"
  check "dev routes are not guarded" 200 'Weight update started' -X POST "$U/start_weight_update"
  check "start while active" 500 'Call to collective_rpc method failed: start_weight_update called while a weight update is already active. Call finish_weight_update first.' -X POST "$U/start_weight_update"
  check "shutdown while active" 500 'Cannot release a trainer connection during a weight update' -X POST "$U/shutdown_weight_transfer_engine"
  check "update before init ends the session" 500 'NCCL weight transfer not initialized. Call init_transfer_engine() first.' "${J[@]}" -d '{"update_info":{"names":["a"],"dtype_names":["float32"],"shapes":[[4]]}}' -X POST "$U/update_weights"
  check "state: session ended" 200 '"update_active":false' "$U/debug/state"
  check "update without start" 500 'start_weight_update must be called before update_weights.' "${J[@]}" -d '{"update_info":{"names":[],"dtype_names":[],"shapes":[]}}' -X POST "$U/update_weights"
  check "finish without start" 500 'finish_weight_update called without a matching start_weight_update.' -X POST "$U/finish_weight_update"
  check "init without init_info" 400 '"param":"body.init_info"' "${J[@]}" -d '{}' -X POST "$U/init_weight_transfer_engine"
  check "init unknown key" 500 "Invalid init_info for NCCLWeightTransferEngine: NCCLWeightTransferInitInfo.__init__() got an unexpected keyword argument 'x'" "${J[@]}" -d '{"init_info":{"x":1,"rank_offset":1,"world_size":2}}' -X POST "$U/init_weight_transfer_engine"
  check "init both modes" 500 'pass nccl_unique_id_b64 OR master_address/master_port, not both' "${J[@]}" -d '{"init_info":{"nccl_unique_id_b64":"AAAA","master_address":"127.0.0.1","master_port":1,"rank_offset":1,"world_size":2}}' -X POST "$U/init_weight_transfer_engine"
  local uid
  uid=$(head -c 128 /dev/zero | base64 -w0)
  check "init uid alone refused" 500 'cannot join by nccl_unique_id_b64' "${J[@]}" -d "{\"init_info\":{\"nccl_unique_id_b64\":\"$uid\",\"rank_offset\":1,\"world_size\":2}}" -X POST "$U/init_weight_transfer_engine"
  check "pause bad mode" 400 '"param":"query.mode"' -X POST "$U/pause?mode=bad"
  check "shutdown idle" 200 'Weight transfer shut down' -X POST "$U/shutdown_weight_transfer_engine"
  check "pause" 200 '{"status":"paused"}' -X POST "$U/pause"
  check "is_paused" 200 '{"is_paused":true}' "$U/is_paused"
  check "0.33 paused: completions 503" 503 'Generation is paused. Please retry after it resumes.' -H 'Authorization: Bearer k' "${J[@]}" -d '{"prompt":"x"}' -X POST "$U/v1/completions"
  check "resume" 200 '{"status":"resumed"}' -X POST "$U/resume"
  check "completions need the key" 401 '{"error":"Unauthorized"}' "${J[@]}" -d '{"prompt":"x"}' -X POST "$U/v1/completions"
  check "completions" 200 '"object":"text_completion"' -H 'Authorization: Bearer k' "${J[@]}" -d '{"prompt":"x"}' -X POST "$U/v1/completions"
  check "start again" 200 'Weight update started' -X POST "$U/start_weight_update"
  check "completions while active, not paused: dies" 500 '"type":"InternalServerError"' -H 'Authorization: Bearer k' "${J[@]}" -d '{"prompt":"x"}' -X POST "$U/v1/completions"
  check "dead: engine routes 500" 500 'The server had an error while processing your request.' "$U/weight_info"
  check "dead: pause envelope" 500 '{"error":"Failed to pause generation:' -X POST "$U/pause"
  check "dead: health 503" 503 '' "$U/health"
  check "dead: version still answers" 200 '0.33.0' "$U/version"
  check "state: dead" 200 '"dead":true' "$U/debug/state"

  start vl28 vllm 0.28.0 --gpus 2
  U="http://127.0.0.1:$PORT"
  check "0.28 invalid JSON" 400 '"message":"Invalid JSON format","type":"Bad Request"' "${J[@]}" -d '{bad' -X POST "$U/init_weight_transfer_engine"
  check "0.28 missing init_info" 400 "Missing 'init_info' in request body" "${J[@]}" -d '{}' -X POST "$U/init_weight_transfer_engine"
  check "0.28 list body" 500 "'list' object has no attribute 'get'" "${J[@]}" -d '[1]' -X POST "$U/init_weight_transfer_engine"
  check "0.28 no unique id" 500 "unexpected keyword argument 'nccl_unique_id_b64'" "${J[@]}" -d '{"init_info":{"master_address":"h","master_port":1,"rank_offset":1,"world_size":3,"nccl_unique_id_b64":"x"}}' -X POST "$U/init_weight_transfer_engine"
  check "0.28 missing keys" 500 "missing 2 required positional arguments: 'master_port' and 'world_size'" "${J[@]}" -d '{"init_info":{"master_address":"h","rank_offset":1}}' -X POST "$U/init_weight_transfer_engine"
  check "0.28 no shutdown route" 404 'Not Found' -X POST "$U/shutdown_weight_transfer_engine"
  check "0.28 start" 200 'Weight update started' -X POST "$U/start_weight_update"
  check "0.28 mp wrapper" 500 "Worker failed with error 'start_weight_update called while a weight update is already active. Call finish_weight_update first.', please check the stack trace above for the root cause" -X POST "$U/start_weight_update"
  check "0.28 list update_info" 500 'argument after ** must be a mapping, not list' "${J[@]}" -d '{"update_info":[{"names":[],"dtype_names":[],"shapes":[]}]}' -X POST "$U/update_weights"
  check "0.28 paused completions queue" 200 '{"status":"paused"}' -X POST "$U/pause?wait_for_inflight_requests=true"
  check "0.28 pause mode" 200 '"pause_mode":"wait"' "$U/debug/state"
}

lmdeploy_checks() {
  start lm lmdeploy 0.18.0
  local U="http://127.0.0.1:$PORT"
  check "lmdeploy no version route" 404 '{"detail":"Not Found"}' "$U/version"
  check "engine_info is a JSON string" 200 '"{\"tp_size\":1,\"ep_size\":1,\"dp_size\":1,\"pp_size\":null,\"dp_rank\":0,\"block_size\":64,\"num_cpu_blocks\":0,\"num_gpu_blocks\":0}"' "$U/distserve/engine_info"
  check "0.18 ipc status" 200 '"ready":false' "$U/update_weights_from_ipc"
  check "0.16+ validation" 400 '{"message":"master_address: Field required","type":"invalid_request_error","code":400,"param":null,"object":"error"}' "${J[@]}" -d '{}' -X POST "$U/init_weights_update_group"
  check "0.16+ missing group_name" 400 '"message":"group_name: Field required"' "${J[@]}" -d '{"master_address":"h","master_port":1,"rank_offset":1,"world_size":2}' -X POST "$U/init_weights_update_group"
  check "media type" 400 "Unsupported Media Type: Only 'application/json' is allowed" -H 'Content-Type: text/plain' -d '{"group_name":"g"}' -X POST "$U/destroy_weights_update_group"
  check "destroy unknown" 400 "destroy_weights_update_group: rank0: group 'g' not initialized" "${J[@]}" -d '{"group_name":"g"}' -X POST "$U/destroy_weights_update_group"
  check "update unknown" 400 "update_weights_from_distributed: rank0: group 'g' not initialized. Call init_weights_update_group first." "${J[@]}" -d '{"names":[],"dtypes":[],"shapes":[],"group_name":"g","finished":true}' -X POST "$U/update_weights_from_distributed"
  check "init empty name" 400 'init_weights_update_group: rank0: group_name cannot be empty' "${J[@]}" -d '{"master_address":"h","master_port":1,"rank_offset":1,"world_size":2,"group_name":""}' -X POST "$U/init_weights_update_group"
  check "sleep needs the header" 400 'Unsupported Media Type' -X POST "$U/sleep"
  check "sleep" 200 '' "${J[@]}" -X POST "$U/sleep?level=1"
  check "is_sleeping" 200 '{"is_sleeping":true}' "$U/is_sleeping"
  check "wakeup" 200 '' "${J[@]}" -X POST "$U/wakeup"
  check "abort 501" 501 'This server does not support abort requests.' "${J[@]}" -d '{"abort_all":true}' -X POST "$U/abort_request"

  start lmuni lmdeploy 0.18.0 --lmdeploy-executor uni --gpus 2 --api-key k
  U="http://127.0.0.1:$PORT"
  check "0.16+ 401 envelope" 401 '"message":"Unauthorized.","type":"authentication_error"' "$U/is_sleeping"
  check "uni executor 500" 500 'Internal Server Error' -H 'Authorization: Bearer k' "${J[@]}" -d '{"group_name":"g"}' -X POST "$U/destroy_weights_update_group"
  check "uni: validation first" 400 'group_name: Field required' -H 'Authorization: Bearer k' "${J[@]}" -d '{}' -X POST "$U/destroy_weights_update_group"
  check "tp_size from --gpus" 200 '\"tp_size\":2' -H 'Authorization: Bearer k' "$U/distserve/engine_info"

  start lm14 lmdeploy 0.14.0
  U="http://127.0.0.1:$PORT"
  check "0.14 validation 422" 422 '"loc":["body","master_address"],"msg":"Field required","input":{}}' "${J[@]}" -d '{}' -X POST "$U/init_weights_update_group"
  check "0.14 body echoed" 422 '"body":{}' "${J[@]}" -d '{}' -X POST "$U/init_weights_update_group"
  check "0.14 media type" 422 "{\"detail\":[\"Unsupported Media Type: Only 'application/json' is allowed\"],\"body\":null}" -X POST "$U/sleep"
  check "0.14 no ipc route" 404 'Not Found' "$U/update_weights_from_ipc"
  start lm13 lmdeploy 0.13.0
  U="http://127.0.0.1:$PORT"
  check "0.13 no weight routes" 404 '{"detail":"Not Found"}' "${J[@]}" -d '{}' -X POST "$U/init_weights_update_group"
}

sglang_checks
vllm_checks
lmdeploy_checks
echo "smoke.sh: $((CHECKS - FAILS))/$CHECKS checks passed"
[ "$FAILS" -eq 0 ]
