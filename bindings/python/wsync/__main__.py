"""python -m wsync: what this wsync is, and whether this machine can use it.

  python -m wsync info [--json]      the library, its ABI, the plugin folders and every plugin
                                     (what the C tool wsync-info prints)
  python -m wsync doctor [--json]    checks this machine: the library and plugins load, what UCX
                                     sees (transports and devices), UCX's CUDA module, CUDA and
                                     NCCL found or not and why, the system's libcrypto and libcurl,
                                     and a loopback transfer over UCX with its rate

Exit status: 0 when everything checked is usable (a GPU transport without a GPU is information,
not a failure), 1 when a check failed, 2 for a bad command line.
"""
import argparse
import ctypes
import json
import os
import secrets
import sys
import threading
import time

import wsync

_GPU_TRANSPORTS = ("cuda_ipc", "nccl")


def print_info(facts):
    print("wsync %s, ABI %s" % (facts["version"], facts["abi"]))
    print("library: %s" % facts["library"])
    print("plugin folders, in search order (WSYNC_PLUGIN_PATH, then beside libwsync):")
    for i, d in enumerate(facts["plugin_dirs"], 1):
        print("  %d. %s" % (i, d))
    print("plugins:")
    for p in facts["plugins"]:
        state = "loads" if p["status"] == "WSYNC_OK" else "does not load (%s)" % p["status"]
        print("  %s %s %s: %s%s" % (p["kind"], p["name"], p["version"], state, ", shadowed" if p["shadowed"] else ""))
        print("    file:   %s" % p["path"])
        if p["detail"]:
            print("    sees:   %s" % p["detail"])
        if p["error"]:
            print("    reason: %s" % p["error"])


def _check(name, ok, detail, fatal=True):
    return {"check": name, "ok": bool(ok), "fatal": fatal, "detail": detail}


def _plugin_checks(plugins):
    out = []
    names = {(p["kind"], p["name"]): p for p in plugins}
    for p in plugins:
        if p["kind"] == "transport" and p["name"] in _GPU_TRANSPORTS:
            continue  # below, with the CUDA check
        out.append(_check("%s %s loads" % (p["kind"], p["name"]), p["status"] == "WSYNC_OK",
                          p["error"] or p["detail"] or p["path"]))
    ucx = names.get(("transport", "ucx"))
    out.append(_check("UCX: transports and devices seen", ucx is not None and ucx["status"] == "WSYNC_OK",
                      (ucx["detail"] or "loaded") if ucx else "no ucx transport plugin found"))
    for name in _GPU_TRANSPORTS:
        p = names.get(("transport", name))
        if p is None:
            detail = "not in this build (wsync was built without the CUDA toolkit%s)" % (
                " and NCCL" if name == "nccl" else "")
        elif p["status"] == "WSYNC_OK":
            detail = "usable: %s" % (p["detail"] or "a CUDA device is visible")
        else:
            detail = "%s: %s" % (p["status"], p["error"] or "no reason given")
        # A GPU transport that cannot run here is information: this machine may have no GPU.
        out.append(_check("CUDA transport %s" % name, p is not None and p["status"] == "WSYNC_OK", detail,
                          fatal=False))
    return out


def _system_library_checks():
    """The libraries wsync loads from the system when it needs them (never bundled)."""
    out = []
    for what, env, names, fatal in (
            ("libcrypto (HMAC-SHA-256 of the group secret)", "WSYNC_LIBCRYPTO", ("libcrypto.so.3", "libcrypto.so.1.1"),
             True),
            ("libcurl (the HTTP engine adapters: SGLang, vLLM, LMDeploy)", "WSYNC_LIBCURL",
             ("libcurl.so.4", "libcurl-gnutls.so.4"), False)):
        if os.environ.get(env):  # the core then loads that file and no other
            names = (os.environ[env],)
        found, why = None, []
        for name in names:
            try:
                ctypes.CDLL(name)
            except OSError as e:
                why.append(str(e))
            else:
                found = name
                break
        out.append(_check("system %s" % what, found is not None,
                          "loads: %s" % found if found else "not found (%s)" % "; ".join(why), fatal=fatal))
    return out


def _loaded_files():
    try:
        with open("/proc/self/maps") as f:
            return {line.split()[-1] for line in f if "/" in line}
    except OSError:
        return set()


def _ucx_cuda_check():
    """UCX's CUDA module (libuct_cuda.so, beside the libucp this process loaded): found, loaded by
    UCX or not, and why not. Information: without a GPU it cannot load."""
    ucp = sorted(p for p in _loaded_files() if os.path.basename(p).startswith("libucp.so"))
    if not ucp:
        return _check("UCX CUDA module", False, "UCX is not loaded in this process", fatal=False)
    module = os.path.join(os.path.dirname(ucp[0]), "ucx", "libuct_cuda.so.0")
    if not os.path.exists(module):
        return _check("UCX CUDA module", False, "not found: %s (this UCX was built without CUDA)" % module,
                      fatal=False)
    if any(os.path.basename(p).startswith("libuct_cuda.so") for p in _loaded_files()):
        return _check("UCX CUDA module", True, "found and loaded by UCX: %s" % module, fatal=False)
    try:
        ctypes.CDLL(module)
    except OSError as e:
        return _check("UCX CUDA module", False, "found: %s; not loaded: %s" % (module, e), fatal=False)
    return _check("UCX CUDA module", True, "found: %s; it loads (UCX had not loaded it: no CUDA device seen?)"
                  % module, fatal=False)


def _loopback(nbytes=64 << 20, updates=3, timeout_ms=60000):
    """One sender and one receiver (a thread) over UCX on loopback: `updates` versions of `nbytes`,
    each compared byte for byte. Returns (seconds per update, detail)."""
    if not os.environ.get("WSYNC_GROUP_SECRET") and not os.environ.get("WSYNC_GROUP_SECRET_FILE"):
        os.environ["WSYNC_GROUP_SECRET"] = secrets.token_hex(32)  # for this process's own group only
    import tempfile
    with tempfile.TemporaryDirectory(prefix="wsync-doctor-") as tmp:
        addr_file = os.path.join(tmp, "store")
        result = {}
        dst = bytearray(nbytes)

        def receiver():
            try:
                deadline = time.time() + timeout_ms / 1000
                while not (os.path.exists(addr_file) and open(addr_file).read().strip()):
                    if time.time() > deadline:
                        raise RuntimeError("no store address after %d ms" % timeout_ms)
                    time.sleep(0.01)
                addr = open(addr_file).read().strip()
                with wsync.Receiver(1, addr, group_name="wsync-doctor", timeout_ms=timeout_ms) as rx:
                    rx.register({"doctor.bytes": dst})
                    for ev in rx.events(timeout_ms):
                        if ev.kind == wsync.EventKind.COMMIT:
                            want = bytes([ev.version % 251]) * 7
                            if dst[:7] != want or dst[-7:] != want or dst.count(ev.version % 251) != nbytes:
                                raise RuntimeError("version %d arrived with wrong bytes" % ev.version)
                            rx.commit(ev.version)
            except Exception as e:  # reported by the sender's side
                result["error"] = "receiver: %s" % e

        t = threading.Thread(target=receiver, daemon=True)
        t.start()
        src = bytearray(nbytes)
        try:
            with wsync.Group(1, group_name="wsync-doctor", store_addr="127.0.0.1:0", transport="ucx",
                             options={"store_addr_file": addr_file}, timeout_ms=timeout_ms) as g:
                times = []
                for version in range(1, updates + 1):
                    src[:] = bytes([version % 251]) * nbytes
                    t0 = time.perf_counter()
                    g.send({"doctor.bytes": src})
                    g.finalize(version)
                    times.append(time.perf_counter() - t0)
        except wsync.WsyncError as e:
            t.join(5)
            return None, "%s%s" % (e, "; " + result["error"] if "error" in result else "")
        t.join(timeout_ms / 1000)
        if "error" in result:
            return None, result["error"]
        best = min(times)
        return best, "%d updates of %d MiB verified byte for byte; best %.3f s = %.0f MiB/s (UCX_TLS=%s)" % (
            updates, nbytes >> 20, best, (nbytes >> 20) / best, os.environ.get("UCX_TLS", "UCX's default"))


def doctor():
    facts = wsync.info()
    checks = [_check("library loads", True, "wsync %s, ABI %s, %s" % (facts["version"], facts["abi"],
                                                                     facts["library"]))]
    checks += _plugin_checks(facts["plugins"])
    checks += _system_library_checks()
    secs, detail = _loopback()
    checks.append(_check("loopback transfer over UCX", secs is not None, detail))
    checks.append(_ucx_cuda_check())
    if wsync._ffi.ucx_preload_error:
        checks.append(_check("PyPI's UCX (libucx) preloaded", False, wsync._ffi.ucx_preload_error))
    return {"version": facts["version"], "checks": checks,
            "ok": all(c["ok"] or not c["fatal"] for c in checks)}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m wsync", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    for name, text in (("info", "the library, its ABI and every plugin"),
                       ("doctor", "check that this machine can use wsync")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    args = ap.parse_args(argv)
    if args.command == "info":
        facts = wsync.info()
        if args.json:
            print(json.dumps(facts, indent=2))
        else:
            print_info(facts)
        return 0
    report = doctor()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for c in report["checks"]:
            mark = "ok  " if c["ok"] else ("FAIL" if c["fatal"] else "--  ")
            print("[%s] %s: %s" % (mark, c["check"], c["detail"]))
        print("wsync doctor: %s" % ("this machine can use wsync" if report["ok"] else "PROBLEMS above"))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
