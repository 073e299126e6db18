from __future__ import annotations

import importlib
import json
import os

import airflow
import jsonschema

from airflow_delta_maintenance.get_provider_info import get_provider_info
from airflow_delta_maintenance.hooks.coordinator import DeltaCoordinatorHook
from airflow_delta_maintenance.hooks.storage import DeltaStorageHook


def test_provider_info_validates_against_airflows_schema() -> None:
    with open(os.path.join(os.path.dirname(airflow.__file__), "provider_info.schema.json")) as f:
        jsonschema.validate(get_provider_info(), json.load(f))


def test_every_listed_module_and_hook_class_imports() -> None:
    info = get_provider_info()
    for section in ("operators", "sensors", "triggers", "hooks"):
        for entry in info[section]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
    for conn in info["connection-types"]:
        module, _, cls = conn["hook-class-name"].rpartition(".")
        hook = getattr(importlib.import_module(module), cls)
        assert hook.conn_type == conn["connection-type"] and hook.hook_name == conn["hook-name"]


def test_form_fields_are_declared_the_same_way_twice() -> None:
    from airflow_delta_maintenance.hooks.storage import STORAGE_FIELDS

    by_type = {c["connection-type"]: c for c in get_provider_info()["connection-types"]}
    assert set(by_type["delta_storage"]["conn-fields"]) == set(STORAGE_FIELDS)
    assert set(by_type["delta_coordinator"]["conn-fields"]) == {"aws_conn_id"}
    for hook in (DeltaStorageHook, DeltaCoordinatorHook):
        try:  # the legacy form widgets need Flask-AppBuilder, which Airflow 3 does not install
            widgets = hook.get_connection_form_widgets()
        except ModuleNotFoundError:
            continue
        assert set(widgets) == set(by_type[hook.conn_type]["conn-fields"])
    for hook in (DeltaStorageHook, DeltaCoordinatorHook):
        entry = by_type[hook.conn_type]
        behaviour = hook.get_ui_field_behaviour()
        assert behaviour["hidden_fields"] == entry["ui-field-behaviour"]["hidden-fields"]
        assert behaviour["relabeling"] == entry["ui-field-behaviour"]["relabeling"]


def test_provider_is_discovered_by_airflow() -> None:
    from airflow.providers_manager import ProvidersManager

    assert "airflow-delta-maintenance" in ProvidersManager().providers


def test_airflow_providers_list_shows_the_provider(tmp_path) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env["AIRFLOW_HOME"] = str(tmp_path)
    out = subprocess.run([str(Path(sys.executable).with_name("airflow")), "providers", "list", "-o", "json"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert any(p["package_name"] == "airflow-delta-maintenance" for p in json.loads(out.stdout))


def test_extra_fields_show_their_examples_in_airflow_3s_connection_form() -> None:
    """What the UI's connection form receives (the hook-meta service of the REST API): every extra
    field of both connection types has a title and a description with an example."""
    from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService

    meta = {m.connection_type: m for m in HookMetaService.hook_meta_data()}
    for conn_type, fields in (("delta_storage", ("endpoint_url", "role_arn", "aws_conn_id", "test_location")), ("delta_coordinator", ("aws_conn_id",))):
        extra = meta[conn_type].extra_fields
        for name in fields:
            field = extra[name]
            assert field["schema"]["title"] and "e.g. " in field["description"], (conn_type, name, field)
            assert field["schema"]["examples"][0] in field["description"]
    assert meta["delta_coordinator"].standard_fields.host.placeholder.startswith("local:///")
