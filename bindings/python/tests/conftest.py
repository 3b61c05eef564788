"""Helpers shared by the binding's tests: a trainer (Group) and receivers in threads or processes,
meeting over a real store on loopback (port 0, address passed through a file)."""
import hashlib
import os
import pathlib
import threading
import time

import pytest

os.environ.setdefault("WSYNC_LOG_LEVEL", "warn")  # read when wsync is imported
import wsync  # noqa: E402

TIMEOUT_MS = 20000


def digest(x):
    """sha256 of a tensor's or array's bytes."""
    if hasattr(x, "detach"):
        import torch
        x = x.detach().cpu().contiguous().view(torch.uint8).numpy()
    return hashlib.sha256(x.tobytes() if hasattr(x, "tobytes") else bytes(x)).hexdigest()


def read_addr(path, timeout_s=20.0):
    until = time.time() + timeout_s
    while time.time() < until:
        try:
            text = pathlib.Path(path).read_text().strip()
            if text:
                return text
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    raise RuntimeError("no store address in %s" % path)


class Trainer:
    """Runs `wsync.Group(...)` in the calling thread after starting receivers."""

    def __init__(self, tmp_path, num_receivers=1, group_name="pytest", **kw):
        self.addr_file = str(tmp_path / ("store-%s" % group_name))
        self.num_receivers = num_receivers
        self.group_name = group_name
        self.kw = kw

    def group(self, options=None):
        opts = {"store_addr_file": self.addr_file}
        opts.update(options or {})
        return wsync.Group(self.num_receivers, group_name=self.group_name, store_addr="127.0.0.1:0",
                           transport=self.kw.get("transport", "ucx"), options=opts, timeout_ms=TIMEOUT_MS)


class ReceiverThread(threading.Thread):
    """A receiver in a thread: applies every event with `on_event(rx, ev)` (default: records the
    sha256 of every tensor per update and commits), until CLOSED or an error (kept in .error)."""

    def __init__(self, addr_file, rank=1, group_name="pytest", register=None, on_event=None, options=None):
        super().__init__(daemon=True)
        self.addr_file, self.rank, self.group_name, self.options = addr_file, rank, group_name, options
        self.register, self.on_event = register, on_event
        self.pending, self.committed, self.error, self.events = {}, {}, None, []
        self.ready = threading.Event()

    def default(self, rx, ev):
        if ev.kind == wsync.EventKind.BUCKET:
            for t in ev.tensors:
                self.pending[t.name] = digest(t.numpy())
        elif ev.kind == wsync.EventKind.COMMIT:
            self.committed[ev.version] = dict(self.pending)
            self.pending = {}
            rx.commit(ev.version)

    def run(self):
        try:
            addr = read_addr(self.addr_file)
            with wsync.Receiver(self.rank, addr, group_name=self.group_name, options=self.options,
                                timeout_ms=TIMEOUT_MS) as rx:
                self.rx = rx
                if self.register is not None:
                    rx.register(self.register)
                self.ready.set()
                for ev in rx.events(TIMEOUT_MS):
                    self.events.append(ev.kind)
                    (self.on_event or self.default)(rx, ev)
        except Exception as e:  # reported by the test
            self.error = e
        finally:
            self.ready.set()


@pytest.fixture
def trainer(tmp_path):
    return Trainer(tmp_path)


def pytest_report_header(config):
    return "wsync %s from %s" % (wsync.__version__, wsync.library_path)

