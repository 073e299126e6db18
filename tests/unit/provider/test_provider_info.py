"""The provider's declaration: ``provider.yaml`` is the one source; the provider info Airflow reads,
the hooks' connection forms (for Airflow before 3.2) and what ``airflow providers`` shows agree
with it field by field."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import airflow
import jsonschema
import pytest
import yaml

from airflow_delta_maintenance import __version__
from airflow_delta_maintenance.get_provider_info import DECLARATION, get_provider_info
from airflow_delta_maintenance.hooks.coordinator import DeltaCoordinatorHook
from airflow_delta_maintenance.hooks.storage import DeltaStorageHook

HOOKS = (DeltaStorageHook, DeltaCoordinatorHook)
REPO = Path(__file__).resolve().parents[3]


def declared() -> dict[str, Any]:
    """provider.yaml as written."""
    return yaml.safe_load(DECLARATION.read_text(encoding="utf-8"))


def by_type(info: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["connection-type"]: c for c in info["connection-types"]}


def test_provider_info_validates_against_airflows_schema() -> None:
    with open(os.path.join(os.path.dirname(airflow.__file__), "provider_info.schema.json")) as f:
        jsonschema.validate(get_provider_info(), json.load(f))


def test_the_provider_info_is_provider_yaml_with_the_version_and_the_extra_fields_placeholders() -> None:
    info, yml = get_provider_info(), declared()
    assert info["versions"] == [__version__] and "versions" not in yml, "the version is written once, as __version__"
    assert {k: v for k, v in info.items() if k not in ("versions", "connection-types")} == {k: v for k, v in yml.items() if k != "connection-types"}
    assert list(by_type(info)) == ["delta_storage", "delta_coordinator"]
    for conn_type, written in by_type(yml).items():
        given = by_type(info)[conn_type]
        for key in ("hook-class-name", "hook-name", "conn-fields"):
            assert given[key] == written[key], (conn_type, key)
        behaviour, written_behaviour = given["ui-field-behaviour"], written["ui-field-behaviour"]
        assert behaviour["hidden-fields"] == written_behaviour["hidden-fields"] and behaviour["relabeling"] == written_behaviour["relabeling"]
        examples = {name: field["schema"]["examples"][0] for name, field in written["conn-fields"].items()}
        assert behaviour["placeholders"] == {**written_behaviour.get("placeholders", {}), **examples}, conn_type
        for name, field in written["conn-fields"].items():  # each field: a label, and its example in its description
            assert field["label"] and f"e.g. {examples[name]}" in field["description"], (conn_type, name)


def test_the_fields_the_issue_found_missing_are_declared_for_both_forms() -> None:
    """Issue 30: the storage connection's role_arn, aws_conn_id and test_location, and the
    coordinator's aws_conn_id, were missing from the provider info's placeholders."""
    info = by_type(get_provider_info())
    assert {"role_arn", "aws_conn_id", "test_location"} <= set(info["delta_storage"]["ui-field-behaviour"]["placeholders"])
    assert {"role_arn", "aws_conn_id", "test_location"} <= set(info["delta_storage"]["conn-fields"])
    assert "aws_conn_id" in info["delta_coordinator"]["ui-field-behaviour"]["placeholders"] and "aws_conn_id" in info["delta_coordinator"]["conn-fields"]


def test_the_hooks_forms_are_the_declaration_field_by_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a hook tells Airflow before 3.2: its name, the hidden, relabelled and placeholder
    fields, and a form field per declared extra field with the declared label and description. (Flask-AppBuilder
    and wtforms belong to Airflow 2's web server: stand-ins record what the hook builds.)"""

    class Field:
        def __init__(self, label: str, widget: object, description: str | None = None) -> None:
            self.label, self.widget, self.description = label, widget, description

    class StringField(Field): ...

    class PasswordField(Field): ...

    for name, attrs in {
        "flask_appbuilder": {}, "flask_appbuilder.fieldwidgets": {"BS3TextFieldWidget": object, "BS3PasswordFieldWidget": object},
        "flask_babel": {"lazy_gettext": lambda text: text}, "wtforms": {"StringField": StringField, "PasswordField": PasswordField},
    }.items():
        monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(**attrs))
    info = by_type(get_provider_info())
    for hook in HOOKS:
        entry = info[hook.conn_type]
        assert hook.hook_name == entry["hook-name"] and f"{hook.__module__}.{hook.__name__}" == entry["hook-class-name"]
        behaviour = hook.get_ui_field_behaviour()
        assert behaviour == {"hidden_fields": entry["ui-field-behaviour"]["hidden-fields"], "relabeling": entry["ui-field-behaviour"]["relabeling"],
                             "placeholders": entry["ui-field-behaviour"]["placeholders"]}, hook
        widgets = hook.get_connection_form_widgets()
        assert {name: (type(w), w.label, w.description) for name, w in widgets.items()} == \
            {name: (StringField, f["label"], f["description"]) for name, f in entry["conn-fields"].items()}


def test_the_two_connection_types_are_named_alike() -> None:
    names = [c["hook-name"] for c in get_provider_info()["connection-types"]]
    assert names == ["Delta Lake storage", "Delta Lake commit coordinator"]


def test_the_docs_field_tables_are_the_declaration() -> None:
    """Each connection page's field table names every declared extra field with its label."""
    for conn_type, conn in by_type(get_provider_info()).items():
        page = (REPO / "docs" / "connections" / f"{conn_type}.md").read_text(encoding="utf-8")
        assert page.startswith(f"# {conn['hook-name']} connection"), conn_type
        rows = {m.group(2): m.group(1).strip() for m in re.finditer(r"^\| ([^|]+) \| extra `(\w+)` \|", page, flags=re.M)}
        assert rows == {name: field["label"] for name, field in conn["conn-fields"].items()}, conn_type


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


def test_provider_is_discovered_by_airflow() -> None:
    from airflow.providers_manager import ProvidersManager

    assert "airflow-delta-maintenance" in ProvidersManager().providers


def airflow_cli(tmp_path: Path, *args: str) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env["AIRFLOW_HOME"] = str(tmp_path)
    env["AIRFLOW__LOGGING__LOGGING_LEVEL"] = "WARNING"  # Airflow 3.0 logs its plugins' setup to stdout, before the JSON
    out = subprocess.run([str(Path(sys.executable).with_name("airflow")), *args, "-o", "json"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.slow  # the Airflow CLI in a process of its own: make test runs it, the fast tier does not
def test_airflow_providers_list_shows_the_provider(tmp_path: Path) -> None:
    assert any(p["package_name"] == "airflow-delta-maintenance" for p in airflow_cli(tmp_path, "providers", "list"))


@pytest.mark.slow  # the Airflow CLI twice, each in a process of its own: make test runs it, the fast tier does not
def test_airflow_providers_get_shows_the_declaration(tmp_path: Path) -> None:
    """``airflow providers get airflow-delta-maintenance --full``, through the Airflow CLI: the
    version, both connection types with every declared field and placeholder; ``providers
    widgets`` lists every extra field of both types."""
    (shown,) = airflow_cli(tmp_path, "providers", "get", "airflow-delta-maintenance", "--full")
    info = get_provider_info()
    assert shown["versions"] == [__version__]
    assert by_type(shown) == by_type(info)
    widgets = {w["connection_parameter_name"] for w in airflow_cli(tmp_path, "providers", "widgets")}
    expected = {f"extra__{conn_type}__{name}" for conn_type, conn in by_type(info).items() for name in conn["conn-fields"]}
    assert expected <= widgets, sorted(expected - widgets)


def test_extra_fields_show_their_examples_in_airflow_3s_connection_form() -> None:
    """What the UI's connection form receives (the hook-meta service of the REST API): every extra
    field of both connection types has its declared title and a description with its example; the
    standard fields their placeholders and labels."""
    from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService

    meta = {m.connection_type: m for m in HookMetaService.hook_meta_data()}
    for conn_type, conn in by_type(get_provider_info()).items():
        extra = meta[conn_type].extra_fields
        assert meta[conn_type].hook_name == conn["hook-name"]
        for name, declared_field in conn["conn-fields"].items():
            field = extra[name]
            assert field["schema"]["title"] == declared_field["label"] and field["description"] == declared_field["description"], (conn_type, name)
            assert declared_field["schema"]["examples"][0] in field["description"]  # (Airflow 3.0/3.1's form schema has no examples)
    assert meta["delta_coordinator"].standard_fields.host.placeholder.startswith("local:///")
    assert meta["delta_coordinator"].standard_fields.host.title == "Coordinator spec" and meta["delta_storage"].standard_fields.host.hidden
