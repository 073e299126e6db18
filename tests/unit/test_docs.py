"""The documentation: the Sphinx site builds with no warning, the README stays a short entry point
whose links resolve, and what the pages state about the code still holds — the ``tables.yaml``
reference lists exactly the keys the validator accepts, every dotted name of the package they
mention exists, and every Python example runs."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_delta_maintenance.cli import main as cli_main

pytestmark = pytest.mark.slow  # a whole Sphinx build: run by make test, or name this file

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
README = REPO / "README.md"
# Pages whose text the docs show: the site's own, and the top-level files it includes or links to.
PAGES = [*sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts), README, REPO / "CHANGELOG.md", REPO / "benchmarks" / "RESULTS.md"]


def test_the_docs_build_with_no_warning(tmp_path: Path) -> None:
    """``sphinx-build -W --keep-going``: every warning (a broken link or anchor, a docstring autodoc
    cannot render, a module the API pages name that does not import) is an error, all reported."""
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow")}
    out = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-d", str(tmp_path / "doctrees"), str(DOCS), str(tmp_path / "html")],
        capture_output=True, text=True, timeout=600, env=env, cwd=REPO,
    )
    warnings = [line for line in out.stderr.splitlines() if "WARNING" in line or "ERROR" in line or "Traceback" in line]
    assert out.returncode == 0, "\n".join(warnings) or out.stderr[-5000:]
    for page in ("index", "cli", "configuration/reference", "api/operators", "connections/delta_storage", "changelog", "benchmarks"):
        assert (tmp_path / "html" / f"{page}.html").is_file(), page
    reference = (tmp_path / "html" / "configuration" / "reference.html").read_text()
    assert "checkpoint.engine" in reference and "(generated at build time)" not in reference, "the reference is generated from the models"
    cli = (tmp_path / "html" / "cli.html").read_text()
    assert "validate-config" in cli and "--allow-shorter-retention" in cli, "the CLI reference is generated from the parser"


# --- the README -------------------------------------------------------------------------------------


def code_of(markdown: str) -> str:
    """The text of the fenced blocks and inline code spans: where commands are given."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", markdown, flags=re.S | re.M)
    rest = re.sub(r"^```[^\n]*\n.*?^```", "", markdown, flags=re.S | re.M)
    return "\n".join([*fenced, *re.findall(r"`([^`\n]+)`", rest)])


def test_the_readme_is_under_12_kb_and_gives_a_newcomer_exactly_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.encode()) < 12 * 1024, f"README.md is {len(text.encode())} bytes; move details into docs/"
    targets = set(re.findall(r"\bmake\s+([A-Za-z][\w.-]*)", code_of(text)))
    assert targets == {"demo", "test"}, f"the README's make commands: {sorted(targets)}"


def test_the_readmes_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    links = [target for target in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", target)]
    assert links, "the README links into docs/"
    missing = [target for target in links if not (REPO / target.split("#", 1)[0]).exists()]
    assert not missing, missing


# --- what the pages say about the code ----------------------------------------------------------------

REFERENCE = DOCS / "configuration" / "reference.md"
BEGIN, END = "<!-- BEGIN GENERATED: configuration reference", "<!-- END GENERATED: configuration reference"


def documented_keys() -> dict[str, set[str]]:
    """Keys in the first column of each table of the generated reference, by the heading above it.
    The page holds only the markers: the docs build fills them from the models (docs/conf.py)."""
    from airflow_delta_maintenance.fleet.config_schema import markdown_reference

    text = REFERENCE.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, "the generated block is marked for the generator"
    assert "| `" not in text[text.index(BEGIN) : text.index(END)], "the reference is generated at build time, not written in the page"
    keys: dict[str, set[str]] = {}
    heading = ""
    for line in markdown_reference().splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif line.startswith("| `") or line.startswith("| any of"):
            keys.setdefault(heading, set()).update(re.findall(r"`([\w.]+)`", line.split(" | ")[0]))
    return keys


def accepted_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str], yaml_text: str) -> set[str]:
    """The keys ``validate-config`` names as allowed when it meets an unknown key (``zz``)."""
    path = tmp_path / "probe.yaml"
    path.write_text(yaml_text)
    cli_main(["validate-config", str(path)])
    captured = capsys.readouterr()
    found = re.findall(r"zz: unknown (?:top-level )?key \(allowed: ([^)]*)\)", captured.out + captured.err)
    assert found, captured
    return {key.strip() for key in found[0].split(",")}


def test_the_yaml_reference_lists_exactly_the_keys_the_validator_accepts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = documented_keys()
    table = "{name: t, uri: /t, coordinator: 'local:///c.db'"

    def probe(text: str) -> set[str]:
        return accepted_keys(tmp_path, capsys, text)

    def under(prefix: str, keys: set[str]) -> set[str]:
        return {k.removeprefix(prefix) for k in keys if k.startswith(prefix)}

    assert doc["Top level"] == probe(f"zz: 1\ntables: [{table}}}]\n")
    assert doc["Table"] == probe(f"tables: [{table}, zz: 1}}]\n")
    sections = [h for h in doc if h != "Discovery" and all(k.startswith(f"{h}.") for k in doc[h])]
    assert {"sensor", "checkpoint", "compaction", "cleanup", "health", "rate_limit"} <= set(sections), sections
    for section in sections:
        assert under(f"{section}.", doc[section]) == probe(f"tables: [{table}, {section}: {{zz: 1}}}}]\n"), section
    assert under("discovery.", doc["Discovery"]) == probe("discovery: {zz: 1}\n")
    sources = "discovery: {sources: [%s]}\n"
    assert doc["source"] == probe(sources % "{name: s, unity_catalog: 'unity-catalog://uc:8080', catalog: c, zz: 1}") | probe(
        sources % "{name: s, dynamodb: 'dynamodb://commits?region=us-east-1', zz: 1}"
    )
    uc = "{name: s, unity_catalog: 'unity-catalog://uc:8080', catalog: c}"
    overrides = "discovery: {sources: [%s], overrides: [%s]}\n"
    assert under("match.", doc["override"]) == probe(overrides % (uc, "{match: {zz: 1}, enabled: false}"))
    assert {k for k in doc["override"] if not k.startswith("match.")} | {"match"} == probe(overrides % (uc, "{match: {name: x}, zz: 1}"))


# Dotted names that are not modules or attributes of the package: a table property's name.
NOT_PYTHON = {"airflow_delta_maintenance.coordinator"}


def resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            return False
        return True
    return False


def test_every_dotted_name_of_the_package_in_the_docs_exists() -> None:
    """Modules move (the layout changes): a page must not send a reader to a name that is gone."""
    missing = []
    for page in PAGES:
        for dotted in sorted(set(re.findall(r"\bairflow_delta_maintenance(?:\.[A-Za-z_]\w*)+", page.read_text(encoding="utf-8")))):
            if dotted not in NOT_PYTHON and not resolves(dotted.rstrip(".")):
                missing.append(f"{page.relative_to(REPO)}: {dotted}")
    assert not missing, "\n".join(missing)


def python_examples() -> list[tuple[str, str]]:
    return [
        (f"{page.relative_to(REPO)}#{index}", block)
        for page in PAGES
        for index, block in enumerate(re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M))
    ]


@pytest.mark.parametrize(("where", "code"), python_examples(), ids=[where for where, _ in python_examples()])
def test_the_python_examples_of_the_docs_run(where: str, code: str) -> None:
    """Each example builds what it shows (DAGs, operators, notifiers) with today's import paths and
    arguments; none touches a table or a connection while it is built."""
    exec(compile(code, where, "exec"), {"__name__": "docs_example"})
