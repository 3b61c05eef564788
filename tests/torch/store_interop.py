# Interop with real torch: torch's TCPStore client against wsync's store server (every query,
# a cancelled wait, a gloo process group whose rendezvous runs through it), and wsync's client
# against torch's own servers (libuv and legacy). Usage: store_interop.py <harness binary>
import datetime, os, subprocess, sys, threading, time
import torch, torch.distributed as dist

H = sys.argv[1]
TO = datetime.timedelta(seconds=5)
print("torch", torch.__version__)

# ---- torch clients -> wsync server ----
srv = subprocess.Popen([H, "server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
port = int(srv.stdout.readline())
def ask(key):
    srv.stdin.write(key + "\n"); srv.stdin.flush()
    return srv.stdout.readline().strip()

s = dist.TCPStore("127.0.0.1", port, world_size=3, is_master=False, timeout=TO)
s.set("k", "v"); assert s.get("k") == b"v"
assert s.add("c", 3) == 3 and s.add("c", -1) == 2 and s.get("c") == b"2"
assert s.check(["k", "c"]) and not s.check(["nope"])
s.wait(["k"])
t0 = time.time()
try:
    s.wait(["nope"], datetime.timedelta(milliseconds=200)); raise SystemExit("wait did not time out")
except Exception as e:
    assert "nope" in str(e) or "timeout" in str(e).lower(), e
assert 0.15 < time.time() - t0 < 3
assert s.get("k") == b"v"  # usable after the cancelled wait
assert s.compare_set("cas", "", "x") == b"x"
assert s.compare_set("cas", "x", "y") == b"y"
assert s.compare_set("cas", "x", "z") == b"y"
assert s.compare_set("cas_missing", "e", "d") == b"e"
assert s.delete_key("cas") and not s.delete_key("cas")
s.multi_set(["a", "b"], ["1", "22"]); assert s.multi_get(["b", "a"]) == [b"22", b"1"]
s.append("a", "x"); assert s.get("a") == b"1x"
print("num_keys", s.num_keys())
if hasattr(s, "queue_push"):
    s.queue_push("q", "a"); s.queue_push("q", "b")
    assert s.queue_len("q") == 2 and s.queue_pop("q") == b"a" and s.queue_pop("q", block=False) == b"b"
    print("queues ok")
if hasattr(s, "list_keys"):
    print("list_keys", sorted(s.list_keys()))
if hasattr(s, "barrier"):  # torch 2.12+: query type 18
    sb = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=TO)  # no world size: no init/ ADD
    th = threading.Thread(target=lambda: sb.barrier("bar", 2)); th.start(); time.sleep(0.2)
    assert th.is_alive()  # one of two arrived
    s.barrier("bar", 2); th.join(3); assert not th.is_alive()
    assert s.get("bar") == b"2"
    t0 = time.time()
    try:
        s.barrier("lonely", 2, datetime.timedelta(milliseconds=200)); raise SystemExit("barrier did not time out")
    except SystemExit: raise
    except Exception as e:
        assert "timeout" in str(e).lower(), e
    assert s.get("k") == b"v"  # usable after the cancelled barrier
    print("barrier ok")
s2 = dist.TCPStore("127.0.0.1", port, world_size=3, is_master=False, timeout=TO)
got = {}
th = threading.Thread(target=lambda: got.setdefault("v", s2.get("late")))
th.start(); time.sleep(0.2); assert "v" not in got
s.set("late", b"\x00\x01binary"); th.join(3); assert got["v"] == b"\x00\x01binary"
print(ask("init/"), "|", ask("/k"), "|", ask("/c"))
assert ask("init/").endswith("= 2"), ask("init/")

# gloo group of two torch ranks whose rendezvous runs entirely through the wsync store
code = r'''
import os, torch, torch.distributed as dist, datetime
dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=20))
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
assert t.item() == 3.0, t
dist.barrier()
print("rank", dist.get_rank(), "allreduce ok")
dist.destroy_process_group()
'''

def gloo_pair(port):
    """Two torch ranks (processes) whose gloo rendezvous runs through the store at `port`."""
    procs = []
    for r in range(2):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r), WORLD_SIZE="2",
                   TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RESTART_COUNT="0")
        procs.append(subprocess.Popen([sys.executable, "-c", code], env=env))
    assert all(p.wait(60) == 0 for p in procs)

gloo_pair(port)
srv.stdin.close(); print(srv.stdout.read().strip()); srv.wait(5)
print("TORCH CLIENT -> WSYNC SERVER OK")

# ---- torch clients -> wsync server with a group secret ----
# torch mode (torch_clients=1): unmodified torch clients use torch's keys, a gloo group's rendezvous
# runs through the store, and wsync's keys stay out of their reach. Without torch mode a torch
# client gets nothing at all.
SECRET = "torch-interop-secret-0123456789abcdef"
srv = subprocess.Popen([H, "server-torch", SECRET], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
port = int(srv.stdout.readline())
s = dist.TCPStore("127.0.0.1", port, world_size=3, is_master=False, timeout=TO)
s.set("k", "v"); assert s.get("k") == b"v"
assert s.add("c", 3) == 3
if hasattr(s, "list_keys"):
    keys = sorted(s.list_keys())
    assert not any("wsync" in k for k in keys), keys
    print("torch mode list_keys", keys)
for key in ("wsync/probe", "wsync/group_info"):  # torch's client puts "/" in front: "/wsync/..." on the wire
    t0 = time.time()
    probe = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=TO)
    try:
        got = probe.get(key)
        raise SystemExit("torch mode: a torch client read %s: %r" % (key, got))
    except SystemExit: raise
    except Exception as e:
        print("torch mode: reading %s refused: %s" % (key, str(e).splitlines()[0][:120]))
    assert time.time() - t0 < 3, "refused only by a timeout, not by the store"
    del probe
assert s.get("k") == b"v"  # the well-behaved client is unaffected
gloo_pair(port)
assert ask("/wsync/probe").endswith("= member-only"), ask("/wsync/probe")  # untouched
srv.stdin.close(); print(srv.stdout.read().strip()); srv.wait(5)
print("TORCH CLIENT -> WSYNC SERVER, TORCH MODE OK")

srv = subprocess.Popen([H, "server-secret", SECRET], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
port = int(srv.stdout.readline())
try:
    t = dist.TCPStore("127.0.0.1", port, world_size=2, is_master=False, timeout=datetime.timedelta(seconds=3))
    t.set("k", "v")
    raise SystemExit("a torch client without the secret wrote to a store outside torch mode")
except SystemExit: raise
except Exception as e:
    print("no torch mode: torch client refused: %s" % str(e).splitlines()[0][:120])
srv.stdin.close(); print(srv.stdout.read().strip()); srv.wait(5)
print("TORCH CLIENT -> WSYNC SERVER WITH A SECRET, NO TORCH MODE: REFUSED OK")

# ---- wsync client -> torch servers ----
for libuv in (True, False):
    m = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=TO, use_libuv=libuv)
    m.set("from_torch", "torch-value")
    out = subprocess.run([H, "client", str(m.port)], capture_output=True, text=True, timeout=30)
    print(out.stdout.strip(), out.stderr.strip()[-500:])
    assert "CLIENT OK" in out.stdout
    assert m.get("ours") == b"hello" and m.get("cnt") == b"7" and m.get("m1") == b"1x"
    print("WSYNC CLIENT -> TORCH SERVER (libuv=%s) OK" % libuv)
    del m
