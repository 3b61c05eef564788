"""wsync as a verl checkpoint-engine backend (verl 0.9.1: `verl.checkpoint_engine`).

Importing this module registers the backend `wsync` in verl's CheckpointEngineRegistry. verl
imports it on every worker (trainer ranks, rollout workers, the driver's manager) when the config
names it:

    actor_rollout_ref.rollout.checkpoint_engine.backend=wsync
    actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module=wsync.verl

Trainer rank 0 hosts a wsync group (membership=elastic) that lives across syncs; every rollout
worker embeds a wsync receiver that joins it once and stays. verl re-runs prepare, build_topology
and init_process_group before every sync: here they only check who takes part (a rollout worker
added since the last sync joins, one removed has left), so they cost next to nothing when nothing
changed. See docs/VERL.md.

Importing this module imports verl (and so torch and ray): install verl first.
"""
try:
    import verl.checkpoint_engine  # noqa: F401
except ImportError as e:
    raise ImportError("wsync.verl is verl's checkpoint engine `wsync` and needs verl (written against verl 0.9.1: "
                      "pip install verl==0.9.1); importing verl.checkpoint_engine failed: %s" % e) from e

from .engine import BACKEND, CHECKED_VERL, Settings, WsyncCheckpointEngine  # noqa: E402
from .topology import SyncError  # noqa: E402

__all__ = ["BACKEND", "CHECKED_VERL", "Settings", "SyncError", "WsyncCheckpointEngine"]
