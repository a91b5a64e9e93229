"""Every test that starts nodes is marked `integration` (so `-m "not integration"` is the fast
unit run): a test module that imports a node starter, or lives where a conftest starts nodes for
it, says so with `pytestmark`."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent
# the modules whose helpers start warren nodes (or the RabbitMQ oracle) for a test
NODE_STARTERS = ("scripts.local_cluster", "tests.integration.nodes", "tests.integration.admin_support",
                 "tests.integration.oracle", "tests.mgmt.support", "tests.faults.cluster")
# directories whose conftest hands node fixtures to every test module in them
NODE_DIRS = ("integration",)


def _starts_nodes(path: Path, tree: ast.Module) -> bool:
    if path.parent.name in NODE_DIRS:
        return True
    return any(isinstance(n, ast.ImportFrom) and (n.module or "").startswith(NODE_STARTERS) for n in ast.walk(tree))


def _marked(source: str) -> bool:
    return "pytestmark" in source and "mark.integration" in source


def test_every_node_starting_test_module_is_marked_integration() -> None:
    unmarked = []
    for path in sorted(ROOT.rglob("test_*.py")):
        source = path.read_text()
        if _starts_nodes(path, ast.parse(source)) and not _marked(source):
            unmarked.append(str(path.relative_to(ROOT)))
    assert not unmarked, "modules starting nodes without pytestmark = pytest.mark.integration:\n" + "\n".join(unmarked)
