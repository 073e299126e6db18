"""The optional compiled accelerators (the ``airflow-delta-maintenance-accel`` distribution, which
the ``[accel]`` extra installs).

The log library is pure Python; three hot loops have C versions in that separate distribution (its
wheels are built per platform, this package's is ``py3-none-any``). Each caller asks ``load(name)``
and does the same work with pyarrow or Python when it gets None, with identical results.

``DELTA_MAINTENANCE_ACCEL`` chooses, read once at import:

- unset or ``auto``: use the accelerators when they are installed and speak this package's
  interface; otherwise quietly go without (a warning when they are installed but of another
  interface version: the two distributions were upgraded apart);
- ``off``: never use them (the pure path, as a machine without them runs it);
- ``require``: a missing or mismatched accelerator is an ImportError (``make test`` runs so; a
  deployment that installed the extra can make sure it is used).
"""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType

__all__ = ["ENV", "INTERFACE", "MODE", "load"]

log = logging.getLogger(__name__)

ENV = "DELTA_MAINTENANCE_ACCEL"
PACKAGE = "airflow_delta_maintenance_accel"
# The calling convention this package uses (airflow_delta_maintenance_accel.INTERFACE must match).
INTERFACE = 1
_MODES = ("auto", "off", "require")


def _mode() -> str:
    mode = os.environ.get(ENV, "").strip().lower() or "auto"
    if mode not in _MODES:
        raise ImportError(f"{ENV}={os.environ[ENV]!r}: expected one of {', '.join(_MODES)}")
    return mode


MODE = _mode()


def load(name: str) -> ModuleType | None:
    """The accelerator module ``name`` (``_stats_json``, ``_file_keys``, ``_log_lines``), or None to go without."""
    if MODE == "off":
        return None
    try:
        package = importlib.import_module(PACKAGE)
    except ImportError as exc:
        _missing(name, exc)
        return None
    found = getattr(package, "INTERFACE", None)
    if found != INTERFACE:
        message = (f"{PACKAGE} {getattr(package, '__version__', '?')} has interface {found}, this package needs {INTERFACE}: "
                   "install the airflow-delta-maintenance-accel release of the same version")
        if MODE == "require":
            raise ImportError(message)
        log.warning("%s; going without accelerators", message)
        return None
    try:
        return importlib.import_module(f"{PACKAGE}.{name}")
    except ImportError as exc:
        _missing(name, exc)
        return None


def _missing(name: str, exc: ImportError) -> None:
    """Raises under ``require``; otherwise the caller quietly goes without."""
    if MODE == "require":
        raise ImportError(f"{ENV}=require but {PACKAGE}.{name} cannot be imported ({exc}): pip install 'airflow-delta-maintenance[accel]'") from exc
    return None
