"""Arrow's C++ S3 client for bulk listings, built from exactly what the table's s3fs client uses.

s3fs (through botocore) parses every LIST page's XML in Python: listing a large table root costs
more CPU than the rest of a VACUUM plan. Arrow's ``S3FileSystem`` lists in C++ and releases the
GIL. ``native_s3`` gives one only when it would reach the same objects as the same principal:

- **the same endpoint, region and addressing**, read from the connected s3fs client (whatever set
  them: storage options, the Airflow connection, ``AWS_ENDPOINT_URL``, a profile); an endpoint
  with a path, or botocore S3 settings Arrow has no equivalent for, keep s3fs;
- **the same credentials**: the fixed keys s3fs was given, else the current keys of the session
  s3fs draws from (a role's refreshable set, a profile, the environment's chain), frozen.
  Arrow cannot refresh a botocore credential provider, so each listing task takes the keys anew
  (botocore refreshes them ten minutes or more before they expire): a snapshot serves one
  prefix's listing, and a client is kept only while the keys it was made with are current;
- **the same patience**: botocore's read and connect timeouts and attempts as s3fs set them;
- **no option left out**: requester-pays, extra request parameters (``s3_additional_kwargs``),
  turned-off TLS verification, proxies, per-bucket regions (``cache_regions``), an unknown option:
  s3fs lists as before.

Without Arrow's S3 support (a pyarrow built without it), or with
``DELTA_MAINTENANCE_NATIVE_S3=0`` in the environment, callers get None and keep s3fs. Secrets go
to Arrow's constructor only: never logged, never in a ``repr``.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .fsspec_files import S3, backend_of

if TYPE_CHECKING:
    import fsspec
    import pyarrow.fs

__all__ = ["NativeS3", "native_s3", "NATIVE_S3_ENV"]

log = logging.getLogger(__name__)
NATIVE_S3_ENV = "DELTA_MAINTENANCE_NATIVE_S3"

# s3fs constructor options that change nothing about which objects a LIST returns, or how it
# authenticates, beyond what is read from the connected client below.
_NEUTRAL_OPTIONS = frozenset({
    "anon", "endpoint_url", "key", "secret", "token", "username", "password", "use_ssl", "client_kwargs", "config_kwargs", "session",
    "profile", "default_block_size", "default_fill_cache", "default_cache_type", "version_aware", "asynchronous", "loop",
    "max_concurrency", "fixed_upload_size", "local_expiry_check", "skip_instance_cache", "use_listings_cache", "listings_expiry_time",
    "max_paths", "requester_pays", "s3_additional_kwargs", "cache_regions",
})
_CLIENT_KWARGS = frozenset({"endpoint_url", "region_name", "use_ssl", "verify"})
_CONFIG_KWARGS = frozenset({"connect_timeout", "read_timeout", "retries", "max_pool_connections", "region_name", "signature_version", "s3",
                            "user_agent_extra", "tcp_keepalive"})
_PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


class NativeS3:
    """How to build Arrow S3 clients equal to one s3fs client: fixed settings, and the keys read
    anew for each ``client()`` (the client is reused while they stay the same)."""

    def __init__(self, settings: Mapping[str, Any], fs: Any) -> None:
        self.settings = dict(settings)  # endpoint, scheme, region, addressing, CA file: no secrets
        self._fs = fs
        self._lock = threading.Lock()
        self._last: tuple[tuple[Any, ...], Any] | None = None

    def __repr__(self) -> str:  # never a secret
        return f"NativeS3({self.settings!r})"

    def client(self) -> pyarrow.fs.S3FileSystem:
        """An Arrow client with the s3fs client's current keys (refreshed first by botocore when due)."""
        make = importlib.import_module("pyarrow._s3fs").S3FileSystem

        keys = _current_keys(self._fs)
        ident = tuple(sorted(keys.items()))
        with self._lock:
            if self._last is None or self._last[0] != ident:
                self._last = (ident, make(**self.settings, **keys))
            return self._last[1]


def native_s3(fs: fsspec.AbstractFileSystem) -> NativeS3 | None:
    """An Arrow S3 client factory equal to the s3fs client ``fs`` (see the module docstring), or
    None where s3fs must keep doing the listing."""
    if backend_of(fs) != S3 or os.environ.get(NATIVE_S3_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    reason = _unsupported(fs)
    if reason is None:
        try:
            importlib.import_module("pyarrow._s3fs")  # Arrow built with S3 support
        except ImportError:
            reason = "pyarrow is built without S3 support"
    if reason is None:
        try:
            settings = _settings(fs)
        except _Unsupported as exc:
            reason = str(exc)
        except Exception as exc:  # noqa: BLE001 - s3fs could not even make its client: let it report that itself
            reason = f"s3fs's client: {type(exc).__name__}"
    if reason is not None:
        log.debug("listing with s3fs: %s", reason)
        return None
    return NativeS3(settings, fs)


class _Unsupported(Exception):
    pass


def _unsupported(fs: Any) -> str | None:
    unknown = sorted(set(getattr(fs, "storage_options", {}) or {}) - _NEUTRAL_OPTIONS)
    if unknown:
        return f"storage option(s) {', '.join(unknown)}"
    if getattr(fs, "requester_pays", False) or getattr(fs, "s3_additional_kwargs", None):
        return "requester-pays or extra request parameters"
    if getattr(fs, "cache_regions", False):
        return "per-bucket regions (cache_regions)"
    extra_client = set(getattr(fs, "client_kwargs", {}) or {}) - _CLIENT_KWARGS
    extra_config = set(getattr(fs, "config_kwargs", {}) or {}) - _CONFIG_KWARGS
    if extra_client or extra_config:
        return f"client option(s) {', '.join(sorted(extra_client | extra_config))}"
    if any(os.environ.get(k) for k in _PROXY_ENV):
        return "a proxy in the environment"
    return None


def _settings(fs: Any) -> dict[str, Any]:
    client = fs.connect()  # s3fs's aiobotocore client (made already when the log was read)
    meta = client.meta
    s3_config = dict(getattr(meta.config, "s3", None) or {})
    if set(s3_config) - {"addressing_style"}:
        raise _Unsupported(f"botocore S3 setting(s) {', '.join(sorted(set(s3_config) - {'addressing_style'}))}")
    if getattr(meta.config, "signature_version", None) not in (None, "s3v4") and not fs.anon:
        raise _Unsupported(f"signature version {meta.config.signature_version}")
    verify = (getattr(fs, "client_kwargs", {}) or {}).get("verify")
    if verify is False:
        raise _Unsupported("TLS verification turned off")
    url = urlsplit(str(meta.endpoint_url))
    if url.path not in ("", "/") or url.query or not url.hostname:
        raise _Unsupported("an endpoint with a path")
    style = s3_config.get("addressing_style") or "auto"
    settings: dict[str, Any] = {"region": meta.region_name or "us-east-1", **_patience(meta.config)}
    aws = url.hostname.endswith((".amazonaws.com", ".amazonaws.com.cn"))
    if not aws or style == "path":  # Arrow addresses a bucket by path once the endpoint is set
        settings.update(endpoint_override=url.netloc, scheme=url.scheme or "https", force_virtual_addressing=style == "virtual")
    ca = verify if isinstance(verify, str) else os.environ.get("AWS_CA_BUNDLE")
    if ca:
        settings["tls_ca_file_path"] = ca
    if fs.anon:
        settings["anonymous"] = True
    return settings


def _patience(config: Any) -> dict[str, Any]:
    """s3fs's timeouts and retries. Arrow's client (curl) would otherwise give up on a LIST page
    that sends nothing for 3 s — a busy store's large page, several prefixes listed at once."""
    from pyarrow.fs import AwsStandardS3RetryStrategy

    retries = dict(getattr(config, "retries", None) or {})
    attempts = int(retries.get("total_max_attempts") or int(retries.get("max_attempts") or 4) + 1)
    out: dict[str, Any] = {"retry_strategy": AwsStandardS3RetryStrategy(max_attempts=max(attempts, 3))}
    for ours, theirs in (("request_timeout", "read_timeout"), ("connect_timeout", "connect_timeout")):
        value = getattr(config, theirs, None)
        if isinstance(value, (int, float)) and value > 0:
            out[ours] = float(value)
    return out


def _current_keys(fs: Any) -> dict[str, Any]:
    """The keys s3fs signs with now: its fixed ones, else its session's (frozen)."""
    if fs.anon:
        return {}
    if fs.key and fs.secret:
        return {"access_key": fs.key, "secret_key": fs.secret, "session_token": fs.token or None}
    from fsspec.asyn import sync

    fs.connect()
    creds = sync(fs.loop, fs.session.get_credentials)
    if creds is None:
        raise PermissionError("no AWS credentials: neither the storage options nor the environment give any")
    # a refreshable set refreshes here when it expires soon (aiobotocore's call is a coroutine)
    get = creds.get_frozen_credentials
    frozen = sync(fs.loop, get) if inspect.iscoroutinefunction(get) else get()
    return {"access_key": frozen.access_key, "secret_key": frozen.secret_key, "session_token": frozen.token or None}
