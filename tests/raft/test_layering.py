"""The Raft core is pure: no IO, clock, threads or global randomness (DESIGN.md §3)."""
import ast
import pathlib

import persist.raft

FORBIDDEN = {"zmq", "socket", "os", "time", "random", "threading", "asyncio", "select"}


def test_raft_core_modules_import_nothing_impure():
    root = pathlib.Path(persist.raft.__file__).parent
    for path in sorted(root.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"
        assert ast.get_docstring(tree), f"{path.name} lacks a theory-of-operation docstring"
