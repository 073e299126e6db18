"""Where ``make jars`` (``.ci/fetch-jars``) put the Maven Central jars, one directory per pom.

- ``delta-spark``: delta-spark, hadoop-aws, the AWS SDKs they need (``.ci/maven/delta-spark.xml``).
- ``dynamodb-local``: the official DynamoDB Local and its ``native/`` sqlite4java library.
- ``hadoop-azure``: hadoop-azure 3.5.0 (the ABFS driver) for abfss:// tables.
- ``gcs-connector``: the shaded Cloud Storage connector for gs:// tables.

Missing or stale jars are an error, never a skip: a skipped interop test looks like a passing one.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / ".cache" / "jars"
POMS = REPO / ".ci" / "maven"
FETCH_SCRIPT = REPO / ".ci" / "fetch-jars"

DELTA_SPARK = "delta-spark"
DYNAMODB_LOCAL = "dynamodb-local"
HADOOP_AZURE = "hadoop-azure"
GCS_CONNECTOR = "gcs-connector"


class JarsMissingError(RuntimeError):
    """The jars of a group were not fetched, or were fetched for another version of its pom."""


def _expected_stamp(group: str) -> str:
    """The stamp ``.ci/fetch-jars`` writes: sha1 of the pom followed by the script's sha1 and a newline."""
    script_sha = hashlib.sha1(FETCH_SCRIPT.read_bytes()).hexdigest()
    pom = (POMS / f"{group}.xml").read_bytes()
    return ".done-" + hashlib.sha1(pom + f"{script_sha}\n".encode()).hexdigest()[:12]


def jar_dir(group: str) -> Path:
    """The directory of one jar group, checked to be complete and current for its pom."""
    path = ROOT / group
    hint = "run `make jars` (`make test` does it first)"
    if not (POMS / f"{group}.xml").is_file():
        raise JarsMissingError(f"no jar group {group!r}: there is no {POMS / (group + '.xml')}")
    if not path.is_dir() or not any(path.glob("*.jar")):
        raise JarsMissingError(f"the {group!r} jars are missing under {path}: {hint}")
    if not (path / _expected_stamp(group)).exists():
        raise JarsMissingError(f"the {group!r} jars under {path} are stale (.ci/maven/{group}.xml or .ci/fetch-jars changed): {hint}")
    return path


def jar_list(group: str) -> list[str]:
    """Absolute paths of the group's jars, sorted (for ``spark.jars`` / ``--jars``, comma-joined)."""
    return sorted(str(p) for p in jar_dir(group).glob("*.jar"))


def classpath(group: str) -> str:
    """A JVM ``-cp`` value with every jar of the group."""
    return os.pathsep.join(jar_list(group))


def native_dir(group: str) -> Path:
    """The group's native libraries (``-Djava.library.path``); an error when it has none."""
    path = jar_dir(group) / "native"
    if not any(path.glob("*.so")):
        raise JarsMissingError(f"no native libraries in {path}: run `make jars`")
    return path


def delta_spark_jars() -> list[str]:
    """delta-spark 4.4.0 + its DynamoDB coordinator's AWS SDK v1 + hadoop-aws 3.5.0 with AWS SDK v2."""
    return jar_list(DELTA_SPARK)


def jar_version(group: str, artifact: str) -> str:
    """Version of ``<artifact>-<version>.jar`` in the group (to say in test output what ran)."""
    for jar in jar_dir(group).glob(f"{artifact}-*.jar"):
        return jar.stem[len(artifact) + 1 :]
    raise JarsMissingError(f"no {artifact} jar in {ROOT / group}: run `make jars`")
