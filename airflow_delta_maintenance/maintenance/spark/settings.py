"""Where and how a Spark job runs: ``SparkSettings`` (master, deploy mode, network, dependencies)
from the Spark connection's extras, operator arguments or CLI flags, and the driver's network
settings derived from them (a driver on this machine listens on 127.0.0.1 for local masters)."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar

__all__ = ["LOOPBACK", "DEPLOY_MODES", "SparkSettings", "local_spark_conf", "executors_here", "network_conf", "driver_env_conf"]


LOOPBACK = "127.0.0.1"


DEPLOY_MODES = ("client", "cluster")


def _flag(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off", ""):
        return False
    raise ValueError(f"Spark setting {name} must be true or false, got {value!r}")


def _port(value: Any, name: str) -> int:
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"Spark setting {name} must be a port number, got {value!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"Spark setting {name} must be a port number, got {value!r}")
    return port


def _conf_mapping(value: Any, name: str) -> dict[str, str]:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError as exc:
            raise ValueError(f"Spark setting {name} is not a JSON object ({exc})") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"Spark setting {name} must be an object of Spark conf keys to values, got {type(value).__name__}")
    return {str(k): str(v) for k, v in value.items()}


@dataclass(frozen=True)
class SparkSettings:
    """Where and how the jobs are submitted: what a user configures, once per cluster.

    Read from the Spark connection (``from_extras``: master and deploy mode as the Spark provider
    reads them, the rest from the extra JSON under the keys in ``EXTRA_KEYS``), then overridden by
    operator arguments or CLI flags (``override``).
    """

    master: str = "local[*]"
    deploy_mode: str = "client"
    # network of a driver on this machine (client mode)
    driver_host: str | None = None  # the address executors reach the driver at
    bind_address: str | None = None  # the local address the driver listens on
    driver_port: int | None = None
    block_manager_port: int | None = None
    ui_enabled: bool = False
    ui_port: int | None = None
    # dependencies and extra conf
    conf: Mapping[str, str] = field(default_factory=dict)
    jars: str | None = None
    packages: str | None = None
    repositories: str | None = None
    py_files: str | None = None
    ship_package: bool | None = None  # None: ship for every master but local
    python: str | None = None  # the executors' (and a cluster driver's) Python
    # Kubernetes
    container_image: str | None = None
    namespace: str | None = None
    service_account: str | None = None
    file_upload_path: str | None = None

    # extra key → field (keys as spark-submit spells its options)
    EXTRA_KEYS: ClassVar[dict[str, str]] = {
        "driver-host": "driver_host",
        "driver-bind-address": "bind_address",
        "driver-port": "driver_port",
        "block-manager-port": "block_manager_port",
        "ui-enabled": "ui_enabled",
        "ui-port": "ui_port",
        "conf": "conf",
        "jars": "jars",
        "packages": "packages",
        "repositories": "repositories",
        "py-files": "py_files",
        "ship-package": "ship_package",
        "python": "python",
        "container-image": "container_image",
        "namespace": "namespace",
        "service-account": "service_account",
        "file-upload-path": "file_upload_path",
    }

    def __post_init__(self) -> None:
        if self.deploy_mode not in DEPLOY_MODES:
            raise ValueError(f"Spark deploy mode must be client or cluster, got {self.deploy_mode!r}")

    @classmethod
    def from_extras(cls, master: str, deploy_mode: str | None, extra: Mapping[str, Any]) -> SparkSettings:
        return cls(master=master, deploy_mode=deploy_mode or "client").override(
            **{name: extra[key] for key, name in cls.EXTRA_KEYS.items() if key in extra}
        )

    def override(self, **values: Any) -> SparkSettings:
        """These settings with every value that is not None replaced (validated and typed)."""
        known = {f.name for f in fields(self)}
        out: dict[str, Any] = {}
        for name, value in values.items():
            if name not in known:
                raise ValueError(f"unknown Spark setting {name!r}")
            if value is None:
                continue
            if name in ("driver_port", "block_manager_port", "ui_port"):
                value = _port(value, name)
            elif name in ("ui_enabled", "ship_package"):
                value = _flag(value, name)
            elif name == "conf":
                value = {**self.conf, **_conf_mapping(value, name)}
            else:
                value = str(value)
            out[name] = value
        return replace(self, **out)

    @property
    def kind(self) -> str:
        """local, standalone, yarn, k8s or other."""
        m = self.master
        if m.startswith("local"):
            return "local"
        if m.startswith("spark://"):
            return "standalone"
        if m.startswith("yarn"):
            return "yarn"
        if m.startswith("k8s://"):
            return "k8s"
        return "other"

    def master_host(self) -> str | None:
        """The first master's host for standalone and k8s masters (None for local and yarn)."""
        rest = self.master.split("://", 1)[1] if "://" in self.master else ""
        if self.kind == "k8s":
            rest = rest.split("://", 1)[-1]
        host = rest.split(",")[0].split("/")[0]
        if host.startswith("["):
            return host[1 : host.find("]")]
        return host.rsplit(":", 1)[0] if ":" in host else (host or None)


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def executors_here(settings: SparkSettings) -> bool:
    """Executors run on this machine: a local master, or a standalone master on a loopback address."""
    return settings.kind == "local" or (settings.kind == "standalone" and _is_loopback(settings.master_host()))


def local_spark_conf() -> dict[str, str]:
    """For ``local[*]``: keep the driver and its UI off the network."""
    return {"spark.driver.bindAddress": LOOPBACK, "spark.driver.host": LOOPBACK, "spark.ui.enabled": "false"}


def network_conf(settings: SparkSettings) -> tuple[dict[str, str], dict[str, str]]:
    """(Spark conf, spark-submit process env) for the driver's network."""
    conf = {"spark.ui.enabled": str(settings.ui_enabled).lower()}
    if settings.ui_port is not None:
        conf["spark.ui.port"] = str(settings.ui_port)
    if settings.deploy_mode == "cluster":
        # the cluster places the driver (Kubernetes refuses these settings outright)
        if settings.driver_host or settings.bind_address:
            raise ValueError("driver-host / driver-bind-address apply to client deploy mode only: in cluster mode the cluster places the driver")
        return conf, {}
    host = settings.driver_host or (LOOPBACK if executors_here(settings) else None)
    bind = settings.bind_address or (host if _is_loopback(host) else None)
    if host:
        conf["spark.driver.host"] = host
    if bind:
        conf["spark.driver.bindAddress"] = bind
    if settings.driver_port is not None:
        conf["spark.driver.port"] = str(settings.driver_port)
    if settings.block_manager_port is not None:
        conf["spark.driver.blockManager.port"] = str(settings.block_manager_port)
    # the UI (when on) binds where SPARK_LOCAL_IP says, else on every interface
    local_ip = bind or host
    return conf, ({"SPARK_LOCAL_IP": local_ip} if local_ip else {})


def driver_env_conf(settings: SparkSettings, env: Mapping[str, str]) -> dict[str, str]:
    prefix = {"yarn": "spark.yarn.appMasterEnv.", "k8s": "spark.kubernetes.driverEnv."}.get(settings.kind)
    if prefix is None:
        raise ValueError(f"cluster deploy mode of master {settings.master} cannot run a Python driver; use client mode")
    return {prefix + k: v for k, v in env.items()}
