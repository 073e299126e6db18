"""``DeltaFleetDiscoveryOperator``: run the YAML's discovery sources and write the fleet file.

The task is where discovery talks to catalogs; DAG parsing only reads the file it writes
(``fleet.config``). A source's ``conn_id`` names a ``delta_coordinator`` connection
whose credentials are used (the Unity Catalog token in its password; AWS keys or ``aws_conn_id``
for DynamoDB); without one the worker's environment is. The XCom is the summary (counts, skipped
tables and why), never a credential.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..fleet.catalog_discovery import discover_fleet, write_fleet_file
from ..fleet.config import parse_discovery
from ..hooks.coordinator import DeltaCoordinatorHook
from ..maintenance.config.tables import read_yaml
from ..version_compat import BaseOperator
from ._base import translate_errors

__all__ = ["DeltaFleetDiscoveryOperator"]


class DeltaFleetDiscoveryOperator(BaseOperator):
    """Discover the tables of the ``discovery:`` sources of ``config_path``; write the fleet file.

    :param config_path: the tables.yaml (templated)
    :param fleet_file: where to write (templated; default: the YAML's ``discovery.fleet_file``)
    """

    template_fields: Sequence[str] = ("config_path", "fleet_file")
    ui_color = "#b4e0f0"

    def __init__(self, *, config_path: str, fleet_file: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config_path = config_path
        self.fleet_file = fleet_file

    def execute(self, context: Any) -> dict[str, Any]:
        discovery = parse_discovery(read_yaml(self.config_path), str(self.config_path))
        if discovery is None:
            raise ValueError(f"{self.config_path}: no discovery: section")

        def credentials(conn_id: str) -> Mapping[str, str | None]:
            return DeltaCoordinatorHook(conn_id).get_credentials()

        result = translate_errors("fleet discovery", str(self.config_path), lambda: discover_fleet(discovery, credentials))
        target = Path(self.fleet_file) if self.fleet_file else discovery.fleet_file
        write_fleet_file(target, result.document(discovery))
        for s in result.sources:
            self.log.info("%s (%s): %d table(s), %d skipped", s.name, s.kind, len(s.tables), len(s.skipped))
            for skip in s.skipped:
                self.log.info("  skipped %s: %s", skip["table"], skip["reason"])
        self.log.info("wrote %d discovered table(s) to %s", len(result.tables), target)
        return {"fleet_file": str(target), **result.summary()}
