"""The connection forms of the hooks, derived from ``provider.yaml`` (``get_provider_info``):
``get_ui_field_behaviour`` and ``get_connection_form_widgets`` are what Airflow before 3.2 asks a
hook for; Airflow 3.2+ reads the same declaration from the provider info."""

from __future__ import annotations

from typing import Any

from ..get_provider_info import connection_type

__all__ = ["connection_form_widgets", "declared_hook_name", "ui_field_behaviour"]


def declared_hook_name(conn_type: str) -> str:
    return str(connection_type(conn_type)["hook-name"])


def ui_field_behaviour(conn_type: str) -> dict[str, Any]:
    """``get_ui_field_behaviour``: the hidden and relabelled standard fields, the placeholders."""
    behaviour = connection_type(conn_type).get("ui-field-behaviour", {})
    return {
        "hidden_fields": list(behaviour.get("hidden-fields", [])),
        "relabeling": dict(behaviour.get("relabeling", {})),
        "placeholders": dict(behaviour.get("placeholders", {})),
    }


def connection_form_widgets(conn_type: str) -> dict[str, Any]:
    """``get_connection_form_widgets``: a text field per declared extra field (a password field
    for one whose schema says ``format: password``), labelled and described (its example) as declared. Needs Flask-AppBuilder,
    which only the web server of Airflow before 3 has."""
    from flask_appbuilder.fieldwidgets import BS3PasswordFieldWidget, BS3TextFieldWidget
    from flask_babel import lazy_gettext
    from wtforms import PasswordField, StringField

    widgets: dict[str, Any] = {}
    for name, field in connection_type(conn_type).get("conn-fields", {}).items():
        secret = field.get("schema", {}).get("format") == "password"
        kind, widget = (PasswordField, BS3PasswordFieldWidget) if secret else (StringField, BS3TextFieldWidget)
        widgets[name] = kind(lazy_gettext(field["label"]), widget=widget(), description=field.get("description"))
    return widgets
