"""python -m wsync info/doctor, wsync.info(), and bytes-like objects as tensors (what lets a program
with neither torch nor numpy move bytes)."""
import array
import json
import subprocess
import sys

import pytest

import wsync


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "wsync", *args], capture_output=True, text=True, timeout=120)


def test_info_as_dict_text_and_json():
    facts = wsync.info()
    assert facts["version"] == wsync.__version__
    assert facts["library"] == str(wsync.library_path)
    ucx = [p for p in facts["plugins"] if p["kind"] == "transport" and p["name"] == "ucx"]
    assert ucx and ucx[0]["status"] == "WSYNC_OK"
    # The UCX plugin says what UCX sees: its version and at least TCP on loopback.
    assert ucx[0]["detail"].startswith("UCX 1.") and "tcp/lo" in ucx[0]["detail"], ucx[0]["detail"]
    text = run_cli("info")
    assert text.returncode == 0, text.stderr
    assert "wsync %s, ABI %s" % (facts["version"], facts["abi"]) in text.stdout
    assert "transport ucx %s: loads" % facts["version"] in text.stdout
    js = run_cli("info", "--json")
    assert js.returncode == 0, js.stderr
    assert json.loads(js.stdout)["library"] == facts["library"]


def test_doctor_moves_bytes_and_says_why_gpu_transports_are_not_usable():
    r = run_cli("doctor", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    checks = {c["check"]: c for c in report["checks"]}
    assert report["ok"] and checks["library loads"]["ok"]
    loop = checks["loopback transfer over UCX"]
    assert loop["ok"] and "verified byte for byte" in loop["detail"] and "MiB/s" in loop["detail"], loop
    for name in ("cuda_ipc", "nccl"):
        c = checks["CUDA transport %s" % name]
        assert not c["fatal"]
        assert c["detail"], c  # usable, or the reason (no device, no library, not built)
    text = run_cli("doctor")
    assert text.returncode == 0 and "this machine can use wsync" in text.stdout, text.stdout + text.stderr


def test_bad_command_line_is_refused():
    r = run_cli("fix-everything")
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_bytes_like_objects_go_in_as_uint8():
    ba = bytearray(b"\x01" * 10)
    d = wsync._tensors.Descriptors({"a": ba, "b": b"xyz", "c": array.array("f", [1.0, 2.0]),
                                    "d": memoryview(bytearray(6))})
    arr, n = d.tensors()
    assert n == 4
    assert [arr[i].nbytes for i in range(4)] == [10, 3, 8, 6]
    assert all(arr[i].dtype == wsync._tensors.DTYPES["uint8"] and arr[i].ndim == 1 for i in range(4))
    with pytest.raises(wsync.InvalidArgumentError, match="tensor 'ro': a read-only bytes"):
        wsync._tensors.Descriptors({"ro": b"abc"}, writable=True)
    with pytest.raises(wsync.InvalidArgumentError, match="tensor 'strided': a memoryview that is not C-contiguous"):
        wsync._tensors.Descriptors({"strided": memoryview(bytearray(8))[::2]})
    with pytest.raises(wsync.InvalidArgumentError, match="tensor 'rv': a read-only memoryview"):
        wsync._tensors.Descriptors({"rv": memoryview(b"abcd")})


def test_loading_the_plugins_leaves_ucx_signal_handling_alone():
    """docs/PYTHON.md, "UCX and signals": unlike the Go binding, this package sets no UCX_ERROR_SIGNALS."""
    code = ("import os, wsync; wsync.list_plugins(); "
            "print('UCX_ERROR_SIGNALS' in os.environ)")
    env = {k: v for k, v in __import__("os").environ.items() if k != "UCX_ERROR_SIGNALS"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_event_arrays_are_stepped_by_their_struct_size():
    """wsync.h: an array the library fills steps by its first element's struct_size, exactly, which
    may be larger than this binding's struct (a newer library); smaller or unaligned is refused."""
    import ctypes
    from wsync import _ffi
    step = 128  # a newer library's descriptor, 16 bytes longer than this header's 112
    raw = (ctypes.c_uint8 * (3 * step))()
    names = [b"a.weight", b"b.bias", b"c.norm"]
    for i, n in enumerate(names):
        t = _ffi.Tensor.from_address(ctypes.addressof(raw) + i * step)
        t.struct_size, t.name, t.ndim, t.nbytes = step, n, 1, i + 1
    arr = ctypes.cast(raw, ctypes.POINTER(_ffi.Tensor))
    s = _ffi.array_step(arr[0], _ffi.Tensor, "tensors")
    got = [(_ffi.element(arr, i, s, _ffi.Tensor).name, _ffi.element(arr, i, s, _ffi.Tensor).nbytes) for i in range(3)]
    assert got == [(n, i + 1) for i, n in enumerate(names)]
    for bad in (104, 116):
        arr[0].struct_size = bad
        with pytest.raises(wsync.VersionMismatchError, match="%d bytes" % bad):
            _ffi.array_step(arr[0], _ffi.Tensor, "tensors")
