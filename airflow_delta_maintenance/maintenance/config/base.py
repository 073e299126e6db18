"""What every model of the configuration shares: strict, frozen, no unknown key; and the field
types the YAML needs beyond pydantic's own (a section given as ``false``, a list of strings, a
mapping whose values become strings).

Strict: YAML already types its scalars, so ``"3"`` is not an integer and ``true`` is not a number;
a mistake is reported, never coerced into something the user did not write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, GetJsonSchemaHandler, WithJsonSchema
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

__all__ = ["ConfigModel", "Section", "StringList", "StringMapping", "section_shorthand"]


class ConfigModel(BaseModel):
    """A mapping of the YAML configuration: typed, strict, immutable, closed."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, validate_default=False)


def section_shorthand(value: Any) -> Any:
    """``false`` disables a section; ``true`` or null (``sensor:`` with nothing after it) take its
    defaults; a mapping sets some of its keys."""
    if value is False:
        return {"enabled": False}
    if value is None or value is True:
        return {}
    if not isinstance(value, Mapping | BaseModel):
        raise ValueError(f"expected a mapping or false, got {value!r}")
    return value


class _SectionJsonSchema:
    """The JSON schema of a section field: the section's mapping, or a boolean, or null."""

    def __get_pydantic_json_schema__(self, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {"anyOf": [handler(core_schema), {"type": "boolean"}, {"type": "null"}]}


S = TypeVar("S", bound=ConfigModel)
# A table's section (``sensor:``, ``checkpoint:`` ...): its model, or false / true / null.
Section = Annotated[S, BeforeValidator(section_shorthand), _SectionJsonSchema()]


def _string_list(value: Any) -> Any:
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"expected a list of strings, got {value!r}")
    return tuple(value)


StringList = Annotated[tuple[str, ...], BeforeValidator(_string_list), WithJsonSchema({"type": "array", "items": {"type": "string"}})]


def _string_mapping(value: Any) -> Any:
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a mapping of keys to values, got {value!r}")
    return {str(k): str(v) for k, v in value.items()}


# Values as YAML types them (``spark.executor.cores: 2``), kept as the strings Spark conf takes.
StringMapping = Annotated[
    dict[str, str],
    BeforeValidator(_string_mapping),
    WithJsonSchema({"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}),
]
