#!/usr/bin/env python3
"""Start, query and stop a CPU vLLM 0.32.0 OpenAI server for tests (stdlib only).

The server runs as ``python -m vllm.entrypoints.openai.api_server`` (``vllm
serve`` does not work with the CPU wheel) under the venv's python, in a new
session so that it and the processes it spawns (EngineCore, its Worker, a
multiprocessing resource tracker) can be found and stopped together. Its
stdout and stderr go to one log file per server.

Environment given to the server (each can be overridden through ``env``):
``VLLM_SERVER_DEV_MODE=1`` (the weight-transfer, ``/pause``, ``/weight_checker``
and ``/collective_rpc`` routes exist only then), ``VLLM_CPU_KVCACHE_SPACE=1``
(GiB), ``VLLM_CPU_OMP_THREADS_BIND=0`` (the worker's OpenMP threads on core 0),
and offline switches for Hugging Face and usage stats. Flags: ``--host
127.0.0.1 --port P --enforce-eager --max-model-len 512`` plus ``extra_args``,
e.g. ``["--weight-transfer-config", '{"backend": "wsync"}']``.

The python is ``$WSYNC_VLLM_PYTHON``, else ``$WSYNC_VLLM_VENV/bin/python``,
else ``<repo>/.venv-vllm/bin/python`` (the venv ``scripts/vllm-setup.sh`` makes).

Example::

    with VllmServer(model_dir, log_path="/tmp/a.log") as server:
        print(server.complete("Beautiful is better than").text)
        print(server.weight_checksums())

Command line (start a server, print startup time, memory and one greedy
completion as JSON, stop it)::

    vllm_server.py MODEL_DIR [--port N] [--log FILE] [--prompt TEXT]
                   [--max-tokens N] [-- EXTRA_VLLM_ARGS...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

REPO_ROOT = Path(__file__).resolve().parents[2]

#: Environment every server gets unless the caller overrides a variable.
DEFAULT_ENV = {
    "VLLM_SERVER_DEV_MODE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "0",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "PYTHONUNBUFFERED": "1",
}

#: A logged exception line, e.g. "ValueError: Invalid weight transfer backend: x".
_EXCEPTION_LINE = re.compile(r"\b[A-Za-z_.]*(?:Error|Exception): .*")

#: Prompt used by the smoke command line and as the default of ``complete``.
DEFAULT_PROMPT = "Beautiful is better than"


class ServerError(RuntimeError):
    """The server died, did not become healthy, or answered an HTTP error."""


@dataclass
class Completion:
    """One greedy completion: generated text and token ids, prompt token ids."""

    text: str
    token_ids: list[int]
    prompt_token_ids: list[int]
    finish_reason: str | None
    seconds: float


@dataclass
class ProcessMemory:
    """Memory of one process of the server tree, from /proc (bytes)."""

    pid: int
    name: str
    rss: int
    pss: int


def vllm_python() -> str:
    """The python interpreter that has vLLM installed."""
    if python := os.environ.get("WSYNC_VLLM_PYTHON"):
        return python
    venv = os.environ.get("WSYNC_VLLM_VENV") or str(REPO_ROOT / ".venv-vllm")
    return str(Path(venv) / "bin" / "python")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _ProcStat(NamedTuple):
    """The fields of /proc/PID/stat this module uses."""

    state: str
    ppid: int
    session: int
    start_ticks: int


def _proc_stat(pid: int) -> _ProcStat | None:
    """``/proc/PID/stat`` of ``pid``, None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return _ProcStat(fields[0], int(fields[1]), int(fields[3]), int(fields[19]))


def _same_process(pid: int, stat: _ProcStat | None) -> bool:
    """Whether ``pid`` is still the live (non-zombie) process ``stat`` was read from."""
    now = _proc_stat(pid)
    return (
        stat is not None
        and now is not None
        and now.state != "Z"
        and now.start_ticks == stat.start_ticks
    )


def _all_procs() -> dict[int, _ProcStat]:
    """``_proc_stat`` of every live process."""
    procs = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _proc_stat(int(entry.name))):
            procs[int(entry.name)] = stat
    return procs


def _descendants(root: int) -> list[int]:
    """Pids of all live descendants of ``root`` (from /proc parent links)."""
    children: dict[int, list[int]] = {}
    for pid, stat in _all_procs().items():
        children.setdefault(stat.ppid, []).append(pid)
    found: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _read_kib_field(path: Path, field: str) -> int:
    """A ``Name:  123 kB`` field of a /proc file in bytes (0 if unreadable)."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class VllmServer:
    """One vLLM OpenAI server subprocess serving ``model_dir`` on 127.0.0.1.

    ``start()`` launches it and waits for ``GET /health``; ``stop()`` (also
    run on leaving a ``with`` block) sends SIGTERM and, after ``grace``
    seconds, SIGKILLs whatever is left of the process tree.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        port: int | None = None,
        *,
        log_path: str | os.PathLike[str] | None = None,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        max_model_len: int = 512,
        python: str | None = None,
    ) -> None:
        self.model_dir = str(Path(model_dir).resolve())
        self.port = port if port is not None else free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(
            log_path if log_path is not None else f"/tmp/vllm-server-{self.port}.log"
        )
        self.extra_args = list(extra_args)
        self.env = {**os.environ, **DEFAULT_ENV, **(env or {})}
        self.max_model_len = max_model_len
        self.python = python or vllm_python()
        self.process: subprocess.Popen[bytes] | None = None
        self._session: _ProcStat | None = None  # the API server, leader of its session
        self.startup_seconds: float | None = None

    # ----------------------------------------------------------------- lifecycle

    def command(self) -> list[str]:
        """The server's command line."""
        return [
            self.python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            self.model_dir,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--enforce-eager",
            "--max-model-len",
            str(self.max_model_len),
            *self.extra_args,
        ]

    def start(self, timeout: float = 300.0) -> VllmServer:
        """Launch the server and wait until ``GET /health`` answers 200.

        Raises ``ServerError``, quoting the exceptions found in the log and
        its tail, if the server exits first or is not healthy within
        ``timeout`` seconds; what is left of the server is stopped first.
        """
        if self.process is not None:
            raise ServerError("server already started")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )
        self._session = _proc_stat(self.process.pid)
        deadline = started + timeout
        while True:
            if self.process.poll() is not None:
                code = self.stop()
                raise ServerError(
                    f"vLLM server exited with code {code} before it was healthy"
                    + self._log_report()
                )
            if self.healthy():
                self.startup_seconds = time.monotonic() - started
                return self
            if time.monotonic() > deadline:
                self.stop(grace=5.0)
                raise ServerError(
                    f"vLLM server not healthy after {timeout:.0f}s" + self._log_report()
                )
            time.sleep(0.5)

    def healthy(self) -> bool:
        """Whether ``GET /health`` answers 200 right now."""
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=5) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def alive(self) -> bool:
        """Whether the API server process is still running."""
        return self.process is not None and self.process.poll() is None

    def stop(self, grace: float = 30.0) -> int | None:
        """Stop the server: SIGTERM, then SIGKILL after ``grace`` seconds.

        The API server shuts its EngineCore and Worker down on SIGTERM; any
        process of its tree (or of its session) still alive afterwards
        is killed. Returns the API server's exit code (None if never started).
        """
        if self.process is None:
            return None
        process, self.process = self.process, None
        leader, self._session = self._session, None
        tree = {pid: _proc_stat(pid) for pid in _descendants(process.pid)}
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        # Leftovers: the tree seen before SIGTERM, plus anything started later
        # in the server's session (start_new_session made its pid the sid).
        if leader is not None:
            for pid, stat in _all_procs().items():
                if stat.session == process.pid and stat.start_ticks >= leader.start_ticks:
                    tree.setdefault(pid, stat)
        deadline = time.monotonic() + 5.0
        for pid, stat in tree.items():
            while _same_process(pid, stat) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _same_process(pid, stat):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        return process.returncode

    def __enter__(self) -> VllmServer:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------- diagnostics

    def log_tail(self, lines: int = 60) -> str:
        """The last ``lines`` lines of the server log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as err:
            return f"<no log: {err}>"
        return "\n".join(text.splitlines()[-lines:])

    def log_errors(self, limit: int = 20) -> list[str]:
        """The first ``limit`` distinct exception lines (``SomeError: ...``) of the log.

        vLLM logs the root cause of a failed start (e.g. an unknown weight
        transfer backend in the Worker) far above the log's last lines.
        """
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        found: list[str] = []
        for line in text.splitlines():
            match = _EXCEPTION_LINE.search(line)
            if match and match.group(0) not in found:
                found.append(match.group(0))
                if len(found) == limit:
                    break
        return found

    def _log_report(self) -> str:
        errors = "\n".join(self.log_errors()) or "<none>"
        return (
            f"; log {self.log_path}\nexceptions in the log:\n{errors}\n"
            f"log tail:\n{self.log_tail()}"
        )

    def memory(self) -> list[ProcessMemory]:
        """RSS and PSS of the API server and every process below it."""
        if self.process is None:
            return []
        result = []
        for pid in [self.process.pid, *_descendants(self.process.pid)]:
            proc = Path(f"/proc/{pid}")
            try:
                name = (proc / "comm").read_text().strip()
            except OSError:
                continue
            result.append(
                ProcessMemory(
                    pid=pid,
                    name=name,
                    rss=_read_kib_field(proc / "status", "VmRSS"),
                    pss=_read_kib_field(proc / "smaps_rollup", "Pss"),
                )
            )
        return result

    # -------------------------------------------------------------------- HTTP

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        timeout: float = 120.0,
    ) -> tuple[int, Any]:
        """Send one request; return ``(status, body)`` without raising on 4xx/5xx.

        ``body`` is sent as JSON when not None. The answer is parsed as JSON
        when it is JSON, else returned as text.
        """
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"} if data is not None else {},
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as err:
            status, raw = err.code, err.read()
        text = raw.decode(errors="replace")
        try:
            return status, json.loads(text)
        except json.JSONDecodeError:
            return status, text

    def post(self, path: str, body: Any = None, timeout: float = 120.0) -> Any:
        """POST ``body`` as JSON; return the parsed answer, raise ServerError on non-2xx."""
        status, answer = self.request("POST", path, {} if body is None else body, timeout)
        if not 200 <= status < 300:
            raise ServerError(f"POST {path} -> HTTP {status}: {answer}")
        return answer

    def get(self, path: str, timeout: float = 60.0) -> Any:
        """GET ``path``; return the parsed answer, raise ServerError on non-2xx."""
        status, answer = self.request("GET", path, None, timeout)
        if not 200 <= status < 300:
            raise ServerError(f"GET {path} -> HTTP {status}: {answer}")
        return answer

    def complete(
        self, prompt: str = DEFAULT_PROMPT, max_tokens: int = 16, timeout: float = 120.0
    ) -> Completion:
        """A greedy completion (temperature 0, exactly ``max_tokens`` tokens).

        Uses vLLM's ``return_token_ids`` extension, so the token ids of the
        prompt and of the output come back with the text.
        """
        body = {
            "model": self.model_dir,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "min_tokens": max_tokens,
            "temperature": 0.0,
            "return_token_ids": True,
        }
        started = time.monotonic()
        answer = self.post("/v1/completions", body, timeout)
        seconds = time.monotonic() - started
        choice = answer["choices"][0]
        return Completion(
            text=choice["text"],
            token_ids=list(choice.get("token_ids") or []),
            prompt_token_ids=list(choice.get("prompt_token_ids") or []),
            finish_reason=choice.get("finish_reason"),
            seconds=seconds,
        )

    def weight_checksums(self) -> dict[str, str]:
        """``POST /weight_checker {"action": "checksum"}``: sha256 per parameter.

        Keys are vLLM parameter names prefixed with the worker's rank, e.g.
        ``dp0:pp0:pcp0:tp0:model.layers.0.self_attn.qkv_proj.bias``.
        """
        return self.post("/weight_checker", {"action": "checksum"})["checksums"]


def _smoke(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Start a vLLM server, time it, run one greedy completion, stop it."
    )
    parser.add_argument("model_dir")
    parser.add_argument("--port", type=int)
    parser.add_argument("--log")
    parser.add_argument("--prompt", default=DEFAULT_PROMPT)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("extra_args", nargs="*", help="after --: extra vLLM flags")
    args = parser.parse_args(list(argv) if argv is not None else None)
    server = VllmServer(
        args.model_dir, args.port, log_path=args.log, extra_args=args.extra_args
    )
    with server:
        memory = server.memory()
        first = server.complete(args.prompt, args.max_tokens)
        second = server.complete(args.prompt, args.max_tokens)
        report = {
            "url": server.url,
            "log": str(server.log_path),
            "startup_seconds": round(server.startup_seconds or 0.0, 2),
            "processes": [vars(m) for m in memory],
            "rss_total_mib": round(sum(m.rss for m in memory) / 2**20, 1),
            "pss_total_mib": round(sum(m.pss for m in memory) / 2**20, 1),
            "first_completion_seconds": round(first.seconds, 3),
            "completion_seconds": round(second.seconds, 3),
            "text": second.text,
            "token_ids": second.token_ids,
            "deterministic": first.token_ids == second.token_ids,
            "checksummed_parameters": len(server.weight_checksums()),
        }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(_smoke())
