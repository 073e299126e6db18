"""Provider metadata for Airflow's ProvidersManager (entry point ``apache_airflow_provider``).

The declaration is ``provider.yaml`` beside this module (shipped in the wheel as package data),
read when Airflow asks — once per process — rather than generated into a module at build time: one
file to edit, nothing to regenerate, no generated copy that an editable install would leave stale.
Reading it costs one small YAML parse with PyYAML, which Airflow itself has imported by then; this
module imports nothing else of the package but ``__version__`` (the package root imports nothing).

Two things are added to the declaration, so that each is written once: ``versions`` is
``__version__``; each extra connection field's placeholder is its first example.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

__all__ = ["connection_type", "get_provider_info"]

DECLARATION = Path(__file__).with_name("provider.yaml")


@functools.lru_cache(maxsize=1)
def _declared() -> dict[str, Any]:
    import yaml

    from . import __version__

    info: dict[str, Any] = yaml.safe_load(DECLARATION.read_text(encoding="utf-8"))
    info["versions"] = [__version__]
    for conn in info.get("connection-types", []):
        behaviour = conn.setdefault("ui-field-behaviour", {})
        placeholders = behaviour.setdefault("placeholders", {})
        for name, field in conn.get("conn-fields", {}).items():
            examples = field.get("schema", {}).get("examples") or []
            if examples:
                placeholders.setdefault(name, examples[0])
    return info


def get_provider_info() -> dict[str, Any]:
    """The provider's metadata: ``provider.yaml`` with its version and derived placeholders."""
    return copy.deepcopy(_declared())


def connection_type(conn_type: str) -> dict[str, Any]:
    """The declaration of one connection type (``delta_storage``, ``delta_coordinator``)."""
    for conn in _declared()["connection-types"]:
        if conn["connection-type"] == conn_type:
            return copy.deepcopy(conn)
    raise KeyError(f"no connection type {conn_type!r} in {DECLARATION}")
