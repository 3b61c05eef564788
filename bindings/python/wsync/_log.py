"""wsync's log lines (library and plugins) go to the Python logger "wsync"."""
import atexit
import logging
import os
import threading

from ._ffi import LOG_FN, lib

logger = logging.getLogger("wsync")

_TO_PYTHON = {1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.DEBUG, 5: logging.DEBUG - 5}
_lock = threading.Lock()
_installed = None  # the ctypes callback object; C keeps its pointer, so it must stay alive


def _wsync_level(py_level):
    for wl in (5, 4, 3, 2, 1):
        if py_level <= _TO_PYTHON[wl]:
            return wl
    return 1


@LOG_FN
def _on_log(_user, level, message):
    # Called from any wsync thread (ctypes takes the GIL); must never raise into C.
    try:
        logger.log(_TO_PYTHON.get(level, logging.INFO), "%s", message.decode("utf-8", "replace"))
    except Exception:  # pragma: no cover - a broken handler must not kill a wsync thread
        pass


_ENV_LEVELS = {"error": 1, "warn": 2, "warning": 2, "info": 3, "debug": 4, "trace": 5}


def env_level():
    """The logging level WSYNC_LOG_LEVEL names (error|warn|info|debug|trace or 1..5), else INFO."""
    text = os.environ.get("WSYNC_LOG_LEVEL", "").strip().lower()
    wl = _ENV_LEVELS.get(text) or (int(text) if text.isdigit() and 1 <= int(text) <= 5 else 3)
    return _TO_PYTHON[wl]


def route_logs(level=None):
    """Send wsync log lines of `level` (a logging level) and more severe to logger "wsync".
    Installed at import with the level WSYNC_LOG_LEVEL names (default INFO); lower it
    (logging.DEBUG) to see more. The logger's own level and handlers filter further, as for any
    Python logger."""
    if level is None:
        level = env_level()
    global _installed
    with _lock:
        _installed = _on_log
        lib.wsync_set_log_callback(_on_log, None, _wsync_level(level))


def restore_default_logging():
    """Give wsync back its own sink (stderr, filtered by WSYNC_LOG_LEVEL)."""
    with _lock:
        lib.wsync_set_log_callback(LOG_FN(), None, 0)


# Threads of groups or receivers that outlive the interpreter must not call into a finalized one.
atexit.register(restore_default_logging)
