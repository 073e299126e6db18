"""What every model of the configuration shares: strict, frozen, no unknown key; and the field
types the YAML needs beyond pydantic's own (a section given as ``false``, a list of strings, a
mapping whose values become strings).

Strict: YAML already types its scalars, so ``"3"`` is not an integer and ``true`` is not a number;
a mistake is reported, never coerced into something the user did not write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, GetJsonSchemaHandler, WithJsonSchema, model_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticUseDefault

__all__ = ["ConfigModel", "OptInSection", "Section", "StringList", "StringMapping", "section_shorthand"]


class ConfigModel(BaseModel):
    """A mapping of the YAML configuration: typed, strict, immutable, closed."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, validate_default=False)


def section_shorthand(value: Any) -> Any:
    """``false`` disables a section, ``true`` enables it; null (``sensor:`` with nothing after it)
    takes its defaults; a mapping sets some of its keys."""
    if value is None:
        raise PydanticUseDefault()
    if isinstance(value, bool):
        return {"enabled": value}
    if not isinstance(value, Mapping | BaseModel):
        raise ValueError(f"expected a mapping or false, got {value!r}")
    return value


class OptInSection(ConfigModel):
    """A section that is off unless the table asks for it (``optimize:``, ``vacuum:``): given as
    ``true`` or as a mapping of some of its keys without ``enabled``, it is on; absent, null or
    ``{}``, off."""

    enabled: bool = False

    @model_validator(mode="before")
    @classmethod
    def _given_means_enabled(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data and "enabled" not in data:
            return {**data, "enabled": True}
        return data


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
