"""wsync as a vLLM weight-transfer backend.

vLLM loads it through the entry point group `vllm.general_plugins` of this package (in every vLLM
process, before any worker builds its weight-transfer engine): `register()` adds the backend
`wsync` to vLLM's WeightTransferEngineFactory. Start vLLM with
`--weight-transfer-config '{"backend": "wsync"}'` (and VLLM_SERVER_DEV_MODE=1 for the HTTP routes);
a trainer drives it with a wsync Group using adapter "vllm", option adapter.backend=wsync and
engine_receivers=wsync. See docs/VLLM.md.

Importing this module imports nothing from vLLM or torch; the engine class is loaded lazily by
vLLM's factory when a worker creates it.
"""
import logging

BACKEND = "wsync"
logger = logging.getLogger("wsync.vllm")


def register():
    """The vllm.general_plugins entry point. Idempotent (vLLM may call plugins more than once per
    process); never raises into vLLM's start-up: a failure is logged."""
    try:
        from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory
    except ImportError as e:  # a vLLM without weight-transfer backends
        logger.warning("wsync: this vLLM has no weight-transfer backend registry (%s); backend 'wsync' "
                       "is not available", e)
        return
    if BACKEND in WeightTransferEngineFactory._registry:
        return
    WeightTransferEngineFactory.register_engine(BACKEND, "wsync.vllm.engine", "WsyncWeightTransferEngine")
    _log_like_vllm()


def _log_like_vllm():
    """vLLM configures only its own logger: give wsync's ("wsync", "wsync.vllm") its handlers, so
    wsync's lines appear in the server's log formatted like vLLM's (unless the user configured
    the "wsync" logger already)."""
    ours, theirs = logging.getLogger("wsync"), logging.getLogger("vllm")
    if ours.handlers or not theirs.handlers:
        return
    for h in theirs.handlers:
        ours.addHandler(h)
    if ours.level == logging.NOTSET:
        ours.setLevel(logging.INFO)
    ours.propagate = False
