"""crond.when is a leaf (docs/design.md): pure arithmetic over instants that imports
nothing of crond outside itself, so it can be read, tested and mutated alone."""

from __future__ import annotations

import ast
from pathlib import Path

import crond.when

WHEN = Path(crond.when.__file__).parent


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_crond_when_imports_nothing_of_crond_but_itself() -> None:
    outside = {
        (path.name, module)
        for path in sorted(WHEN.glob("*.py"))
        for module in _imports(path)
        if (module == "crond" or module.startswith("crond."))
        and not module.startswith("crond.when")
    }
    assert outside == set()
