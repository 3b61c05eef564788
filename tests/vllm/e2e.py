#!/usr/bin/env python3
"""A real vLLM (CPU) updated through the `wsync` weight-transfer backend, checked against vLLMs
started from checkpoints of the same weights.

  1. A tiny Qwen2 (make_tiny_model.py, seed 0) is served by vLLM with
     --weight-transfer-config '{"backend": "wsync"}': the server's worker embeds a wsync receiver.
  2. A trainer (this process: wsync.Group, adapter "vllm" with adapter.backend=wsync,
     engine_receivers=wsync, transport ucx, verify_payload=1) publishes version 1 (seed 1) and
     version 2 (seed 2), each while a long completion request is in flight. After each version:
     the greedy completion of a fixed prompt and /weight_checker's checksum of every parameter
     are read from the server.
  3. Failure: a second trainer process starts version 3 (seed 3) and is SIGKILLed after its first
     batch, in the middle of the update. A new trainer then publishes version 3 = seed 1's
     weights again (the engines' recovery: reset at init, then a whole update). Then the kill
     points: for each of 4 tensor counts (inside a q/k/v group, inside a gate/up group, after a
     whole layer) a trainer dies after exactly that many tensors, a new trainer recovers, every
     parameter must equal one version exactly, and a full update restores version 3.
     Many senders: a trainer of two processes, each holding half of every tensor's rows (sender 0
     drives the server, sender 1 a subprocess), publishes version 4 (seed 2); the worker takes
     every tensor whole from both. Before it, the same trainer's rank 1 is killed in the middle
     of version 4: rank 0 fails naming sender 1, and the restarted trainer (both ranks) is the
     one that publishes version 4 into the same server.
  4. vLLMs started from checkpoints of seed 1 and seed 2 give the expected completions and
     checksums; each version must match them exactly, and every parameter vLLM keeps as loaded
     must have the trainer's sha256.

Exit 0 only if every check passed (35 in all, among them one per kill point, two for the two-sender
trainer, and six on a second server with WSYNC_VLLM_LOAD=staged). Prints a table and writes JSON figures (--json).
Run with the vLLM venv's python, wsync installed in it (scripts/vllm-e2e.sh does all of it).
"""
import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import make_tiny_model as tiny  # noqa: E402
from vllm_server import VllmServer  # noqa: E402

PROMPT = "Beautiful is better than"
GREEDY_TOKENS = 24
GROUP = "vllm-e2e"


def sha256(t):
    import torch
    return hashlib.sha256(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def trainer_group(server_url, timeout_ms=120000):
    import wsync
    return wsync.Group(0, group_name=GROUP, store_addr="127.0.0.1:0", transport="ucx", adapter="vllm",
                       options={"engines": server_url + "=1", "engine_receivers": "wsync",
                                "adapter.backend": "wsync", "verify_payload": "1",
                                "bucket_bytes": str(256 << 10), "timeout_ms": "60000"},
                       timeout_ms=timeout_ms)


#: The checkpoint's tensors vLLM fuses (q/k/v, gate/up) under other names.
FUSED = tuple(x + "_proj." + y for x in ("q", "k", "v") for y in ("weight", "bias")) + ("gate_proj.weight",
                                                                                         "up_proj.weight")


def processed_checksums(weights, bias_dtype):
    """sha256 of what vLLM's CPU backend keeps of `weights` (HF names): the parameters it keeps as
    loaded, and q/k/v biases concatenated into qkv_proj.bias in `bias_dtype` (float32 where the
    CPU has AMX and vLLM's sgl kernel takes the layer, else the model's dtype: bias_dtype_of)."""
    import torch
    out = {n: sha256(t) for n, t in weights.items() if not n.endswith(FUSED)}
    for n in weights:  # fused weights, where the CPU backend keeps them (else empty in every version)
        for fused, parts in (("qkv_proj.weight", ("q", "k", "v")), ("gate_up_proj.weight", ("gate", "up"))):
            if n.endswith(parts[0] + "_proj.weight"):
                p = n[: -len(parts[0] + "_proj.weight")]
                out[p + fused] = sha256(torch.cat([weights[p + x + "_proj.weight"] for x in parts]))
        if n.endswith("q_proj.bias"):
            p = n[: -len("q_proj.bias")]
            cat = torch.cat([weights[p + x + "_proj.bias"] for x in "qkv"])
            out[p + "qkv_proj.bias"] = sha256(cat.to(bias_dtype) if bias_dtype is not None else cat)
    return out


def bias_dtype_of(server_sums, weights):
    """The dtype the server keeps qkv_proj.bias in: the one whose checksum of the served weights
    (`weights`) equals the server's; None when neither does (every check against it then fails)."""
    import torch
    sums = {k.split(":")[-1]: v for k, v in server_sums.items()}
    for dtype in (None, torch.float32):
        want = processed_checksums(weights, dtype)
        if all(sums.get(k) == v for k, v in want.items() if k.endswith("qkv_proj.bias")):
            return dtype
    return None


def halves(weights, k, m=2):
    """Sender k's rows of every tensor (torch.chunk over m senders along dim 0), as wsync.Slice."""
    import wsync
    from wsync import boxes
    out = {}
    for n, t in weights.items():
        box = boxes.chunk(tuple(t.shape), 0, m, k)
        out[n] = wsync.Slice(t[box.slices()].contiguous(), tuple(t.shape), box)
    return out


def sender_options(server_url=None, rank=0, sender0=None, addr_file=None, timeout_ms=60000):
    """Sender `rank` of a two-sender trainer: sender 0 drives the server (as trainer_group), sender
    1 only sends its boxes to the server's worker, which joins it through sender 0's store."""
    opts = {"verify_payload": "1", "bucket_bytes": str(256 << 10), "timeout_ms": str(timeout_ms), "num_senders": "2",
            "sender_rank": str(rank)}
    if rank == 0:
        opts.update({"engines": server_url + "=1", "engine_receivers": "wsync", "adapter.backend": "wsync",
                     "store_addr_file": addr_file})
    else:
        opts["sender0_store"] = sender0
    return opts


def second_sender(addr_file, seed, version, die=False):
    """Sender 1 of the two-sender trainer (a subprocess): the second half of every tensor's rows of
    `seed`'s weights, as version `version`. Exit 0 once the version committed. With `die`: its
    first batch delivered, SIGKILL (a trainer rank that crashes mid-update)."""
    import wsync
    config = tiny.load_config(os.environ["E2E_MODEL_DIR"])
    weights = tiny.make_weights(config, seed)
    deadline = time.monotonic() + 300
    while not os.path.exists(addr_file):  # sender 0 writes it whole (a rename) once its store is up
        if time.monotonic() > deadline:
            print("second sender: no %s" % addr_file, flush=True)
            return 5
        time.sleep(0.05)
    sender0 = Path(addr_file).read_text().strip()
    with wsync.Group(1, group_name=GROUP, store_addr="127.0.0.1:0", transport="ucx",
                     options=sender_options(rank=1, sender0=sender0), timeout_ms=300000) as g:
        if die:
            mine = halves(weights, 1)
            names = list(mine)
            g.send({n: mine[n] for n in names[:len(names) // 2]})
            while g.stats().batches < 1:
                time.sleep(0.01)
            print("second sender: first batch delivered; dying", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        publish(g, halves(weights, 1), version)
        stats = g.stats()
    print("second sender: version %d committed (plans computed %d)" % (stats.committed_version, stats.plans_computed),
          flush=True)
    return 0 if stats.committed_version == version else 6


def publish(group, weights, version):
    """Two batches (async, so the second is produced while the first moves), then the commit."""
    names = list(weights)
    half = len(names) // 2
    t0 = time.perf_counter()
    h1 = group.send_async({n: weights[n] for n in names[:half]})
    h2 = group.send_async({n: weights[n] for n in names[half:]})
    h1.wait()
    h2.wait()
    group.finalize(version)
    return time.perf_counter() - t0


class InFlight(threading.Thread):
    """A long streamed completion running while the weights change: it must still finish. `started`
    is set once its first tokens arrived, so the update surely begins while it runs."""

    def __init__(self, server, tokens=400):
        super().__init__(daemon=True)
        self.server, self.tokens = server, tokens
        self.started, self.ended, self.error, self.completion_tokens = threading.Event(), None, None, 0
        self.lock = threading.Lock()  # `ended` is taken and set in one step (see running_since)

    def running_since(self):
        """(now, whether the stream was still running then): read with `ended` in one step, so that
        a stream found running ends after `now`."""
        with self.lock:
            return time.monotonic(), self.ended is None

    def run(self):
        body = {"model": self.server.model_dir, "prompt": "Errors should never pass silently.",
                "max_tokens": self.tokens, "min_tokens": self.tokens, "temperature": 0.0, "stream": True,
                "stream_options": {"include_usage": True}}
        req = urllib.request.Request(self.server.url + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=600) as resp:
                for raw in resp:
                    line = raw.decode().strip()
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    chunk = json.loads(line[len("data: "):])
                    if chunk.get("choices"):
                        self.started.set()
                    if chunk.get("usage"):
                        self.completion_tokens = chunk["usage"]["completion_tokens"]
        except Exception as e:  # reported by the check
            self.error = e
        with self.lock:
            self.ended = time.monotonic()
        self.started.set()


# The dying trainer's one batch: the embeddings, layers 0 and 1 whole, and of layer 2 only q_proj:
# layer 2's qkv_proj gets part of its tensors before the trainer dies.
DYING_BATCH = 27


def die_mid_update(server_url, seed, count=DYING_BATCH):
    """The failing trainer (a subprocess): exactly `count` tensors of the update, then SIGKILL.
    send() returns once wsync no longer reads the tensors (ABI 1.5); the batch's delivery (every
    /update_weights answered) shows in stats().batches, which it waits for, so the kill point is a
    tensor count, not a moment."""
    config = tiny.load_config(os.environ["E2E_MODEL_DIR"])
    weights = tiny.make_weights(config, seed)
    g = trainer_group(server_url)
    names = list(weights)
    if count == DYING_BATCH:
        assert names[DYING_BATCH - 1] == "model.layers.2.self_attn.q_proj.bias", names[DYING_BATCH - 1]
    g.send({n: weights[n] for n in names[:count]})
    deadline = time.monotonic() + 120
    while g.stats().batches < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    print("trainer-to-die: %d tensors delivered; dying" % count, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


#: The last tensor before each kill point: inside q/k/v groups (after q's weight; after q's
#: weight and bias, before k; between k and v; after v's weight, before v's bias), inside a
#: gate/up group (after gate), after a whole layer, and after every tensor (before the finalize).
KILL_AFTER = ("layers.0.self_attn.q_proj.weight", "layers.0.self_attn.q_proj.bias",
              "layers.1.self_attn.k_proj.bias", "layers.2.self_attn.v_proj.weight",
              "layers.3.mlp.gate_proj.weight", "layers.1.post_attention_layernorm.weight", "lm_head.weight")


def kill_points(names, last=KILL_AFTER):
    """Tensor counts to die after: one per name of `last`."""
    return [i + 1 for i, n in enumerate(names) if n.endswith(last)]


def error_lines(server):
    """The server log's lines at level ERROR so far, in order."""
    return [line for line in server.log_path.read_text(errors="replace").splitlines() if " ERROR " in line]


def check_one_version(server, config, old_sums, new_seed, bias_dtype):
    """(ok, text): every parameter's checksum equals the committed version's or the dead
    trainer's, none anything else."""
    after = {k.split(":")[-1]: v for k, v in server.weight_checksums().items()}
    old = {k.split(":")[-1]: v for k, v in old_sums.items()}
    new = processed_checksums(tiny.make_weights(config, new_seed), bias_dtype)
    odd = sorted(k for k in after if after[k] not in (old.get(k), new.get(k)))
    n_new = sum(1 for k in after if after[k] == new.get(k) != old.get(k))
    n_old = sum(1 for k in after if after[k] == old.get(k) != new.get(k))
    return not odd, "%d new, %d old, other: %s" % (n_new, n_old, odd[:4] or "none")


class Checks:
    def __init__(self):
        self.rows, self.failed = [], 0

    def expect(self, ok, what):
        self.rows.append(("PASS" if ok else "FAIL", what))
        self.failed += 0 if ok else 1
        print("  [%s] %s" % ("PASS" if ok else "FAIL", what), flush=True)


TRANSPOSED = "model.layers.1.mlp.down_proj.weight"


def staged_run(base, config, work, weights, got, checks, figures):
    """A second server with WSYNC_VLLM_LOAD=staged (all-or-nothing): trainers killed inside a
    q/k/v group and after every tensor leave the served weights untouched; a full update equals
    the layerwise server's version 1; an update with one transposed tensor is refused naming it
    and both shapes, and leaves version 1 served exactly. The staged bytes the engine logs must
    equal the update's size."""
    import re
    t0 = time.monotonic()
    log = work / "vllm-wsync-staged.log"
    server = VllmServer(base, log_path=log, extra_args=["--weight-transfer-config", json.dumps({"backend": "wsync"})],
                        env={"WSYNC_LOG_LEVEL": "info", "WSYNC_VLLM_LOAD": "staged"})
    names = list(weights[1])
    with server.start(timeout=600):
        for k in kill_points(names, ("layers.1.self_attn.k_proj.bias", "lm_head.weight")):
            committed = server.weight_checksums()
            p = subprocess.run([sys.executable, __file__, "--die-mid-update", server.url, "--die-after", str(k)],
                               env={**os.environ, "E2E_MODEL_DIR": str(base)}, timeout=300)
            with trainer_group(server.url):
                same = server.weight_checksums() == committed
            checks.expect(p.returncode == -signal.SIGKILL and same and server.healthy(),
                          "staged: killed after %d tensors (%s): every parameter holds the last committed version "
                          "exactly: %s" % (k, names[k - 1], same))
        with trainer_group(server.url) as g:
            publish(g, weights[1], 1)
        v1 = (server.complete(PROMPT, GREEDY_TOKENS).token_ids, server.weight_checksums())
        checks.expect(v1 == got[1], "staged: a full update gives the layerwise server's version 1 exactly "
                      "(greedy completion and every checksum)")
        bad = dict(weights[2])
        bad[TRANSPOSED] = bad[TRANSPOSED].t().contiguous()
        error = ""
        with trainer_group(server.url) as g:
            try:
                g.send(bad)
                g.finalize(2)
            except Exception as e:  # the refusal, checked below
                error = str(e)
        want = "'%s' has shape %s but the served model wants %s" % (TRANSPOSED, list(bad[TRANSPOSED].shape),
                                                             list(weights[2][TRANSPOSED].shape))
        with trainer_group(server.url):  # a new trainer's reset resumes the server the refusal left paused
            after = (server.complete(PROMPT, GREEDY_TOKENS).token_ids, server.weight_checksums())
        checks.expect(want in error and after == v1,
                      "staged: an update with %s transposed is refused (%s), and version 1 stays served exactly "
                      "(greedy completion and every checksum): %s" %
                      (TRANSPOSED, "names it and both shapes" if want in error else "error: %r" % error[-300:],
                       after == v1))
    staged = [int(b) for b in re.findall(r"loading the staged update: \d+ tensors, (\d+) bytes", log.read_text())]
    total = figures["bytes_per_update"]
    figures["staged"] = {"staged_bytes_logged": staged, "seconds": round(time.monotonic() - t0, 1)}
    checks.expect(staged == [total], "staged: loaded once, holding %s bytes at its peak; the update's tensors are "
                  "%d bytes" % (staged, total))


def is_paused(server):
    return bool(server.get("/is_paused").get("is_paused"))


def answered_within(server, seconds=1.0):
    """(whether a short greedy completion answered within `seconds` of asking, its latency)."""
    t0 = time.monotonic()
    server.complete(PROMPT, 4)
    took = time.monotonic() - t0
    return took <= seconds, took


def bad_updates(work):
    """vllm.bad_updates: what a server holds and does after a bad update, with default options, in
    both load modes (docs/VLLM.md, "When an update fails"):
      1. a full update (declared first, as Group.declare does) with the last layer's down_proj
         transposed is refused naming it and both shapes, before anything is paused or loaded:
         version 1 stays served exactly (greedy completion, every checksum), the server is not
         paused and answers within a second, and vLLM's log gains at most 3 ERROR lines;
      2. the same update undeclared (each bucket checked as it comes): staged holds version 1
         whole and resumes by default; layerwise loaded the layers before it, so it holds a mix,
         stays paused, and the trainer's error and the server's log say so in one line each;
      3. layerwise: a trainer killed between two batches of an update: the server ends the update
         itself (one log line: what it holds, what to do), stays paused, and a POST /resume there
         is safe (it serves); a new trainer then publishes version 1 exactly again.
    Exit 0 when every check passed."""
    import wsync
    work.mkdir(parents=True, exist_ok=True)
    base = tiny.make_model_dir(work / "model-seed0", seed=0)
    config = tiny.load_config(base)
    weights = {s: tiny.make_weights(config, s) for s in (1, 2)}
    last = "model.layers.%d.mlp.down_proj.weight" % (config["num_hidden_layers"] - 1)
    bad = dict(weights[2])
    bad[last] = bad[last].t().contiguous()
    shapes = "has shape %s but the served model wants %s" % (list(bad[last].shape), list(weights[2][last].shape))
    checks, figures = Checks(), {}
    for mode in ("layerwise", "staged"):
        server = VllmServer(base, log_path=work / ("vllm-bad-%s.log" % mode),
                            extra_args=["--weight-transfer-config", json.dumps({"backend": "wsync"})],
                            env={"WSYNC_LOG_LEVEL": "info", "WSYNC_VLLM_LOAD": mode})
        with server.start(timeout=600):
            with trainer_group(server.url) as g:
                publish(g, weights[1], 1)
            v1 = (server.complete(PROMPT, GREEDY_TOKENS).token_ids, server.weight_checksums())
            # 1. declared: refused before anything is paused or loaded
            errors_before, error = len(error_lines(server)), ""
            with trainer_group(server.url) as g:
                g.declare(bad)
                try:
                    publish(g, bad, 2)
                except wsync.WsyncError as e:
                    error = "%s: %s" % (type(e).__name__, e)
                paused = is_paused(server)
                fast, took = answered_within(server)
            after = (server.complete(PROMPT, GREEDY_TOKENS).token_ids, server.weight_checksums())
            new_errors = error_lines(server)[errors_before:]
            figures["%s_declared_answer_seconds" % mode] = round(took, 3)
            checks.expect("InvalidArgument" in error and last in error and shapes in error and
                          "before anything was paused, sent or loaded" in error,
                          "%s, declared: the update is refused naming %s and both shapes (%s)" %
                          (mode, last, error[-260:]))
            checks.expect(after == v1 and not paused and fast,
                          "%s, declared: version 1 stays served exactly (%s), never paused (%s), answering in %.3f s"
                          % (mode, after == v1, not paused, took))
            checks.expect(len(new_errors) <= 3, "%s, declared: vLLM's log gained %d ERROR line(s) (at most 3): %s" %
                          (mode, len(new_errors), [x[-160:] for x in new_errors]))
            # 2. undeclared: each bucket checked as it comes
            error = ""
            with trainer_group(server.url) as g:
                try:
                    publish(g, bad, 2)
                except wsync.WsyncError as e:
                    error = str(e)
                paused = is_paused(server)
                now = server.weight_checksums() if mode == "staged" else None
                if mode == "staged":
                    fast, took = answered_within(server)
            log = server.log_path.read_text(errors="replace")
            if mode == "staged":
                checks.expect(shapes in error and "holds version 1" in error and "serves again" in error and
                              not paused and fast and now == v1[1],
                              "staged, undeclared: refused naming both shapes; the error says it holds version 1 "
                              "and serves again; not paused (%s), answering in %.3f s, version 1 exactly (%s): %s" %
                              (not paused, took, now == v1[1], error[-300:]))
            else:
                mix_line = [x for x in log.splitlines() if "update failed" in x and "a mix" in x and "POST /resume" in x]
                checks.expect(shapes in error and "a mix" in error and "stays paused" in error and paused and mix_line,
                              "layerwise, undeclared: refused naming both shapes; the trainer's error says the server "
                              "holds a mix and stays paused (%s), it is paused (%s), and its log says so in one line "
                              "(%s): %s" % ("a mix" in error, paused, bool(mix_line), error[-300:]))
            with trainer_group(server.url) as g:  # a new trainer: the reset resumes, a full version restores
                publish(g, weights[1], 3)
            restored = (server.complete(PROMPT, GREEDY_TOKENS).token_ids, server.weight_checksums())
            checks.expect(restored == v1 and not is_paused(server),
                          "%s: a new trainer's full update serves version 1's weights exactly again" % mode)
            if mode != "layerwise":
                continue
            # 3. a trainer killed between two batches of an update
            lines_before = len(server.log_path.read_text(errors="replace").splitlines())
            p = subprocess.run([sys.executable, __file__, "--die-mid-update", server.url, "--die-after",
                                str(DYING_BATCH)], env={**os.environ, "E2E_MODEL_DIR": str(base)}, timeout=300)
            deadline, said = time.monotonic() + 60, []
            while time.monotonic() < deadline and not said:
                new = server.log_path.read_text(errors="replace").splitlines()[lines_before:]
                said = [x for x in new if "update failed" in x and "POST /resume" in x]
                time.sleep(0.5)
            paused = is_paused(server)
            checks.expect(p.returncode == -signal.SIGKILL and said and paused,
                          "layerwise, trainer killed between batches: the server says in one line what it holds and "
                          "what to do (%s), and stays paused (%s): %s" % (bool(said), paused, (said or [""])[0][-300:]))
            server.post("/resume")
            serving = server.healthy() and len(server.complete(PROMPT, 4).token_ids) == 4
            checks.expect(serving, "layerwise: a POST /resume after the trainer died is safe: the server serves")
            with trainer_group(server.url) as g:
                publish(g, weights[1], 4)
            restored = (server.complete(PROMPT, GREEDY_TOKENS).token_ids, server.weight_checksums())
            checks.expect(restored == v1, "layerwise: after it, a new trainer's full update gives version 1 exactly")
    print(json.dumps(figures), flush=True)
    print("vllm.bad_updates: %d checks, %d failed" % (len(checks.rows), checks.failed), flush=True)
    return 0 if checks.failed == 0 else 1


def doc_command(work):
    """vllm.doc_command: the start command of docs/VLLM.md ("Starting vLLM with it", the sh block
    after the vllm.doc_command marker) run as written by bash, its `pip install` line left out (the
    wheel is installed already), with MODEL a tiny local model, SECRET the trainer's secret, and
    the venv's `python` first on PATH; none of the variables the block sets is inherited. Then a
    trainer publishes one version into it (so the workers got the secret from the documented
    line), and a trainer with another secret is refused. Exit 0 when both hold."""
    import urllib.error
    import wsync
    doc = (HERE.parents[1] / "docs" / "VLLM.md").read_text()
    at = doc.index("<!-- vllm.doc_command runs the block below")
    begin = doc.index("```sh\n", at) + len("```sh\n")
    block = doc[begin:doc.index("```", begin)]
    script = "\n".join(line for line in block.splitlines() if not line.startswith("pip install"))
    print("doc command:\n" + script, flush=True)
    work.mkdir(parents=True, exist_ok=True)
    model = tiny.make_model_dir(work / "model-doc", seed=0)
    secret = os.environ["WSYNC_GROUP_SECRET"]
    env = {k: v for k, v in os.environ.items()
           if k not in ("WSYNC_GROUP_SECRET", "VLLM_CPU_KVCACHE_SPACE", "VLLM_SERVER_DEV_MODE")}
    env.update({"MODEL": str(model), "SECRET": secret, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
                "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")})
    log = open(work / "vllm-doc-command.log", "wb")
    server = subprocess.Popen(["bash", "-ec", script], env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    url = "http://127.0.0.1:8000"
    failures = []
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                tail = (work / "vllm-doc-command.log").read_text(errors="replace").splitlines()[-15:]
                print("the documented command did not bring a server up:\n" + "\n".join(tail), flush=True)
                return 1
            time.sleep(1)
        config = tiny.load_config(model)
        weights = tiny.make_weights(config, 1)
        with trainer_group(url) as g:
            seconds = publish(g, weights, 1)
            committed = g.stats().committed_version
        print("  version 1 published into the documented server in %.3f s" % seconds, flush=True)
        if committed != 1:
            failures.append("version 1 did not commit (committed %d)" % committed)
        os.environ["WSYNC_GROUP_SECRET"] = "another-secret-0123456789abcdef"
        try:
            with trainer_group(url, timeout_ms=60000):
                failures.append("a trainer with another secret was let in")
        except wsync.WsyncError as e:
            print("  a trainer with another secret: %s" % str(e)[:300], flush=True)
        finally:
            os.environ["WSYNC_GROUP_SECRET"] = secret
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    for f in failures:
        print("  [FAIL] " + f, flush=True)
    print("vllm.doc_command: %s" % ("OK" if not failures else "FAILED"), flush=True)
    return 0 if not failures else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/wsync-vllm-e2e")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--die-mid-update", metavar="URL", help=argparse.SUPPRESS)
    ap.add_argument("--die-after", type=int, default=DYING_BATCH, help=argparse.SUPPRESS)
    ap.add_argument("--no-kill-points", action="store_true", help="skip the kill-point series")
    ap.add_argument("--no-staged", action="store_true", help="skip the second server (WSYNC_VLLM_LOAD=staged)")
    ap.add_argument("--no-senders", action="store_true", help="skip the two-sender trainer")
    ap.add_argument("--second-sender", metavar="ADDR_FILE", help=argparse.SUPPRESS)
    ap.add_argument("--second-sender-dies", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bad-updates", action="store_true",
                    help="only run the bad-update checks (both load modes, default options)")
    ap.add_argument("--doc-command", action="store_true",
                    help="only run docs/VLLM.md's start command as written and publish into it")
    args = ap.parse_args()
    if args.doc_command:
        return doc_command(Path(args.work) / "doc-command")
    if args.bad_updates:
        return bad_updates(Path(args.work) / "bad-updates")
    if args.die_mid_update:
        return die_mid_update(args.die_mid_update, 3, args.die_after)
    if args.second_sender:
        return second_sender(args.second_sender, 2, 4, args.second_sender_dies)

    import wsync
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    base = tiny.make_model_dir(work / "model-seed0", seed=0)
    config = tiny.load_config(base)
    versions = {1: 1, 2: 2, 3: 1}  # version -> weights seed (3: seed 1 again, after the failure)
    weights = {s: tiny.make_weights(config, s) for s in (1, 2)}
    total_bytes = sum(t.numel() * t.element_size() for t in weights[1].values())
    checks, got, figures = Checks(), {}, {"tensors": len(weights[1]), "bytes_per_update": total_bytes, "updates": {}}
    print("wsync %s, %d tensors, %.2f MiB per update" % (wsync.__version__, len(weights[1]), total_bytes / 2**20))

    env = {"WSYNC_LOG_LEVEL": "info"}
    server = VllmServer(base, log_path=work / "vllm-wsync.log", extra_args=[
        "--weight-transfer-config", json.dumps({"backend": "wsync"})], env=env)
    with server.start(timeout=600):
        figures["startup_seconds"] = round(server.startup_seconds, 1)
        got["seed0"] = server.complete(PROMPT, GREEDY_TOKENS).token_ids
        bias_dtype = bias_dtype_of(server.weight_checksums(), tiny.make_weights(config, 0))
        figures["qkv_bias_dtype"] = str(bias_dtype or "the model's")
        print("  the server keeps qkv_proj.bias as %s" % figures["qkv_bias_dtype"], flush=True)
        errors_before = error_lines(server)
        with trainer_group(server.url) as g:
            # The trainer's init resets the server; on a fresh one that must not log an ERROR (vLLM
            # logs a traceback for a /finish_weight_update without a matching start).
            new_errors = error_lines(server)[len(errors_before):]
            checks.expect(not new_errors, "a fresh server logs no ERROR when a trainer starts%s" %
                          ("" if not new_errors else " (it logged: %s)" % new_errors[:2]))
            for v in (1, 2):
                for _ in range(5):
                    inflight = InFlight(server)
                    inflight.start()
                    inflight.started.wait(120)  # its first tokens came: it runs
                    began, running = inflight.running_since()
                    if running:
                        break
                    # (a loaded machine: the client read its first tokens only once all 400 were
                    # made, and the stream ended before the update could begin; another one)
                    inflight.join(600)
                seconds = publish(g, weights[versions[v]], v)
                inflight.join(600)
                checks.expect(running and inflight.error is None and inflight.completion_tokens == 400 and
                              inflight.ended > began,
                              "v%d: a completion streaming when the update began finished after it (%s)" %
                              (v, inflight.error or "%d tokens, %.2f s after the update began" %
                               (inflight.completion_tokens, inflight.ended - began)))
                got[v] = (server.complete(PROMPT, GREEDY_TOKENS).token_ids, server.weight_checksums())
                figures["updates"][v] = round(seconds, 3)
                print("  version %d published in %.3f s" % (v, seconds), flush=True)
            stats = g.stats()
            checks.expect(stats.committed_version == 2 and stats.updates == 2,
                          "trainer: versions committed %d, updates %d" % (stats.committed_version, stats.updates))

        # A trainer dies in the middle of version 3; a new one recovers the server and publishes it.
        p = subprocess.run([sys.executable, __file__, "--die-mid-update", server.url],
                           env={**os.environ, "E2E_MODEL_DIR": str(base)}, timeout=300)
        checks.expect(p.returncode == -signal.SIGKILL, "the failing trainer was killed mid-update (rc %s)" %
                      p.returncode)
        time.sleep(1.0)
        checks.expect(server.alive() and server.healthy(), "the server survived the dead trainer")
        with trainer_group(server.url) as g:
            # The new trainer's init ended what the dead one left. Every parameter now holds
            # either version 2 or the dead trainer's weights, none anything else (a layer that got
            # part of its tensors keeps its previous weights), and the server serves.
            after = {k.split(":")[-1]: v for k, v in server.weight_checksums().items()}
            old = {k.split(":")[-1]: v for k, v in got[2][1].items()}
            new = processed_checksums(tiny.make_weights(config, 3), bias_dtype)
            odd = sorted(k for k in after if after[k] not in (old.get(k), new.get(k)))
            n_new = sum(1 for k in after if after[k] == new.get(k) != old.get(k))
            n_old = sum(1 for k in after if after[k] == old.get(k) != new.get(k))
            partial = "model.layers.2.self_attn.qkv_proj.bias"
            checks.expect(not odd and n_new > 0 and n_old > 0 and after.get(partial) == old.get(partial),
                          "after the failure: %d parameters new, %d old, none other%s; the half-loaded %s "
                          "kept version 2" % (n_new, n_old, "" if not odd else " (other: %s)" % odd[:4], partial))
            mid = server.complete(PROMPT, GREEDY_TOKENS)
            checks.expect(len(mid.token_ids) == GREEDY_TOKENS, "after the failure the server completes")
            seconds = publish(g, weights[versions[3]], 3)
            figures["updates"][3] = round(seconds, 3)
        got[3] = (server.complete(PROMPT, GREEDY_TOKENS).token_ids, server.weight_checksums())
        print("  version 3 (after the failure) published in %.3f s" % seconds, flush=True)

        # Kill points, one server: a trainer dies after exactly K tensors of an update (seed 3);
        # a new trainer's reset ends it and every parameter must hold one version exactly (the
        # last committed one's or the dead trainer's); then the new trainer publishes a full
        # update (seed 1 again) and every parameter equals it.
        figures["kill_points"] = {}
        t_kp = time.monotonic()
        for k in ([] if args.no_kill_points else kill_points(list(weights[1]))):
            committed = server.weight_checksums()
            p = subprocess.run([sys.executable, __file__, "--die-mid-update", server.url, "--die-after", str(k)],
                               env={**os.environ, "E2E_MODEL_DIR": str(base)}, timeout=300)
            with trainer_group(server.url) as g:
                ok, text = check_one_version(server, config, committed, 3, bias_dtype)
                publish(g, weights[1], 3)
            recovered = server.weight_checksums() == got[3][1]
            figures["kill_points"][k] = text
            checks.expect(p.returncode == -signal.SIGKILL and ok and recovered and server.healthy(),
                          "killed after %d tensors (%s): every parameter one version (%s); the full update "
                          "after it equals v3's checksums: %s" % (k, list(weights[1])[k - 1], text, recovered))
        figures["kill_points_seconds"] = round(time.monotonic() - t_kp, 1)

        # Many senders: a trainer of two ranks, each with half of every tensor's rows, publishes
        # version 4 (seed 2). Sender 0 drives the server (one /update_weights per batch naming
        # every tensor whole); the worker joins both and receives every tensor whole.
        if not args.no_senders:
            addr_file = work / "sender0.addr"
            # First the trainer's rank 1 dies in the middle of version 4: rank 0's update fails
            # naming sender 1, and the server keeps serving; then the trainer restarts (both
            # ranks, new groups) and publishes version 4 into the same server, which was not
            # restarted (below).
            addr_file.unlink(missing_ok=True)
            dying = subprocess.Popen([sys.executable, __file__, "--second-sender", str(addr_file),
                                      "--second-sender-dies"], env={**os.environ, "E2E_MODEL_DIR": str(base)})
            error = ""
            try:
                with wsync.Group(0, group_name=GROUP, store_addr="127.0.0.1:0", transport="ucx", adapter="vllm",
                                 options=sender_options(server.url, 0, addr_file=str(addr_file), timeout_ms=10000),
                                 timeout_ms=300000) as g:
                    publish(g, halves(weights[2], 0), 4)
            except wsync.WsyncError as e:
                error = str(e)
            finally:
                try:
                    dying.wait(300)
                except subprocess.TimeoutExpired:
                    dying.kill()
                    dying.wait()
            checks.expect(dying.returncode == -signal.SIGKILL and "sender 1" in error and server.healthy(),
                          "two senders, rank 1 killed mid-update: rank 0 failed naming it (%s), the server answers" %
                          error[:160])
            addr_file.unlink(missing_ok=True)
            second = subprocess.Popen([sys.executable, __file__, "--second-sender", str(addr_file)],
                                      env={**os.environ, "E2E_MODEL_DIR": str(base)})
            try:
                with wsync.Group(0, group_name=GROUP, store_addr="127.0.0.1:0", transport="ucx", adapter="vllm",
                                 options=sender_options(server.url, 0, addr_file=str(addr_file)),
                                 timeout_ms=300000) as g:
                    seconds = publish(g, halves(weights[2], 0), 4)
                    stats = g.stats()
                rc = second.wait(300)
            finally:
                if second.poll() is None:
                    second.kill()
            versions[4] = 2
            figures["updates"][4] = round(seconds, 3)
            got[4] = (server.complete(PROMPT, GREEDY_TOKENS).token_ids, server.weight_checksums())
            checks.expect(rc == 0 and stats.committed_version == 4 and stats.plans_computed == 2,
                          "two senders (half of every tensor's rows each) committed version 4 in %.3f s: sender 0 "
                          "committed %d with %d plans, sender 1 exited %s" %
                          (seconds, stats.committed_version, stats.plans_computed, rc))
            print("  version 4 (two senders) published in %.3f s" % seconds, flush=True)

    if not args.no_staged:
        staged_run(base, config, work, weights, got, checks, figures)

    # The references: vLLMs started from checkpoints of the same weights.
    expected = {}
    for seed in (1, 2):
        ckpt = tiny.write_checkpoint(base, work / ("checkpoint-seed%d" % seed), weights[seed])
        with VllmServer(ckpt, log_path=work / ("vllm-checkpoint-seed%d.log" % seed)).start(timeout=600) as ref:
            expected[seed] = (ref.complete(PROMPT, GREEDY_TOKENS).token_ids, ref.weight_checksums())

    checks.expect(got["seed0"] != expected[1][0], "seed 0 and seed 1 complete differently (the check can fail)")
    for v, seed in versions.items():
        tokens, sums = got[v]
        want_tokens, want_sums = expected[seed]
        checks.expect(tokens == want_tokens, "v%d: greedy completion equals the seed-%d checkpoint's (%d tokens)" %
                      (v, seed, len(tokens)))
        mismatched = sorted(k for k in want_sums if sums.get(k) != want_sums[k])
        checks.expect(not mismatched and sums.keys() == want_sums.keys(),
                      "v%d: /weight_checker sha256 of all %d parameters equals the checkpoint's%s" %
                      (v, len(want_sums), "" if not mismatched else " (differ: %s)" % mismatched[:4]))
        # Parameters vLLM keeps as loaded (same name, not repacked) must hold the trainer's bytes.
        same = {k.split(":")[-1]: s for k, s in sums.items()}
        compared = [n for n in weights[seed] if n in same and same[n] != hashlib.sha256(b"").hexdigest()]
        bad = [n for n in compared if same[n] != sha256(weights[seed][n])]
        checks.expect(compared and not bad, "v%d: %d parameters read back hold the trainer's sha256%s" %
                      (v, len(compared), "" if not bad else " (differ: %s)" % bad[:4]))
    figures["checks"] = len(checks.rows)
    figures["failed"] = checks.failed
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    print("vllm-e2e: %d checks, %d failed; update seconds %s; %d bytes per update; server start %.1f s" % (
        len(checks.rows), checks.failed, figures["updates"], total_bytes, figures["startup_seconds"]))
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
