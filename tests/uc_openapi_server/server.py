"""UC OpenAPI test server — NOT the Unity Catalog OSS server.

``io.unitycatalog:unitycatalog-server`` is not published on Maven Central (only
``unitycatalog-client`` and ``unitycatalog-hadoop`` are), so the coordinator client is tested against
this stand-in. It serves, from Unity Catalog's published OpenAPI documents, only the operations the
client uses, with the OSS server's commit semantics (see ``catalog.py``):

UC REST API (``api/all.yaml``; errors ``{"error_code", "message", "details"}``):
  ``POST /staging-tables``, ``POST /tables`` (MANAGED Delta from a staging location),
  ``GET /tables/{full_name}``, ``GET|POST /delta/preview/commits``
UC Delta API v1 (``api/delta.yaml``; errors ``{"error": {"code", "type", "message"}}``):
  ``GET /delta/v1/config``, ``POST .../staging-tables``, ``POST .../tables`` (createTable),
  ``GET .../tables/{t}`` (loadTable), ``POST .../tables/{t}`` (updateTable: ``assert-table-uuid``,
  ``add-commit``, ``set-latest-backfilled-version``; other updates answer 501)

Catalogs and schemas are not modelled: any name is accepted. With ``--token`` every request must
carry ``Authorization: Bearer <token>`` (401 otherwise).

Fault injection, outside the API: ``POST /__test__/faults {"code": <ErrorCode name> | "status":
<int>, "type": ..., "count": n, "after": bool, "method": "GET"|"POST"}`` makes the next ``n`` API
requests (of that method, if given) fail; with ``after`` the request is applied first and its
response replaced by the error (a lost response).

    python server.py --storage-root DIR [--port PORT] [--token T]   (binds 127.0.0.1 only;
    prints ``LISTENING 127.0.0.1:<port>`` when ready)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, unquote, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from catalog import (  # run as a script: no package context
    ERRORS,
    REQUIRED_FEATURES,
    REQUIRED_PROPERTIES,
    REQUIRED_READER_FEATURES,
    UC_TABLE_ID,
    ApiError,
    Catalog,
    Commit,
    ContentCheck,
    Replay,
    Table,
    check,
    normalize_url,
)

LABEL = "UC OpenAPI test server (not the Unity Catalog OSS server)"
API = "/api/2.1/unity-catalog"
V1 = f"{API}/delta/v1"
V1_SCHEMA = re.compile(rf"^{V1}/catalogs/([^/]+)/schemas/([^/]+)/(staging-tables|tables)$")
V1_TABLE = re.compile(rf"^{V1}/catalogs/([^/]+)/schemas/([^/]+)/tables/([^/]+)$")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    catalog: Catalog
    token: str | None = None
    faults: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    # ---- plumbing --------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, delta_api: bool, code: str, message: str, *, status: int | None = None, error_type: str | None = None) -> None:
        legacy_status, delta_type, delta_status = ERRORS.get(code, (status or 500, error_type or "InternalServerErrorException", status or 500))
        if delta_api:
            status = status or delta_status
            self._send(status, {"error": {"code": status, "type": error_type or delta_type, "message": message}})
        else:
            status = status or legacy_status
            self._send(status, {"error_code": code, "message": message, "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": code}]})

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        path, query = unquote(url.path), parse_qs(url.query)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        delta_api = path.startswith(V1)
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            return self._error(delta_api, "INVALID_ARGUMENT", "malformed JSON body")
        if path == "/__test__/faults":
            Handler.faults.extend([body] * int(body.get("count", 1)))
            return self._send(200, {})
        if self.token is not None and self.headers.get("Authorization") != f"Bearer {self.token}":
            return self._error(delta_api, "UNAUTHENTICATED", "missing or invalid bearer token")
        fault = next((f for f in Handler.faults if f.get("method", method) == method), None)
        if fault is not None:
            Handler.faults.remove(fault)
        if fault and not fault.get("after"):
            return self._fault(delta_api, fault)
        try:
            with self.catalog.lock:
                status, out = self._route(method, path, query, body)
        except Replay:
            status, out = 200, self._replay_response(path)
        except ContentCheck as pending:
            try:
                pending.settle()
                status, out = 200, self._replay_response(path)
            except ApiError as exc:
                return self._error(delta_api, exc.code, exc.message)
        except ApiError as exc:
            return self._error(delta_api, exc.code, exc.message)
        except (KeyError, TypeError, ValueError) as exc:
            return self._error(delta_api, "INVALID_ARGUMENT", f"invalid request: {exc!r}")
        if fault:
            return self._fault(delta_api, fault)
        self._send(status, out)

    def _fault(self, delta_api: bool, fault: dict[str, Any]) -> None:
        self._error(delta_api, fault.get("code", ""), "injected fault", status=fault.get("status"), error_type=fault.get("type"))

    def _replay_response(self, path: str) -> dict[str, Any]:
        m = V1_TABLE.match(path)
        return self._load(self.catalog.get(".".join(m.groups()))) if m else {}

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if method == "POST" and path == f"{API}/staging-tables":
            s = self.catalog.create_staging(body["catalog_name"], body["schema_name"], body["name"])
            return 200, {"id": s.id, "name": s.name, "catalog_name": s.catalog, "schema_name": s.schema, "staging_location": s.location}
        if method == "POST" and path == f"{API}/tables":
            return 200, self._create_legacy(body)
        if method == "GET" and path.startswith(f"{API}/tables/"):
            return 200, self._table_info(self.catalog.get(path[len(f"{API}/tables/"):]))
        if path == f"{API}/delta/preview/commits":
            return (200, self._preview_get(body)) if method == "GET" else (200, self._preview_post(body))
        if method == "GET" and path == f"{V1}/config":
            check(bool(query.get("catalog")) and bool(query.get("protocol-versions")), "catalog and protocol-versions are required")
            return 200, {"endpoints": ["GET /v1/catalogs/{catalog}/schemas/{schema}/tables/{table}", "POST /v1/catalogs/{catalog}/schemas/{schema}/tables/{table}",
                                       "POST /v1/catalogs/{catalog}/schemas/{schema}/staging-tables", "POST /v1/catalogs/{catalog}/schemas/{schema}/tables"],
                         "protocol-version": "1.0"}
        m = V1_SCHEMA.match(path)
        if m and method == "POST":
            catalog, schema, kind = m.groups()
            return 200, (self._v1_staging(catalog, schema, body) if kind == "staging-tables" else self._v1_create(catalog, schema, body))
        m = V1_TABLE.match(path)
        if m:
            table = self.catalog.get(".".join(m.groups()))
            return 200, (self._load(table) if method == "GET" else self._update(table, body))
        raise ApiError("NOT_FOUND", f"{method} {path} is not served by the {LABEL}")

    # ---- UC REST API (all.yaml) -------------------------------------------------------------

    def _create_legacy(self, body: dict[str, Any]) -> dict[str, Any]:
        check(body.get("table_type") == "MANAGED" and body.get("data_source_format") == "DELTA",
              "the test server creates MANAGED DELTA tables only")
        table = self.catalog.create_managed(body["catalog_name"], body["schema_name"], body["name"], body.get("storage_location", ""),
                                            dict(body.get("properties") or {}), body.get("columns"), None, _now())
        return self._table_info(table)

    @staticmethod
    def _table_info(t: Table) -> dict[str, Any]:
        return {"name": t.name, "catalog_name": t.catalog, "schema_name": t.schema, "table_type": "MANAGED", "data_source_format": "DELTA",
                "storage_location": t.location, "table_id": t.id, "properties": t.properties, "created_at": t.created_ms}

    def _preview_get(self, body: dict[str, Any]) -> dict[str, Any]:
        table = self.catalog.get_by_id(body.get("table_id"))
        commits, latest = self.catalog.get_commits(table, body.get("start_version"), body.get("end_version"))
        return {"commits": [_preview_commit(c) for c in commits], "latest_table_version": latest}

    def _preview_post(self, body: dict[str, Any]) -> dict[str, Any]:
        check(bool(body.get("table_uri")), "Field can not be empty: table_uri")
        table = self.catalog.get_by_id(body.get("table_id"))
        check(normalize_url(body["table_uri"]) == normalize_url(table.location),
              f"Table URI in commit {body['table_uri']} does not match the table path {table.location}")
        info = body.get("commit_info")
        check(info is not None or body.get("latest_backfilled_version") is not None,
              "Either commit_info or latest_backfilled_version must be defined")
        self.catalog.post_commit(table, info, body.get("latest_backfilled_version"))
        return {}

    # ---- UC Delta API v1 (delta.yaml) ------------------------------------------------------

    def _v1_staging(self, catalog: str, schema: str, body: dict[str, Any]) -> dict[str, Any]:
        s = self.catalog.create_staging(catalog, schema, body.get("name", ""))
        return {"table-id": s.id, "table-type": "MANAGED", "location": s.location, "storage-credentials": [],
                "required-protocol": {"min-reader-version": 3, "min-writer-version": 7,
                                      "reader-features": REQUIRED_READER_FEATURES, "writer-features": REQUIRED_FEATURES},
                "required-properties": {**REQUIRED_PROPERTIES, UC_TABLE_ID: s.id}, "suggested-properties": {}}

    def _v1_create(self, catalog: str, schema: str, body: dict[str, Any]) -> dict[str, Any]:
        check(body.get("table-type") == "MANAGED", "the test server creates MANAGED tables only")
        for key in ("name", "location", "columns", "protocol", "properties", "last-commit-timestamp-ms"):
            check(key in body, f"Field can not be null: {key}")
        protocol, props = body["protocol"], body["properties"]
        check(protocol.get("min-reader-version", 0) >= 3 and protocol.get("min-writer-version", 0) >= 7, "protocol must be at least (3, 7)")
        missing = [f for f in REQUIRED_FEATURES if f not in (protocol.get("writer-features") or [])]
        missing += [f for f in REQUIRED_READER_FEATURES if f not in (protocol.get("reader-features") or [])]
        check(not missing, f"missing required table features: {sorted(set(missing))}")
        wrong = [k for k, v in REQUIRED_PROPERTIES.items() if props.get(k) != v]
        check(not wrong, f"required properties missing or wrong: {wrong}")
        table = self.catalog.create_managed(catalog, schema, body["name"], body["location"], dict(props), body["columns"], protocol, _now())
        return self._load(table)

    def _load(self, t: Table) -> dict[str, Any]:
        commits, latest, _ = self.catalog.unbackfilled(t)
        metadata = {"etag": t.id, "table-type": "MANAGED", "table-uuid": t.id, "location": t.location, "created-time": t.created_ms,
                    "updated-time": t.created_ms, "columns": t.columns or {"type": "struct", "fields": []},
                    "properties": {**t.properties, "delta.feature.catalogManaged": "supported"}}
        return {"metadata": metadata, "commits": [_v1_commit(c) for c in commits], "latest-table-version": latest}

    def _update(self, table: Table, body: dict[str, Any]) -> dict[str, Any]:
        requirements, updates = body.get("requirements") or [], body.get("updates") or []
        check(bool(updates), "updates must be non-empty")
        kinds = [r.get("type") for r in requirements]
        check(len(kinds) == len(set(kinds)), "at most one requirement of each type")
        check("assert-table-uuid" in kinds, "assert-table-uuid requirement is required.")
        for r in requirements:
            if r["type"] == "assert-table-uuid" and r.get("uuid") != table.id:
                raise ApiError("UPDATE_REQUIREMENT_CONFLICT", f"Table UUID mismatch: expected {r.get('uuid')}, found {table.id}")
            if r["type"] == "assert-etag" and r.get("etag") != table.id:
                raise ApiError("UPDATE_REQUIREMENT_CONFLICT", "etag mismatch")
        actions = {u.get("action"): u for u in updates}
        check(len(actions) == len(updates), "at most one update of each action type")
        unsupported = set(actions) - {"add-commit", "set-latest-backfilled-version"}
        if unsupported:
            raise ApiError("UNIMPLEMENTED", f"updates {sorted(unsupported)} are not implemented by the {LABEL}")
        info = None
        if "add-commit" in actions:
            c = actions["add-commit"]["commit"]
            info = {"version": c.get("version"), "timestamp": c.get("timestamp"), "file_name": c.get("file-name"),
                    "file_size": c.get("file-size"), "file_modification_timestamp": c.get("file-modification-timestamp")}
        backfilled = actions.get("set-latest-backfilled-version", {}).get("latest-published-version")
        check(info is not None or backfilled is not None, "At least one of add-commit or set-latest-backfilled-version is required.")
        self.catalog.post_commit(table, info, backfilled)
        return self._load(table)


def _preview_commit(c: Commit) -> dict[str, Any]:
    return {"version": c.version, "timestamp": c.timestamp, "file_name": c.file_name, "file_size": c.file_size,
            "file_modification_timestamp": c.file_modification_timestamp}


def _v1_commit(c: Commit) -> dict[str, Any]:
    return {"version": c.version, "timestamp": c.timestamp, "file-name": c.file_name, "file-size": c.file_size,
            "file-modification-timestamp": c.file_modification_timestamp}


def _now() -> int:
    return int(time.time() * 1000)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=LABEL)
    parser.add_argument("--port", type=int, default=0, help="0: the kernel picks a free port")
    parser.add_argument("--storage-root", required=True)
    parser.add_argument("--token")
    args = parser.parse_args(argv)
    Handler.catalog = Catalog(args.storage_root)
    Handler.token = args.token
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"{LABEL}, storage root {args.storage_root}", flush=True)
    print(f"LISTENING 127.0.0.1:{server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
