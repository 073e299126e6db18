"""What a table's coordinator calls contend on (its endpoint), and the Airflow pool of that endpoint.

Part of a table's configuration (``TableConfig.coordinator_endpoint`` / ``resolved_pool``): the
fleet's rate limits and ``pool: auto`` (``fleet.scheduling``) group tables by it.
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import urlsplit

from ...coordinators.errors import InvalidCoordinatorSpecError
from ...coordinators.registry import AUTO, parse_coordinator_spec

__all__ = ["POOL_PREFIX", "coordinator_endpoint", "pool_name_for_endpoint"]

POOL_PREFIX = "delta_coordinator__"


def coordinator_endpoint(coordinator: str | None, coordinator_conn_id: str | None) -> str:
    """What a fleet's coordinator calls contend on: a DynamoDB table in a region, a UC server, an
    embedded database, or a coordinator connection (whose spec is only known at run time)."""
    if coordinator is None or coordinator.strip().lower() == AUTO:
        return f"conn:{coordinator_conn_id}" if coordinator_conn_id else "auto"
    try:
        spec = parse_coordinator_spec(coordinator)
    except InvalidCoordinatorSpecError:
        return "invalid"
    if spec.kind == "dynamodb":
        endpoint = spec.params.get("endpoint")
        where = urlsplit(endpoint).netloc if endpoint else spec.params.get("region", "")
        return f"dynamodb:{where}:{spec.target}"
    if spec.kind == "unity-catalog":
        return f"uc:{spec.target}"
    return f"local:{spec.target}"


def pool_name_for_endpoint(endpoint: str) -> str:
    """A pool name Airflow accepts everywhere (letters, digits, ``_.-``), unique per endpoint: a
    long endpoint keeps a readable prefix and a digest of the whole."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", endpoint).strip("_")
    if len(slug) > 80:
        slug = slug[:60] + "_" + hashlib.sha256(endpoint.encode()).hexdigest()[:12]
    return POOL_PREFIX + slug
