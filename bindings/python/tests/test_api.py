"""The binding over the C ABI: statuses, errors, tensors in, events out, lifetimes, async, logs."""
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import wsync
from wsync import errors
from conftest import TIMEOUT_MS, ReceiverThread, Trainer, digest, read_addr


def test_every_status_maps_to_its_exception():
    names = {}
    for status in range(1, 16):
        e = errors.error_for(status, "detail")
        assert type(e) is not wsync.WsyncError, status
        assert e.status == status
        assert e.status_name == wsync.status_name(status)
        assert str(e) == "%s: detail" % e.status_name
        names[e.status_name] = type(e).__name__
    # The class name is the status name in CamelCase: WSYNC_ERR_PEER_FAILED -> PeerFailedError.
    for sname, cname in names.items():
        camel = "".join(p.capitalize() for p in sname[len("WSYNC_ERR_"):].split("_"))
        assert cname.lower() == (camel + "Error").lower().replace("ioerror", "ioerror"), (sname, cname)
    unknown = errors.error_for(77, "from a newer library")
    assert type(unknown) is wsync.WsyncError and unknown.status == 77
    assert unknown.status_name == "WSYNC_ERR_UNKNOWN"
    assert issubclass(wsync.TimeoutError, TimeoutError)


def test_a_bad_option_raises_invalid_argument_naming_it():
    with pytest.raises(wsync.InvalidArgumentError) as e:
        wsync.Group(1, options={"no_such_option": "1"}, timeout_ms=1000)
    assert e.value.status == 1 and "no_such_option" in e.value.message


def test_a_missing_plugin_raises_not_found_naming_it():
    with pytest.raises(wsync.NotFoundError) as e:
        wsync.Group(1, transport="no_such_transport", timeout_ms=1000)
    assert "no_such_transport" in e.value.message


def test_a_store_nobody_hosts_times_out():
    with pytest.raises((wsync.TimeoutError, wsync.PeerFailedError, wsync.IOError)) as e:
        wsync.Receiver(1, "127.0.0.1:9", timeout_ms=300)
    assert "127.0.0.1:9" in e.value.message


def test_version_and_plugins():
    assert wsync.abi_version()[0] == 1
    names = {(p["kind"], p["name"]) for p in wsync.list_plugins()}
    assert ("transport", "ucx") in names and ("adapter", "native") in names
    assert wsync.plugin_dirs()


def _model(seed):
    rng = np.random.default_rng(seed)
    return {
        "embed.weight": rng.standard_normal((64, 32), dtype=np.float32),
        "layer.0.bias": rng.standard_normal(32).astype(np.float64),
        "layer.0.steps": rng.integers(0, 1 << 40, size=(3, 5), dtype=np.int64),
        "mask": rng.integers(0, 2, size=17).astype(np.bool_),
        "bytes": rng.integers(0, 255, size=1000, dtype=np.uint8),
        "scalar": np.array(3.5, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }


def test_numpy_round_trip_three_versions(tmp_path):
    tr = Trainer(tmp_path, num_receivers=2)
    rxs = [ReceiverThread(tr.addr_file, rank=r) for r in (1, 2)]
    for r in rxs:
        r.start()
    with tr.group({"bucket_bytes": "8192"}) as g:
        for v in (1, 2, 3):
            m = _model(v)
            g.send({k: m[k] for k in list(m)[:3]})
            g.send({k: m[k] for k in list(m)[3:]})
            g.finalize(v)
            want = {k: digest(x) for k, x in m.items()}
            for r in rxs:
                assert r.committed[v] == want
        s = g.stats()
        assert s.committed_version == 3 and s.updates == 3 and s.tensors == 21 and s.num_receivers == 2
    for r in rxs:
        r.join(10)
        assert r.error is None and r.events[-1] == wsync.EventKind.CLOSED


def test_a_declared_update_takes_only_its_tensors_and_is_sent_whole(tmp_path):
    """Group.declare (ABI 1.6): arrays, (dtype name, shape) pairs; an undeclared tensor or another
    shape is refused naming it, a finalize with declared tensors unsent too, the group usable."""
    tr = Trainer(tmp_path, num_receivers=1)
    rx = ReceiverThread(tr.addr_file, rank=1)
    rx.start()
    m = _model(1)
    with tr.group({"bucket_bytes": "8192"}) as g:
        decl = dict(m)
        decl["embed.weight"] = ("float32", (64, 32))  # a pair: no tensor needed
        g.declare(decl)
        with pytest.raises(errors.InvalidArgumentError, match="'other' is not in the update declared"):
            g.send({"other": m["mask"]})
        with pytest.raises(errors.InvalidArgumentError, match="'embed.weight' is sent as float32 \\[32, 64\\] but "
                                                               "was declared float32 \\[64, 32\\]"):
            g.send({"embed.weight": np.ascontiguousarray(m["embed.weight"].T)})
        g.send({k: m[k] for k in list(m)[:3]})
        with pytest.raises(errors.InvalidArgumentError, match="4 declared tensor\\(s\\) were not sent"):
            g.finalize(1)
        g.send({k: m[k] for k in list(m)[3:]})
        g.finalize(1)
        assert rx.committed[1] == {k: digest(x) for k, x in m.items()}
        with pytest.raises(errors.InvalidArgumentError, match="has no dtype and shape"):
            g.declare({"x": object()})
    rx.join(10)
    assert rx.error is None


def test_non_contiguous_is_refused_with_its_name(trainer):
    a = np.zeros((4, 6), dtype=np.float32).T
    with pytest.raises(wsync.InvalidArgumentError) as e:
        wsync._tensors.Descriptors({"transposed.weight": a})
    assert "transposed.weight" in e.value.message and "contiguous" in e.value.message
    with pytest.raises(wsync.InvalidArgumentError) as e:
        wsync._tensors.Descriptors({"obj": object()})
    assert "'obj'" in e.value.message
    with pytest.raises(wsync.InvalidArgumentError) as e:
        wsync._tensors.Descriptors({"c": np.zeros(3, dtype=np.complex64)})
    assert "complex64" in e.value.message


class OnlyDlpack:
    """Something that speaks nothing but DLPack."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_producers_go_in_as_they_are(tmp_path):
    tr = Trainer(tmp_path)
    r = ReceiverThread(tr.addr_file)
    r.start()
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    d = wsync._tensors.Descriptors({"x": OnlyDlpack(a)})
    assert d.array[0].data == a.__array_interface__["data"][0] and d.array[0].nbytes == 96
    with pytest.raises(wsync.InvalidArgumentError, match="'strided'.*contiguous"):
        wsync._tensors.Descriptors({"strided": OnlyDlpack(a[:, :, ::2])})
    with tr.group() as g:
        g.send({"x": OnlyDlpack(a)})
        g.finalize(1)
    r.join(10)
    assert r.error is None and r.committed[1] == {"x": digest(a)}


def test_views_expire_at_the_next_event(tmp_path):
    tr = Trainer(tmp_path)
    kept = {}

    def on_event(rx, ev):
        if ev.kind == wsync.EventKind.BUCKET:
            v = ev.tensors[0]
            kept["view"], kept["copy"], kept["before"] = v, v.copy(), v.valid
        elif ev.kind == wsync.EventKind.COMMIT:
            kept["after"] = kept["view"].valid
            for fn in (kept["view"].numpy, kept["view"].copy):
                try:
                    fn()
                    kept["raised"] = False
                except wsync.InvalidStateError as e:
                    kept["raised"] = "expired" in e.message and "'w'" in e.message
            rx.commit(ev.version)

    r = ReceiverThread(tr.addr_file, on_event=on_event)
    r.start()
    w = np.arange(10, dtype=np.float32)
    with tr.group() as g:
        g.send({"w": w})
        g.finalize(1)
    r.join(10)
    assert r.error is None
    assert kept["before"] is True and kept["after"] is False and kept["raised"] is True
    assert np.array_equal(np.asarray(kept["copy"]), w)


def test_placed_numpy_buffers_hold_the_bytes(tmp_path):
    tr = Trainer(tmp_path)
    buf = np.zeros((64, 32), dtype=np.float32)
    ptr = buf.__array_interface__["data"][0]
    placed = []

    def on_event(rx, ev):
        if ev.kind == wsync.EventKind.BUCKET:
            placed.extend((t.name, t.placed, t.numpy() is buf) for t in ev.tensors)
        elif ev.kind == wsync.EventKind.COMMIT:
            rx.commit(ev.version)

    r = ReceiverThread(tr.addr_file, register={"embed.weight": buf}, on_event=on_event)
    r.start()
    m = _model(7)
    with tr.group() as g:
        g.send({"embed.weight": m["embed.weight"], "scalar": m["scalar"]})
        g.finalize(1)
    r.join(10)
    assert r.error is None
    assert ("embed.weight", True, True) in placed and ("scalar", False, False) in placed
    assert buf.__array_interface__["data"][0] == ptr and np.array_equal(buf, m["embed.weight"])


@pytest.mark.parametrize("mode", ["staged", "in_place"])
def test_receive_modes_and_the_state_after_an_abandoned_update(tmp_path, mode):
    """Version 1 commits; version 2 is abandoned (the group closed mid-update). Staged, the buffer
    holds version 1 until commit and through the failure; in place, the state says MIXED."""
    tr = Trainer(tmp_path)
    buf = np.zeros(256, dtype=np.float32)
    seen = []

    def on_event(rx, ev):
        if ev.kind == wsync.EventKind.BUCKET:
            assert all(t.placed and t.staged == (mode == "staged") for t in ev.tensors)
        if ev.kind == wsync.EventKind.COMMIT:
            seen.append(("event", rx.state(), buf.copy()))
            rx.commit(ev.version)
            seen.append(("commit", rx.state(), buf.copy()))
        if ev.kind in (wsync.EventKind.ABORTED, wsync.EventKind.CLOSED) and len(seen) == 2:
            seen.append(("abandoned", rx.state(), buf.copy()))

    r = ReceiverThread(tr.addr_file, register={"w": buf}, on_event=on_event, options={"receive_mode": mode})
    r.start()
    v1, v2 = np.full(256, 1.5, dtype=np.float32), np.full(256, 2.5, dtype=np.float32)
    with tr.group() as g:
        g.send({"w": v1})
        g.finalize(1)
        g.send({"w": v2})  # never finalized
    r.join(10)
    assert r.error is None, r.error
    (_, at_event, b_event), (_, after, b_after), (_, abandoned, b_abandoned) = seen
    staged = mode == "staged"
    assert at_event.receive_mode == (wsync.ReceiveMode.STAGED if staged else wsync.ReceiveMode.IN_PLACE)
    assert at_event.pending_version == 1 and at_event.touched == ["w"]
    assert at_event.buffers == (wsync.Buffers.CLEAN if staged else wsync.Buffers.MIXED)
    assert np.array_equal(b_event, np.zeros(256, dtype=np.float32) if staged else v1)
    assert at_event.staged_bytes == (buf.nbytes if staged else 0)
    assert after.buffers == wsync.Buffers.CLEAN and after.committed_version == 1 and after.touched == []
    assert np.array_equal(b_after, v1)
    assert abandoned.committed_version == 1
    if staged:
        assert abandoned.buffers == wsync.Buffers.CLEAN and abandoned.touched == []
        assert np.array_equal(b_abandoned, v1)
    else:
        assert abandoned.buffers == wsync.Buffers.MIXED and abandoned.touched == ["w"]
        assert np.array_equal(b_abandoned, v2)


def test_a_registration_mismatch_is_refused_naming_the_tensor(tmp_path):
    tr = Trainer(tmp_path)
    r = ReceiverThread(tr.addr_file, register={"w": np.zeros(8, dtype=np.float32)})
    r.start()
    with tr.group() as g:
        with pytest.raises(wsync.WsyncError) as e:
            g.send({"w": np.zeros(9, dtype=np.float32)})
        assert "'w'" in e.value.message or "w" in e.value.message.split()
    r.join(10)


KILLED_RECEIVER = textwrap.dedent("""
    import os, signal, sys, time
    sys.path.insert(0, %r)
    import wsync
    from conftest import read_addr
    rx = wsync.Receiver(1, read_addr(sys.argv[1]), group_name="pytest", timeout_ms=20000)
    while True:
        ev = rx.next(20000)
        if ev.kind == wsync.EventKind.BUCKET:
            os.kill(os.getpid(), signal.SIGKILL)   # dies in the middle of the update
""")


def test_a_receiver_killed_mid_update_gives_a_named_error(tmp_path):
    tr = Trainer(tmp_path)
    script = tmp_path / "victim.py"
    script.write_text(KILLED_RECEIVER % os.path.dirname(__file__))
    p = subprocess.Popen([sys.executable, str(script), tr.addr_file], env=dict(os.environ))
    try:
        with tr.group({"bucket_bytes": "4096"}) as g:
            m = {"t%d" % i: np.full(1024, i, dtype=np.float32) for i in range(8)}
            t0 = time.time()
            with pytest.raises(wsync.PeerFailedError) as e:
                g.send(m)
                g.send({"late": np.zeros(4, dtype=np.float32)})
                g.finalize(1)
            assert time.time() - t0 < TIMEOUT_MS / 1000
            assert "rank 1" in e.value.message, e.value.message
            with pytest.raises(wsync.WsyncError):  # the group is broken after a failure
                g.finalize(1)
    finally:
        p.wait(10)
    assert p.returncode == -signal.SIGKILL


def test_abort_from_another_thread_stops_a_blocked_send(tmp_path):
    tr = Trainer(tmp_path)
    gate = threading.Event()

    def on_event(rx, ev):  # never applies the second bucket: the sender waits for its READY
        gate.wait(30)

    r = ReceiverThread(tr.addr_file, on_event=on_event)
    r.start()
    with tr.group({"bucket_bytes": "4096"}) as g:
        threading.Timer(0.5, g.abort).start()
        t0 = time.time()
        with pytest.raises(wsync.AbortedError):
            g.send({"t%d" % i: np.zeros(1024, dtype=np.float32) for i in range(6)}, timeout_ms=20000)
        assert time.time() - t0 < 5
        g.abort()  # idempotent
    gate.set()
    r.join(10)


def test_async_send_overlaps_with_producing_the_next_batch(tmp_path):
    # Deterministic, not timed: the receiver holds the first bucket of update 2 until the
    # trainer has produced its next batch in Python. That can only finish if send_async
    # returned while the batch was still moving and the send runs without the GIL.
    tr = Trainer(tmp_path)
    gate, held = threading.Event(), threading.Event()
    seen = {"commits": 0}

    def on_event(rx, ev):
        if ev.kind == wsync.EventKind.BUCKET and seen["commits"] == 1 and not held.is_set():
            held.set()
            gate.wait(20)
        elif ev.kind == wsync.EventKind.COMMIT:
            seen["commits"] += 1
            rx.commit(ev.version)

    r = ReceiverThread(tr.addr_file, on_event=on_event)
    r.start()
    batch = {"w%d" % i: np.ones(4 << 20, dtype=np.float32) for i in range(8)}  # 128 MiB
    with tr.group({"bucket_bytes": str(16 << 20)}) as g:
        g.send(batch)
        g.finalize(1)
        h = g.send_async(batch)
        assert held.wait(20), "the receiver never saw update 2's first bucket"
        # "Produce the next batch" in Python while update 2 is held mid-flight.
        nxt = {k: v * 2.0 for k, v in batch.items()}
        produced = sum(int(len(v)) for v in nxt.values())
        still_in_flight = not h.done()
        gate.set()
        h.wait()
        assert h.done()
        g.finalize(2)
    r.join(10)
    assert r.error is None, r.error
    assert produced == 8 * (4 << 20)
    assert still_in_flight, "the batch was delivered before its receiver released a bucket"
    assert seen["commits"] == 2


def test_send_handle_keeps_tensors_alive_until_delivered(tmp_path):
    import gc
    import weakref
    tr = Trainer(tmp_path)
    r = ReceiverThread(tr.addr_file)
    r.start()
    with tr.group() as g:
        x = OnlyDlpack(np.arange(100, dtype=np.float32))
        alive = weakref.ref(x)
        h = g.send_async({"w": x})
        del x  # the caller's reference is gone: wsync's keeps the tensor
        gc.collect()
        assert alive() is not None
        ticket = h.ticket
        del h  # even without the handle, the group keeps it until delivered
        gc.collect()
        assert alive() is not None and ticket in g._inflight
        g._inflight[ticket].wait()
        gc.collect()
        assert alive() is None and ticket not in g._inflight  # released once delivered
        with pytest.raises(wsync.InvalidArgumentError):
            wsync.check(wsync.lib.wsync_group_send_wait(g._handle, 999, 0))
        g.finalize(1)
    r.join(10)
    assert r.committed[1] == {"w": digest(np.arange(100, dtype=np.float32))}


def test_read_only_big_endian_and_bad_versions_are_refused(tmp_path):
    ro = np.frombuffer(bytes(16), dtype=np.float32)
    wsync._tensors.Descriptors({"ro": ro})  # sending reads it: fine
    with pytest.raises(wsync.InvalidArgumentError, match="'ro'.*read-only"):
        wsync._tensors.Descriptors({"ro": ro}, writable=True)
    with pytest.raises(wsync.InvalidArgumentError, match="'be'.*byte order"):
        wsync._tensors.Descriptors({"be": np.arange(4, dtype=">f4")})
    tr = Trainer(tmp_path)
    seen = {}

    def on_event(rx, ev):
        if ev.kind == wsync.EventKind.COMMIT:
            for bad in (-1, 0, 1 << 64, 1.0, True):
                try:
                    rx.commit(bad)
                    seen[bad] = "accepted"
                except wsync.InvalidArgumentError:
                    seen[bad] = "refused"
            rx.commit(ev.version)

    r = ReceiverThread(tr.addr_file, on_event=on_event)
    r.start()
    with tr.group() as g:
        g.send({"w": np.zeros(4, dtype=np.float32)})
        for bad in (-1, 0, 1 << 64, 2.0, True):
            with pytest.raises(wsync.InvalidArgumentError, match="version"):
                g.finalize(bad)
        g.finalize(1)  # the group is still usable: nothing was wrapped into a huge version
        assert g.stats().committed_version == 1
    r.join(10)
    assert r.error is None and set(seen.values()) == {"refused"}


def test_closed_objects_raise_invalid_state(tmp_path):
    tr = Trainer(tmp_path)
    r = ReceiverThread(tr.addr_file)
    r.start()
    g = tr.group()
    r.ready.wait(10)
    rx = r.rx
    g.close()
    g.close()
    with pytest.raises(wsync.InvalidStateError):
        g.finalize(1)
    r.join(10)
    assert r.events[-1] == wsync.EventKind.CLOSED
    for call in (lambda: rx.next(0), lambda: rx.commit(1), lambda: rx.register({"w": np.zeros(1)}),
                 lambda: rx.committed_version):
        with pytest.raises(wsync.InvalidStateError, match="closed"):
            call()
    rx.close()  # idempotent


def test_log_lines_reach_python_logging(tmp_path, caplog):
    tr = Trainer(tmp_path)
    wsync.route_logs(logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG, logger="wsync"):
            r = ReceiverThread(tr.addr_file)
            r.start()
            with tr.group() as g:
                g.send({"w": np.zeros(4, dtype=np.float32)})
                g.finalize(1)
            r.join(10)
    finally:
        wsync.route_logs()
    records = [rec for rec in caplog.records if rec.name == "wsync"]
    assert records, "no wsync log line reached logging"
    assert all(isinstance(rec.getMessage(), str) for rec in records)


def test_wsync_log_level_chooses_the_routed_level(monkeypatch):
    from wsync import _log
    for text, want in (("debug", logging.DEBUG), ("4", logging.DEBUG), ("error", logging.ERROR),
                       ("trace", logging.DEBUG - 5), ("", logging.INFO), ("bogus", logging.INFO)):
        monkeypatch.setenv("WSYNC_LOG_LEVEL", text)
        assert _log.env_level() == want, text


def test_no_wait_polls_and_the_receiver_stays_usable(tmp_path):
    """wsync.h's one timeout rule: NO_WAIT makes next() answer TimeoutError at once (the receiver
    stays usable), TIMEOUT_DEFAULT is its timeout_ms option; send() and finalize() cannot skip the
    wait for a receiver, so NO_WAIT there is the default."""
    from conftest import read_addr
    tr = Trainer(tmp_path)
    seen = {"kinds": []}
    polled = threading.Event()  # the trainer sends only after the poll (else the poll may find the bucket)

    def receive():
        try:
            with wsync.Receiver(1, read_addr(tr.addr_file), group_name=tr.group_name, timeout_ms=TIMEOUT_MS) as rx:
                t0 = time.monotonic()
                try:
                    seen["kinds"].append(rx.next(wsync.NO_WAIT).kind)  # an event here fails the test below
                except wsync.TimeoutError:
                    seen["polled_s"] = time.monotonic() - t0
                polled.set()
                while True:
                    ev = rx.next(wsync.TIMEOUT_DEFAULT)
                    seen["kinds"].append(ev.kind)
                    if ev.kind == wsync.EventKind.COMMIT:
                        rx.commit(ev.version)
                    if ev.kind == wsync.EventKind.CLOSED:
                        return
        except Exception as e:  # reported below
            seen["error"] = e

    t = threading.Thread(target=receive, daemon=True)
    t.start()
    with tr.group() as g:
        assert polled.wait(20)
        g.send({"w": np.arange(10, dtype=np.float32)}, timeout_ms=wsync.NO_WAIT)
        g.finalize(1, timeout_ms=wsync.TIMEOUT_DEFAULT)
    t.join(10)
    assert "error" not in seen, seen.get("error")
    assert seen.get("polled_s", 99) < 1.0, seen
    assert seen["kinds"][0] == wsync.EventKind.BUCKET and wsync.EventKind.COMMIT in seen["kinds"], seen
    assert seen["kinds"][-1] == wsync.EventKind.CLOSED, seen


def test_the_dtype_table_is_the_librarys_and_torchs():
    """One dtype table: the binding reads wsync.h's table through the library, and every name is
    torch's attribute of the same item size."""
    from wsync import _tensors
    assert len(_tensors.DTYPES) == 12
    for name, code in _tensors.DTYPES.items():
        assert wsync.lib.wsync_dtype_name(code).decode() == name
        assert _tensors.ITEMSIZE[code] == wsync.lib.wsync_dtype_size(code)
    torch = pytest.importorskip("torch")
    for name, code in _tensors.DTYPES.items():
        assert getattr(torch, name).itemsize == _tensors.ITEMSIZE[code], name


def test_elastic_membership_removes_a_receiver_that_left_and_commits_on_the_quorum(tmp_path):
    """membership=elastic, commit_quorum=1: rank 2 leaves (closes) before the first update; the group
    removes it between updates, names it in a member event, and both updates commit on rank 1."""
    tr = Trainer(tmp_path, num_receivers=2)
    stays = ReceiverThread(tr.addr_file, rank=1)

    group_up = threading.Event()

    def join_and_leave():  # as a crashed engine: its connection ends before the first update
        with wsync.Receiver(2, read_addr(tr.addr_file), group_name=tr.group_name, timeout_ms=TIMEOUT_MS):
            group_up.wait(20)

    leaves = threading.Thread(target=join_and_leave, daemon=True)
    stays.start()
    leaves.start()
    with tr.group({"membership": "elastic", "commit_quorum": "1", "timeout_ms": "5000"}) as g:
        group_up.set()
        leaves.join(20)
        for _ in range(200):  # the group notices the closed connection between updates
            if g.members() == [1]:
                break
            time.sleep(0.05)
        assert g.members() == [1]
        for version in (1, 2):
            g.send({"w": np.full(4096, version, dtype=np.float32)})
            g.finalize(version)
        events = g.member_events()
        assert [(e.kind, e.rank, e.update) for e in events] == [("left", 2, 1)], events
        assert events[0].status == "WSYNC_ERR_PEER_FAILED" and "receiver rank 2" in events[0].reason, events
        assert g.members() == [1] and g.member_events() == []
        s = g.stats()
        assert (s.committed_version, s.members, s.members_left) == (2, 1, 1)
    stays.join(20)
    assert stays.error is None and sorted(stays.committed) == [1, 2]


def test_elastic_membership_lets_a_receiver_that_starts_late_join_between_updates(tmp_path):
    """init_receivers=1 of 2: init returns with rank 1; rank 2 starts after version 1, joins while
    the group is idle (a "joined" member event), and commits version 2 with rank 1."""
    tr = Trainer(tmp_path, num_receivers=2)
    first = ReceiverThread(tr.addr_file, rank=1)
    first.start()
    with tr.group({"membership": "elastic", "init_receivers": "1", "timeout_ms": "5000"}) as g:
        assert g.members() == [1]
        g.send({"w": np.full(4096, 1, dtype=np.float32)})
        g.finalize(1)
        late = ReceiverThread(tr.addr_file, rank=2)
        late.start()
        for _ in range(200):
            if g.members() == [1, 2]:
                break
            time.sleep(0.05)
        assert g.members() == [1, 2]
        events = g.member_events()
        assert [(e.kind, e.rank, e.status, e.update) for e in events] == [("joined", 2, "WSYNC_OK", 2)], events
        assert "receiver rank 2" in events[0].reason, events
        g.send({"w": np.full(4096, 2, dtype=np.float32)})
        g.finalize(2)
        s = g.stats()
        assert (s.committed_version, s.members, s.members_left) == (2, 2, 0)
    first.join(20)
    late.join(20)
    assert first.error is None and sorted(first.committed) == [1, 2]
    assert late.error is None and sorted(late.committed) == [2]
    assert late.committed[2] == first.committed[2]


def test_elastic_group_assigns_a_rank_and_a_late_receiver_catches_up_from_a_peer(tmp_path):
    """Receiver(rank=0) asks an elastic group for the lowest free rank. The late one (rank 2) takes
    version 1 from rank 1 (catch-up: a COMMIT before any bucket, into its registered array), then
    version 2 from the trainer."""
    tr = Trainer(tmp_path, num_receivers=2)
    w1, w2 = np.zeros(4096, dtype=np.float32), np.zeros(4096, dtype=np.float32)
    first = ReceiverThread(tr.addr_file, rank=0, register={"w": w1})
    first.start()
    with tr.group({"membership": "elastic", "init_receivers": "1", "timeout_ms": "5000"}) as g:
        g.send({"w": np.full(4096, 1, dtype=np.float32)})
        g.finalize(1)
        late = ReceiverThread(tr.addr_file, rank=0, register={"w": w2})
        late.start()
        for _ in range(200):
            if g.members() == [1, 2] and 1 in late.committed:
                break
            time.sleep(0.05)
        assert g.members() == [1, 2] and late.committed.get(1) == {}, (g.members(), late.committed, late.error)
        assert (first.rx.rank, late.rx.rank) == (1, 2)
        s = late.rx.state()
        assert (s.rank, s.rank_assigned, s.committed_version) == (2, True, 1), s
        assert np.array_equal(w2, np.full(4096, 1, dtype=np.float32)), "version 1 did not come from rank 1"
        events = g.member_events()
        assert "catches up to version 1 from receiver rank 1" in events[0].reason, events
        g.send({"w": np.full(4096, 2, dtype=np.float32)})
        g.finalize(2)
    first.join(20)
    late.join(20)
    assert first.error is None and late.error is None, (first.error, late.error)
    assert sorted(late.committed) == [1, 2] and np.array_equal(w2, np.full(4096, 2, dtype=np.float32))
