"""Pure cores do no IO (DESIGN.md §3): no zmq, socket, os, time, random, threading, asyncio or
select, except under `if TYPE_CHECKING:` for annotations; and each opens with a theory of operation.

Shells (actors' `actor.py`/`shell.py`, runtime, hosts, WAL writer, disk) are deliberately not listed."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {"zmq", "socket", "os", "time", "random", "threading", "asyncio", "select", "subprocess"}
CORE_PACKAGES = ["effects", "wire", "flow", "metadata", "raft", "persist/classic", "actors/messages"]  # classic: IO via an injected Disk
CORE_MODULES = [
    "actors/channel/core.py", "actors/channel/confirms.py", "actors/channel/acks.py",
    "actors/channel/lazy_headers.py", "actors/reader/core.py", "actors/queue/core.py",
    "persist/classic/ready.py", "actors/queue/priority.py", "persist/classic/backed.py", "persist/classic/spill.py",
    "actors/queue/consumers.py", "persist/wal/core.py", "persist/wal/records.py",
]


SHELL_MODULES = {"persist/classic/host_storage.py"}  # a host's storage: files, psutil and the loop


def core_files() -> list[Path]:
    files = [ROOT / m for m in CORE_MODULES]
    for pkg in CORE_PACKAGES:
        files += sorted(p for p in (ROOT / pkg).glob("*.py")
                        if p.name != "__init__.py" and str(p.relative_to(ROOT)) not in SHELL_MODULES)
    return files


def imported_at_runtime(tree: ast.Module) -> list[str]:
    names: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)
    visit(tree)
    return names


@pytest.mark.parametrize("path", core_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_is_pure_and_explains_itself(path: Path):
    tree = ast.parse(path.read_text())
    bad = [n for n in imported_at_runtime(tree) if n.split(".")[0] in FORBIDDEN]
    assert not bad, f"{path.name} imports {bad}"
    assert ast.get_docstring(tree), f"{path.name} lacks a theory-of-operation docstring"
