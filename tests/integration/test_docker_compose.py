"""The compose file is valid (``docker compose config``; the v1 ``docker-compose`` CLI if that is
what the machine has) and binds every published port to 127.0.0.1."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from airflow_delta_maintenance.maintenance.config.tables import load_config

DOCKER = Path(__file__).resolve().parents[2] / "docker"


def compose_command() -> list[str]:
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise RuntimeError("neither `docker compose` nor `docker-compose` is installed (make test installs docker-compose with apt)")


def test_compose_config_passes() -> None:
    result = subprocess.run([*compose_command(), "-f", str(DOCKER / "compose.yaml"), "config"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    assert {"api-server", "scheduler", "dag-processor", "triggerer", "spark-master", "spark-worker", "s3", "dynamodb"} <= set(services)
    for name in ("api-server", "scheduler", "dag-processor", "triggerer"):  # the repository's dags/ is their DAGs folder
        service = services[name]
        folder = service["environment"]["AIRFLOW__CORE__DAGS_FOLDER"]
        mounts = [(v["source"], v["target"]) if isinstance(v, dict) else tuple(v.split(":")[:2]) for v in service["volumes"]]  # long or short syntax
        assert (str(DOCKER.parent / "dags"), folder) in mounts, (name, mounts)


def test_published_ports_are_loopback_only_and_the_example_config_is_valid() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name}: {port}"
    tables = load_config(DOCKER / "tables.yaml")
    assert [t.name for t in tables] == ["orders", "events"]
