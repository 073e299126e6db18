"""``DeltaHealthNotifier``: tells someone that a table's backlog or checkpoint lag crossed its threshold.

The fleet report task calls its notifiers with the alerts of the run in the context key
``delta_health_alerts`` (one alert per figure that crossed its threshold since the previous report:
once per crossing, not on every run while it stays above). Targets: the task log, always; and,
with ``webhook_conn_id``, an HTTP POST of ``{"text": ..., "alerts": [...]}`` (the shape a Slack
incoming webhook takes). The webhook URL is secret for most services, so it comes from a
connection: its password when that holds a full ``http(s)://`` URL (e.g. a Slack webhook URL), else
``<scheme>://<host>[:<port>]<path>`` with the scheme from the connection's schema or type
(http/https, default https) and the path from the extra field ``path``. The URL is never logged.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from ..version_compat import BaseHook, BaseNotifier

__all__ = ["ALERTS_KEY", "DeltaHealthNotifier", "alert_text"]

ALERTS_KEY = "delta_health_alerts"


def alert_text(alerts: Sequence[Mapping[str, Any]]) -> str:
    lines = [
        f"- {a['table']} ({a['table_uri']}): {str(a['figure']).replace('_', ' ')} is {a['value']}, above its threshold {a['threshold']}"
        for a in alerts
    ]
    return f"Delta maintenance: {len(alerts)} threshold crossing(s)\n" + "\n".join(lines)


class DeltaHealthNotifier(BaseNotifier):
    """Send the fleet report's threshold crossings to the log and, optionally, a webhook.

    :param webhook_conn_id: connection holding the webhook URL (see the module docstring); None: log only
    :param timeout: seconds for the HTTP POST
    """

    template_fields = ("webhook_conn_id",)

    def __init__(self, *, webhook_conn_id: str | None = None, timeout: float = 10.0) -> None:
        super().__init__()
        self.webhook_conn_id = webhook_conn_id
        self.timeout = timeout

    def _url(self, conn_id: str) -> str:
        conn = BaseHook.get_connection(conn_id)
        password = conn.password or ""
        if password.startswith(("http://", "https://")):
            return password
        if not conn.host:
            raise ValueError(f"connection {self.webhook_conn_id!r} has neither a webhook URL in its password nor a host")
        scheme = next((s for s in (conn.schema, conn.conn_type) if s in ("http", "https")), "https")
        path = str(conn.extra_dejson.get("path") or "/")
        port = f":{conn.port}" if conn.port else ""
        return f"{scheme}://{conn.host}{port}{path if path.startswith('/') else '/' + path}"

    def notify(self, context: Any) -> None:
        alerts = list(context.get(ALERTS_KEY) or [])
        if not alerts:
            return
        text = alert_text(alerts)
        self.log.warning("%s", text)
        conn_id = self.webhook_conn_id
        if not conn_id:
            return
        body = json.dumps({"text": text, "alerts": alerts}).encode("utf-8")
        request = urllib.request.Request(self._url(conn_id), data=body, method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            status = response.status
        self.log.info("sent %d alert(s) to the webhook of connection %s (HTTP %d)", len(alerts), self.webhook_conn_id, status)
