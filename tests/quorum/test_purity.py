"""actors/quorum holds pure cores only (DESIGN.md §3): no IO imports, a theory of operation each,
and nothing imported from persist/ or other actor packages (the machine duck-types Raft's meta)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.test_layering import FORBIDDEN, ROOT, imported_at_runtime

MODULES = sorted((ROOT / "actors" / "quorum").glob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_quorum_modules_are_pure_cores(path: Path):
    tree = ast.parse(path.read_text())
    names = imported_at_runtime(tree)
    assert not [n for n in names if n.split(".")[0] in FORBIDDEN], names
    assert not [n for n in names if n.startswith("persist") or
                (n.startswith("actors.") and not n.startswith("actors.quorum"))], names
    assert ast.get_docstring(tree), f"{path.name} lacks a theory-of-operation docstring"
