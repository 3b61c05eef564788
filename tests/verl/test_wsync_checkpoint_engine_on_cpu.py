"""verl's checkpoint-engine flow with the wsync backend, on CPU, with verl's released package
(0.9.1): two trainer ranks (a gloo world; every tensor gathered collectively) and three rollout
workers in processes of their own, three syncs of a 32 MiB model in 4 MB buckets, every tensor's
sha256 compared with what trainer rank 0 sent:

1. step 1: the three rollout workers join (the group is made at the first prepare) and commit.
2. step 2: rollout worker 1 SIGKILLs itself after its second bucket. Trainer rank 0's
   update_weights raises naming its wsync rank, host and pid; trainer rank 1 walks the generator
   to its end; the two others raise (the sync was not committed) having yielded nothing
   (staged); nothing hangs.
3. step 3: verl's lists drop the dead worker and add a new one (made now, receiving in "stream"
   mode): it joins, the two others keep their receivers and ranks (prepare says so), the
   group's store is the one of step 1 (no group rebuilt), and all three commit step 3.

Then verl's `naive` backend moves the same three steps inside the trainer processes (colocated),
for the figures of docs/VERL.md. Named as verl names its CPU tests (*_on_cpu.py). Run by
tests/verl/run.sh (ctest verl.checkpoint_engine).
"""
import json
import multiprocessing
import os
import secrets
import time
from unittest import mock

import pytest

os.environ.setdefault("WSYNC_GROUP_SECRET", secrets.token_hex(16))
os.environ.setdefault("WSYNC_LOG_LEVEL", "warn")

import ray  # noqa: E402
import verl  # noqa: E402
from verl.checkpoint_engine import CheckpointEngineManager  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402
import verl.workers.engine_workers  # noqa: E402,F401  (imported once here; the workers are forked)

import wsync  # noqa: E402
import wsync.verl  # noqa: E402

import wsync_verl_workers as W  # noqa: E402

BUCKET_MB = 4
TIMEOUT_MS = 30000  # the group's and receivers' deadline (a dead peer is seen at once: its connection ends)
LIMIT_S = 120       # hang guard for any one call (never reached when the test passes)
SYNCS = (1, 2, 3)


def engine_kwargs(**extra):
    kw = {"store_host": "127.0.0.1", "timeout_ms": TIMEOUT_MS, "max_rollout_workers": 8}
    kw.update(extra)
    return kw


def sync(manager, rollouts, step, times):
    """CheckpointEngineManager.update_weights, steps 4 to 6 (no replicas to abort or resume here):
    build_process_group (verl's own, ray.get standing for our futures), then update_weights on every
    trainer rank and rollout worker at once, then finalize. Returns each worker's outcome and what
    each said in prepare(): (trainer outcomes, rollout outcomes, trainer prepare, rollout prepare)."""
    t0 = time.monotonic()
    group = W.WorkerGroup(rollouts)
    with mock.patch.object(ray, "get", W.gather_results):
        manager.build_process_group(group)
    t1 = time.monotonic()
    futures = [w.call("update_weights", step) for w in manager.actor_wg.workers + rollouts]
    outcomes = [f.outcome() for f in futures]
    t2 = time.monotonic()
    if all(kind == "ok" for kind, _ in outcomes):  # verl finalizes only after a sync that returned
        W.gather_results(manager.actor_wg.execute_checkpoint_engine(["finalize"] * manager.actor_wg.world_size)
                         + group.execute_checkpoint_engine(["finalize"] * group.world_size))
    t3 = time.monotonic()
    times[step] = {"prepare_init_s": t1 - t0, "update_s": t2 - t1, "finalize_s": t3 - t2, "sync_s": t3 - t0}
    trainer_meta = [f.result() for f in manager.actor_wg.last["prepare"]]  # (answered already)
    rollout_meta = [f.result() for f in group.last["prepare"]]
    n = manager.actor_wg.world_size
    return outcomes[:n], outcomes[n:], trainer_meta, rollout_meta


def test_wsync_backend_three_syncs_a_rollout_killed_and_one_added(tmp_path):
    ctx = multiprocessing.get_context("fork")  # the workers inherit the imports (~12 s each otherwise)
    rendezvous = "file://%s" % (tmp_path / "gloo-trainers")
    started = []

    def start(name, make):
        w = W.Worker(ctx, name, make, LIMIT_S)
        started.append(w)
        return w

    try:
        def trainer(rank):
            return lambda: W.TrainerRank(rank, 2, rendezvous, engine_kwargs(), BUCKET_MB)

        def rollout(i, **kw):
            return lambda: W.RolloutWorker(i, "file://%s" % (tmp_path / ("gloo-rollout%d" % i)),
                                           engine_kwargs(**kw), BUCKET_MB)

        trainers = [start("trainer%d" % rank, trainer(rank)) for rank in (0, 1)]  # one gloo world: both first
        r = [start("rollout%d" % i, rollout(i)) for i in range(3)]
        for w in trainers + r:
            w.ready()

        # The driver: verl's manager, as its trainers make it (custom_backend_module imported here too).
        from verl.workers.config import CheckpointEngineConfig
        config = omega_conf_to_dataclass(W.checkpoint_engine_config(engine_kwargs(), BUCKET_MB), CheckpointEngineConfig)
        manager = CheckpointEngineManager(config, actor_wg=W.WorkerGroup(trainers), replicas=[])
        assert manager.backend_cls is wsync.verl.WsyncCheckpointEngine

        times = {}
        # --- step 1: three rollout workers join and commit ---------------------------------------
        tr, ro, tmeta, rmeta1 = sync(manager, r, 1, times)
        assert [k for k, _ in tr + ro] == ["ok"] * 5, (tr, ro)
        sent1 = tr[0][1]["sent"]
        assert len(sent1) == len(W.MODEL) and tr[1][1]["metrics"] == {}
        for i, (_, out) in enumerate(ro):
            assert out["got"] == sent1, "rollout %d got other tensors than trainer rank 0 sent at step 1" % i
        assert tr[0][1]["metrics"]["wsync/rollout_workers"] == 3 and tr[0][1]["metrics"]["wsync/version"] == 1
        store = tmeta[0]["store"]
        assert [m["joined"] for m in rmeta1] == [False] * 3

        # --- step 2: rollout worker 1 dies after its second bucket -------------------------------
        W.gather_results([r[1].call("kill_after_buckets", 2)])
        tr, ro, tmeta, rmeta2 = sync(manager, r, 2, times)
        assert tmeta[0]["store"] == store
        ranks = {i: m["rank"] for i, m in enumerate(rmeta2)}
        assert [m["joined"] for m in rmeta2] == [True] * 3 and sorted(ranks.values()) == [1, 2, 3], rmeta2
        victim = r[1]
        assert ro[1][0] == "died" and victim.proc.exitcode == -9, ro[1]
        kind, err = tr[0]
        assert kind == "error" and err["type"] == "SyncError", tr[0]
        assert ("rollout worker 1 (wsync rank %d, host %s, pid %d)" % (ranks[1], rmeta2[1]["host"], victim.pid)
                in err["message"]), err["message"]
        assert [(w["rank"], w["host"], w["pid"]) for w in err["workers"]] == [(ranks[1], rmeta2[1]["host"], victim.pid)]
        assert tr[1] == ("ok", {"metrics": {}, "sent": []}), tr[1]  # rank 1 walked the generator to its end
        for i in (0, 2):
            kind, err = ro[i]
            assert kind == "error" and err["type"] == "SyncError", ro[i]
            assert "without committing it" in err["message"] and "rollout worker %d (wsync rank %d" % (i, ranks[i]) \
                in err["message"], err["message"]
            assert err["got"] == [], "rollout %d yielded tensors of a sync that did not commit" % i
        messages = {"trainer0": tr[0][1]["message"], "rollout0": ro[0][1]["message"]}

        # --- step 3: verl drops the dead worker and adds a new one (receiving in stream mode) ----
        r3 = start("rollout3", rollout(3, receive="stream")).ready()
        rollouts3 = [r[0], r[2], r3]
        tr, ro, tmeta, rmeta3 = sync(manager, rollouts3, 3, times)
        assert [k for k, _ in tr + ro] == ["ok"] * 5, (tr, ro)
        assert tmeta[0]["store"] == store, "the group was rebuilt"
        assert [(m["rank"], m["joined"]) for m in rmeta3[:2]] == [(ranks[0], True), (ranks[2], True)], rmeta3
        assert rmeta3[2] == dict(rmeta3[2], rank=0, joined=False)
        sent3 = tr[0][1]["sent"]
        assert sent3 != sent1 and [n for n, _ in sent3] == list(W.MODEL)
        for i, (_, out) in enumerate(ro):
            assert out["got"] == sent3, "rollout %d got other tensors than trainer rank 0 sent at step 3" % i
        m3 = tr[0][1]["metrics"]
        assert (m3["wsync/version"], m3["wsync/rollout_workers"], m3["wsync/rollout_workers_left"]) == (3, 3, 0), m3

        # --- verl's naive backend: the same three steps, colocated in the trainer processes ------
        naive = {}
        for step in SYNCS:
            t0 = time.monotonic()
            outs = W.gather_results([t.call("naive_sync", step) for t in trainers])
            naive[step] = {"update_s": time.monotonic() - t0, "in_process_s": [o["seconds"] for o in outs]}
            for o in outs:
                assert o["got"] == outs[0]["sent"] and len(o["got"]) == len(W.MODEL)
            assert outs[0]["sent"] == {1: sent1, 3: sent3}.get(step, outs[0]["sent"])

        figures = {"verl": verl.__version__, "wsync_version": wsync.__version__, "model_bytes": _model_bytes(),
                   "tensors": len(W.MODEL), "bucket_mb": BUCKET_MB, "wsync": times, "naive": naive,
                   "step2_errors": messages}
        print("\nverl figures: " + json.dumps(figures, sort_keys=True))
        if os.environ.get("WSYNC_VERL_FIGURES"):
            with open(os.environ["WSYNC_VERL_FIGURES"], "w") as f:
                json.dump(figures, f, indent=1, sort_keys=True)
    finally:
        for w in started:
            w.stop()
        for w in started:
            w.proc.join(10)
            if w.proc.is_alive():
                w.proc.kill()
                w.proc.join(5)


def _model_bytes():
    return sum(W.full_tensor(0, i, n).nbytes for i, n in enumerate(W.MODEL))


def test_topology_keeps_members_ranks_gives_old_ranks_back_and_fills_the_lowest_free():
    from wsync.verl.topology import assign_ranks
    # members 1 and 3 stay; a worker whose receiver died asks for 2 back; a new one gets 4
    got = assign_ranks([{"rank": 3, "joined": True}, {"rank": 0}, {"rank": 2, "joined": False},
                        {"rank": 1, "joined": True}], members=[1, 3], capacity=8)
    assert got == [(3, False), (4, True), (2, True), (1, False)]
    # an old rank that is a member again (another worker holds it) is not given back
    assert assign_ranks([{"rank": 1, "joined": False}, {"rank": 1, "joined": True}], [1], 8) == [(2, True), (1, False)]
    # a member that is not in this sync (a live worker verl removed) keeps its rank out of reach
    assert assign_ranks([{"rank": 0}], members=[1], capacity=8) == [(2, True)]
    with pytest.raises(wsync.verl.SyncError, match="raise the engine argument max_rollout_workers"):
        assign_ranks([{"rank": 0}] * 3, members=[1], capacity=3)


def test_build_topology_gives_every_worker_its_kwargs_and_refuses_a_missing_master():
    cls = wsync.verl.WsyncCheckpointEngine
    master = {"host": "t0", "pid": 1, "store": "10.0.0.1:5", "members": [2], "capacity": 4}
    meta = [master, {"host": "t1", "pid": 2, "rank": 0, "joined": False},
            {"host": "r0", "pid": 3, "rank": 2, "joined": True}, {"host": "r1", "pid": 4, "rank": 0, "joined": False}]
    actor, rollout = cls.build_topology(2, 2, meta)
    assert set(actor) == {"role", "index", "store", "rollouts"} and all(len(v) == 2 for v in actor.values())
    assert actor["role"] == ["trainer"] * 2 and actor["store"] == ["10.0.0.1:5"] * 2
    assert [(r["index"], r["rank"], r["host"], r["join"]) for r in actor["rollouts"][0]] == [(0, 2, "r0", False),
                                                                                             (1, 1, "r1", True)]
    assert rollout == {"role": ["rollout"] * 2, "index": [0, 1], "store": ["10.0.0.1:5"] * 2, "rank": [2, 1],
                       "join": [False, True]}
    with pytest.raises(wsync.verl.SyncError, match="is_master=True"):
        cls.build_topology(2, 2, [meta[1], meta[1]] + meta[2:])


def test_engine_arguments_are_checked_by_name():
    with pytest.raises(ValueError, match="unknown engine argument.*bucket_bytes.*accepted: "):
        wsync.verl.WsyncCheckpointEngine(bucket_size=1 << 20, bucket_bytes=5)
    with pytest.raises(ValueError, match="receive='all'"):
        wsync.verl.WsyncCheckpointEngine(bucket_size=1 << 20, receive="all", store_host="127.0.0.1")
    with mock.patch.dict(os.environ, {"WSYNC_GROUP_SECRET": "", "WSYNC_GROUP_SECRET_FILE": ""}):
        with pytest.raises(ValueError, match="no group secret"):
            wsync.verl.WsyncCheckpointEngine(bucket_size=1 << 20, store_host="127.0.0.1")
