"""Sphinx configuration: the user guide and the API reference, built from fusejit's
docstrings; the supported-API table is generated from the dispatch tables at build time."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.abspath(".."))

project = "fusejit"
author = "fusejit developers"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
exclude_patterns = ["_build"]
html_theme = "alabaster"
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # the signatures carry the hints; descriptions stay readable
napoleon_google_docstring = True
napoleon_numpy_docstring = False


def _write_api_table(app: object) -> None:
    from fusejit.inspect.api_table import render_rst

    out = os.path.join(os.path.dirname(__file__), "_generated")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "supported_api.rst"), "w") as f:
        f.write(render_rst())


def setup(app: object) -> None:
    app.connect("builder-inited", _write_api_table)
