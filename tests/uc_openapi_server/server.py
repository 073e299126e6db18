"""UC OpenAPI test server (NOT the Unity Catalog OSS server).

The OSS server (``io.unitycatalog:unitycatalog-server``) is not published on Maven Central (only
``unitycatalog-client`` and ``unitycatalog-hadoop`` are), so the client is tested against this
stand-in. It implements, from Unity Catalog's published OpenAPI (``api/delta.yaml``) and the
Managed Tables spec, only the endpoints our client uses, with the OSS server's semantics:

- ``POST /api/2.1/unity-catalog/tables`` (create a managed Delta table; returns ``table_id``)
- ``POST|GET /api/2.1/unity-catalog/delta/preview/commits``
- ``GET|POST /api/2.1/unity-catalog/delta/v1/catalogs/{c}/schemas/{s}/tables/{t}`` (loadTable,
  updateTable with ``add-commit`` / ``set-latest-backfilled-version`` and ``assert-table-uuid``)
- at most ``MAX_NUM_COMMITS_PER_TABLE`` (10, as ``DeltaCommitRepository``) unpublished commits,
  then 429 ``ResourceExhaustedException``; 409 on a version conflict; a backfill report deletes
  the covered commits but keeps the latest one (flagged) so the latest version is remembered.

Test hooks (outside the API, for fault injection): ``POST /__test__/fail`` makes the next N
requests answer a given status.

    python server.py PORT   (binds 127.0.0.1 only)
"""

from __future__ import annotations

import json
import re
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_NUM_COMMITS_PER_TABLE = 10
API = "/api/2.1/unity-catalog"
V1 = re.compile(rf"^{API}/delta/v1/catalogs/([^/]+)/schemas/([^/]+)/tables/([^/]+)$")

LOCK = threading.Lock()
TABLES: dict[str, dict[str, Any]] = {}  # full name -> table
BY_ID: dict[str, str] = {}
FAULTS: list[tuple[int, str]] = []  # (status, error type) for the next requests


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _body(self) -> dict[str, Any]:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}") if n else {}

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, error_type: str, message: str) -> None:
        self._send(status, {"error": {"code": status, "type": error_type, "message": message}})

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        body = self._body()
        with LOCK:
            if self.path == "/__test__/fail":
                FAULTS.extend([(int(body["status"]), str(body.get("type", "")))] * int(body.get("count", 1)))
                return self._send(200, {})
            if FAULTS:
                status, kind = FAULTS.pop(0)
                return self._error(status, kind, "injected fault")
            if method == "POST" and self.path == f"{API}/tables":
                return self._create(body)
            if self.path == f"{API}/delta/preview/commits":
                return self._preview_get(body) if method == "GET" else self._preview_post(body)
            m = V1.match(self.path)
            if m:
                name = ".".join(m.groups())
                table = TABLES.get(name)
                if table is None:
                    return self._error(404, "NoSuchTableException", f"table {name} does not exist")
                return self._load(table) if method == "GET" else self._update(table, body)
        self._error(404, "NotFound", self.path)

    # ---- tables --------------------------------------------------------------------------------

    def _create(self, body: dict[str, Any]) -> None:
        name = f"{body['catalog_name']}.{body['schema_name']}.{body['name']}"
        if name in TABLES:
            return self._error(409, "TableAlreadyExistsException", name)
        tid = str(uuid.uuid4())
        TABLES[name] = {"id": tid, "name": name, "location": body["storage_location"], "commits": {}, "latest": 0, "backfilled": 0}
        BY_ID[tid] = name
        self._send(200, {"table_id": tid, "name": body["name"], "storage_location": body["storage_location"]})

    def _add_commit(self, table: dict[str, Any], commit: dict[str, Any]) -> tuple[int, str, str] | None:
        v = int(commit["version"])
        if v <= table["latest"]:
            return 409, "CommitVersionConflictException", f"version {v} already committed"
        if v != table["latest"] + 1:
            return 400, "InvalidParameterValueException", f"version {v} does not follow {table['latest']}"
        unpublished = [c for c in table["commits"].values() if not c.get("backfilled")]
        if len(unpublished) >= MAX_NUM_COMMITS_PER_TABLE:
            return 429, "ResourceExhaustedException", f"more than {MAX_NUM_COMMITS_PER_TABLE} unpublished commits"
        table["commits"][v] = dict(commit)
        table["latest"] = v
        return None

    def _backfill(self, table: dict[str, Any], version: int) -> tuple[int, str, str] | None:
        if version > table["latest"]:
            return 400, "InvalidParameterValueException", f"{version} is above the latest version {table['latest']}"
        table["backfilled"] = max(table["backfilled"], version)
        for v in [v for v in table["commits"] if v <= version]:
            if v == table["latest"]:
                table["commits"][v]["backfilled"] = True  # kept, flagged is_backfilled_latest_commit
            else:
                del table["commits"][v]
        return None

    # ---- preview API ---------------------------------------------------------------------------

    def _by_id(self, body: dict[str, Any]) -> dict[str, Any] | None:
        name = BY_ID.get(str(body.get("table_id")))
        return TABLES.get(name) if name else None

    def _preview_get(self, body: dict[str, Any]) -> None:
        table = self._by_id(body)
        if table is None:
            return self._error(404, "NoSuchTableException", str(body.get("table_id")))
        start, end = int(body.get("start_version", 0)), body.get("end_version")
        commits = [
            {"version": v, "timestamp": c["timestamp"], "file_name": c["file_name"], "file_size": c["file_size"],
             "file_modification_timestamp": c["file_modification_timestamp"]}
            for v, c in table["commits"].items()
            if not c.get("backfilled") and v >= start and (end is None or v <= int(end))
        ]
        self._send(200, {"commits": commits, "latest_table_version": table["latest"]})

    def _preview_post(self, body: dict[str, Any]) -> None:
        table = self._by_id(body)
        if table is None:
            return self._error(404, "NoSuchTableException", str(body.get("table_id")))
        info = body.get("commit_info")
        if info is not None:
            v = int(info["version"])
            existing = table["commits"].get(v)
            if existing is not None and existing["file_name"] == info["file_name"]:
                return self._send(200, {})  # re-sending an accepted commit is idempotent
            err = self._add_commit(table, info)
            if err:
                return self._error(*err)
        if body.get("latest_backfilled_version") is not None:
            err = self._backfill(table, int(body["latest_backfilled_version"]))
            if err:
                return self._error(*err)
        self._send(200, {})

    # ---- v1 API --------------------------------------------------------------------------------

    def _load(self, table: dict[str, Any]) -> None:
        commits = [
            {"version": v, "timestamp": c["timestamp"], "file-name": c["file-name"], "file-size": c["file-size"],
             "file-modification-timestamp": c["file-modification-timestamp"]}
            for v, c in sorted(table["commits"].items(), reverse=True)
            if not c.get("backfilled")
        ]
        metadata = {"etag": table["id"], "table-type": "MANAGED", "table-uuid": table["id"], "location": table["location"],
                    "properties": {"delta.feature.catalogManaged": "supported", "io.unitycatalog.tableId": table["id"]}}
        self._send(200, {"metadata": metadata, "commits": commits, "latest-table-version": table["latest"]})

    def _update(self, table: dict[str, Any], body: dict[str, Any]) -> None:
        for req in body.get("requirements", []):
            if req.get("type") == "assert-table-uuid" and req.get("uuid") != table["id"]:
                return self._error(409, "UpdateRequirementConflictException", "table uuid mismatch")
        for upd in body.get("updates", []):
            if upd.get("action") == "add-commit":
                c = upd["commit"]
                if int(c["version"]) <= 0 or int(c["file-size"]) <= 0:
                    return self._error(400, "InvalidParameterValueException", "version and file-size must be > 0")
                err = self._add_commit(table, c)
            elif upd.get("action") == "set-latest-backfilled-version":
                err = self._backfill(table, int(upd["latest-published-version"]))
            else:
                err = (400, "InvalidParameterValueException", f"unsupported update {upd.get('action')}")
            if err:
                return self._error(*err)
        self._load(table)


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    print(f"UC OpenAPI test server on 127.0.0.1:{sys.argv[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
