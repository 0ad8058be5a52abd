"""Sphinx configuration for aqueue's documentation.

The build is offline: no intersphinx inventories are fetched, the theme's assets ship
with furo, and nothing is loaded from a CDN. ``python -m sphinx -W -b html docs
docs/_build/html`` builds it, with warnings as errors.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # autodoc imports aqueue from this checkout

import aqueue  # noqa: E402

project = "aqueue"
author = "the aqueue authors"
copyright = "the aqueue authors"
release = version = getattr(aqueue, "__version__", "0.1.0")

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# Markdown: directives in ``` fences, anchors for headings so that
# [text](page.md#a-heading) links resolve (and are checked).
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# Docstrings are Google style (Args/Returns/Raises).
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_class_signature = "mixed"
# Bases are shown for the exceptions only (their tree is what a reader needs there).
autodoc_default_options = {"members": True}
# Public names are documented where aqueue exports them (aqueue.X), not where they live.
add_module_names = True

html_theme = "furo"
html_title = f"aqueue {release}"
# Local files only: the build and the site fetch nothing from the network.
html_static_path = ["_static"]
html_css_files = ["custom.css"]
