"""Sphinx configuration of the airflow-delta-maintenance documentation.

Built by ``sphinx-build -W --keep-going docs <out>`` (tests/unit/test_docs.py runs it in the suite):
every warning is an error. The pages are Markdown (MyST); the CLI reference is generated from the
command's own argparse parser (sphinx-argparse) and the Python API from the docstrings (autodoc).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the package from this checkout, installed or not

# autodoc imports the Airflow layer; Airflow then reads (and on first use writes) the configuration
# of $AIRFLOW_HOME. A docs build must neither depend on nor create a user's ~/airflow.
if "AIRFLOW_HOME" not in os.environ:
    _airflow_home = tempfile.mkdtemp(prefix="delta-maintenance-docs-airflow-")
    atexit.register(shutil.rmtree, _airflow_home, ignore_errors=True)
    os.environ["AIRFLOW_HOME"] = _airflow_home

from airflow_delta_maintenance import __version__  # noqa: E402  (after the path and the environment)

project = "airflow-delta-maintenance"
author = "airflow-delta-maintenance maintainers"
copyright = "the airflow-delta-maintenance maintainers"
release = version = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinxarg.ext",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build"]

# MyST: anchors for headings down to ###, so pages link to sections as `page.md#section-title`.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# autodoc: each page names the classes it documents (`:members: A, B`); a class shows its docstring
# and constructor, not the methods it inherits from Airflow (execute, poke, serialize, ...).
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented_params"
autodoc_default_options = {"show-inheritance": True}
autodoc_class_signature = "mixed"

html_theme = "furo"
html_title = f"airflow-delta-maintenance {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
smartquotes = False  # option names such as --config stay as typed


# The tables.yaml reference: the block between the GENERATED markers of configuration/reference.md
# comes from the configuration's models at build time (the page in the repository holds only the
# markers), so the reference cannot drift from what the validator accepts.
GENERATED = ("<!-- BEGIN GENERATED: configuration reference", "<!-- END GENERATED: configuration reference")


def _fill_generated(app: object, docname: str, source: list[str]) -> None:
    if docname != "configuration/reference":
        return
    from airflow_delta_maintenance.fleet.config_schema import markdown_reference

    text = source[0]
    begin, end = text.index(GENERATED[0]), text.index(GENERATED[1])
    begin = text.index("\n", begin) + 1
    source[0] = text[:begin] + "\n" + markdown_reference() + "\n" + text[end:]


def setup(app: object) -> dict[str, object]:
    app.connect("source-read", _fill_generated)  # type: ignore[attr-defined]
    return {"parallel_read_safe": True}
