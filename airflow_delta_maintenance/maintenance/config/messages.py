"""pydantic's validation errors as the configuration's own messages: one per mistake, naming the
key path as the YAML writes it (``cleanup.mode``, ``discovery.sources[0].catalog``) and saying what
is expected and what was given, in YAML's words (true/false, a mapping, a list) — never pydantic's
``Input should be a valid …`` or its links."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Union

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

__all__ = ["key_path", "mistakes"]

# what a value of the wrong type was expected to be, by pydantic's error type
_EXPECTED = {
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dict_type": "a mapping",
    "list_type": "a list",
    "tuple_type": "a list",
}


def key_path(parts: Sequence[str | int]) -> str:
    """``("sources", 0, "catalog")`` → ``sources[0].catalog``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def mistakes(exc: ValidationError, model: type[BaseModel], keep: Callable[[ErrorDetails], bool] | None = None) -> Iterator[tuple[list[str | int], str]]:
    """(key path parts, message) of each error of ``exc``, raised by validating ``model`` (those
    ``keep`` keeps)."""
    for error in exc.errors(include_url=False):
        if keep is not None and not keep(error):
            continue
        parts, owner, field = _resolve(model, error["loc"])
        yield parts, _message(error, owner, field)


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _message(error: ErrorDetails, owner: type[BaseModel] | None, field: str | None) -> str:
    kind, given, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return str(ctx["error"])
    if kind == "extra_forbidden":
        allowed = ", ".join(sorted(_keys(owner))) if owner is not None else "none"
        return f"unknown key (allowed: {allowed})"
    if kind == "missing":
        custom = getattr(owner, "missing_messages", {}).get(field) if owner is not None else None
        return custom or "required"
    if kind == "literal_error":
        return f"expected {str(ctx.get('expected', '')).replace(chr(39), '')}, got {given!r}"
    if kind == "bool_type" or (kind in ("int_type", "float_type") and isinstance(given, bool)):
        return f"expected {_EXPECTED[kind]}, got {given!r}"
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, got {given!r}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        sign, bound = {"greater_than_equal": (">=", "ge"), "greater_than": (">", "gt"), "less_than_equal": ("<=", "le"), "less_than": ("<", "lt")}[kind]
        return f"must be {sign} {_number(ctx.get(bound))}, got {given!r}"
    if kind == "too_short":
        return f"expected a non-empty list, got {given!r}" if not given else f"expected at least {ctx.get('min_length')} item(s), got {given!r}"
    if isinstance(given, dict | list):  # a custom error (a union's tag not found): its message says it
        return str(error["msg"])
    return f"{error['msg']}, got {given!r}"  # a kind the configuration does not produce today


def _keys(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation holds directly (``X``, ``X | None``, ``Annotated[X, ...]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]
    return []


def _items_of(annotation: Any) -> Any:
    """The type of the items of a list, tuple or mapping annotation (``None`` if it is none)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _items_of(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        found = [t for t in (_items_of(a) for a in typing.get_args(annotation)) if t is not None]
        return found[0] if found else None
    args = typing.get_args(annotation)
    if origin in (list, tuple, typing.Sequence) and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None


def _resolve(model: type[BaseModel], loc: tuple[str | int, ...]) -> tuple[list[str | int], type[BaseModel] | None, str | None]:
    """The key path of ``loc`` (without a tagged union's tag), the model that holds the last key
    and that key: walks the annotations along the path."""
    parts: list[str | int] = []
    current: Any = model
    owner: type[BaseModel] | None = model
    field: str | None = None
    for part in loc:
        models = _models_in(current)
        tagged = next((m for m in models if isinstance(part, str) and getattr(m, "tag", None) == part), None)
        if tagged is not None:  # a tagged union's tag: not a key of the file
            current = tagged
            continue
        if isinstance(part, str) and models:
            holder = next((m for m in models if part in m.model_fields), None)
            owner, field = (holder or (models[0] if len(models) == 1 else None)), part
            parts.append(part)
            current = holder.model_fields[part].annotation if holder is not None else None
            continue
        parts.append(part)
        owner, field = None, None
        current = _items_of(current)
    return parts, owner, field
