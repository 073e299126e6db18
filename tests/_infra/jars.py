"""Where ``make jars`` (``.ci/fetch-jars``) put the Maven Central jars."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / ".cache" / "jars"


def jar_dir(group: str) -> Path:
    """The directory of one jar group; a clear failure (never a skip) when it was not fetched."""
    path = ROOT / group
    if not path.is_dir() or not any(path.glob("*.jar")):
        raise RuntimeError(f"jars for {group!r} are missing under {ROOT}: run `make jars` (make test does it)")
    return path


def jar_list(group: str) -> list[str]:
    return sorted(str(p) for p in jar_dir(group).glob("*.jar"))
