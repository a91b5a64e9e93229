"""Storage modules do IO only through an injected Disk: no impure imports; each has a theory."""
import ast
import pathlib

import persist.classic

FORBIDDEN = {"zmq", "socket", "os", "time", "random", "threading", "asyncio", "select"}


def test_classic_storage_modules_import_nothing_impure():
    root = pathlib.Path(persist.classic.__file__).parent
    paths = sorted(root.glob("*.py"))
    assert len(paths) >= 7
    for path in paths:
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
