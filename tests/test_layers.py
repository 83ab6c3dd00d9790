"""The package's shape is a test: the data path's layers and no import circles (import-linter's
contracts in pyproject.toml), files a reader can hold, and a small root.

A new import that goes upward, or a new circle, fails here with the import that made it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fusejit"


def test_import_linter_contracts_hold():
    """Layers (a layer imports only those below it, inside functions too), independent
    backends, and no circle between sibling modules or packages at any depth."""
    run = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
                               "sys.exit(lint_imports(no_cache=True, no_logo=True))"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]


def test_files_stay_readable():
    too_long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
                if (n := len(p.read_text().splitlines())) > 600}
    assert too_long == {}, "split these by role"


def test_the_root_holds_the_public_face_only():
    modules = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(modules) <= 14, modules
