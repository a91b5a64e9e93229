"""The layering of the tree, checked: who may import whom, no circles, pure cores that explain themselves.

Packages are layered (docs/DESIGN.md §2-3); a module may import its own layer and the layers below,
never one above:

    raft -> effects -> wire -> flow -> metadata -> persist -> actors -> mgmt -> scripts, pipeline -> bench

raft/ (the algorithm) is the lowest: it declares its own effects and messages (raft/effects.py,
raft/messages.py), as Ra does, and imports nothing of the broker; the shells that run Raft groups
translate its effects into the broker's (effects/). bench/ (benchmarks, comparison runs) is on
top: no product package imports it.

Inside `actors` the runtime's vocabulary (address, messages) comes first, the cores next, the
shells last: a core never imports a shell, the runtime's machinery (mailbox, host, supervisor)
or a host entry. No module imports another that (directly or through others) imports it back:
every import, at module level or inside a function, counts, except those under `if TYPE_CHECKING:`.

Pure cores do no IO (docs/DESIGN.md §3): no zmq, socket, os, time, random, threading, asyncio, select or
subprocess, and each opens with a theory of operation.
"""
from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = [("raft",), ("effects",), ("wire",), ("flow",), ("metadata",), ("persist",), ("actors",), ("mgmt",),
          ("scripts", "pipeline"), ("bench",)]
LAYER = {pkg: i for i, pkgs in enumerate(LAYERS) for pkg in pkgs}
FORBIDDEN = {"zmq", "socket", "os", "time", "random", "threading", "asyncio", "select", "subprocess"}
# Whole packages that are pure; persist/classic does its IO through an injected Disk.
CORE_PACKAGES = ["effects", "wire", "flow", "metadata", "raft", "persist/classic", "actors/messages", "actors/quorum"]
# Pure modules inside packages that also hold shells.
CORE_MODULES = [
    # the channel: every module but shell.py
    *(f"actors/channel/{name}.py" for name in (
        "core", "dispatch", "outbox", "lifecycle", "topology", "resources", "permissions", "publishing",
        "publish_checks", "lazy_headers", "confirm_mode", "confirms", "transactions", "consuming", "basic_get",
        "settling", "acks", "direct_reply", "reply_to", "generated_names", "lost_queues")),
    "actors/reader/core.py", "actors/reader/balance.py", "actors/queue/core.py", "actors/queue/priority.py", "actors/queue/group_commit.py",
    "actors/queue/consumers.py", "actors/queue/handlers.py", "persist/wal/core.py", "persist/wal/records.py",
    "actors/cluster/membership.py", "actors/stats/counters.py", "actors/stats/rates.py", "actors/stats/sample.py",
    "mgmt/auth.py", "mgmt/paths.py", "mgmt/shapes.py", "mgmt/changes.py",
    "mgmt/reads.py", "mgmt/peek.py", "mgmt/metrics.py", "mgmt/listing.py",
    "mgmt/memo.py", "mgmt/rows.py", "actors/monitor/relay.py",
    "actors/node/quorum_membership.py", "actors/node/steps.py", "actors/runtime/restarts.py",
    "actors/node/operations.py", "actors/stats/deltas.py", "actors/node/core.py", "actors/node/admin.py",
    "actors/raft/wal_link.py",
    "actors/node/access_admin.py",
]
# Shells inside a pure package: actors/quorum's member actor, host entry and test launchers.
SHELLS_IN_CORE_PACKAGES = ["actors/quorum/member.py", "actors/quorum/host.py", "actors/quorum/launch.py",
                           "actors/quorum/dead_letter_shell.py",
                           "actors/quorum/drive.py"]
# What a core in actors/ may not import: the runtime's machinery, host entries, shells.
SHELL_MODULES = ("actors.runtime.mailbox", "actors.runtime.host", "actors.runtime.supervisor",
                 "actors.runtime.node_process", "actors.runtime.control", "actors.runtime.effects", "actors.hosts",
                 *(p.removesuffix(".py").replace("/", ".") for p in SHELLS_IN_CORE_PACKAGES))


def modules() -> dict[str, Path]:
    """Every module of the layered packages, by dotted name."""
    found = {}
    for pkgs in LAYERS:
        for pkg in pkgs:
            for path in sorted((ROOT / pkg).rglob("*.py")):
                rel = path.relative_to(ROOT).with_suffix("")
                parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
                found[".".join(parts)] = path
    return found


def imported(tree: ast.Module, module: str) -> list[str]:
    """Modules imported anywhere in `tree` (not under `if TYPE_CHECKING:`), absolute names."""
    names: list[str] = []
    package = module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names.append(base)
            names.extend(f"{base}.{a.name}" for a in node.names)  # `from pkg import module`
        for child in ast.iter_child_nodes(node):
            visit(child)
    visit(tree)
    return names


@cache
def graph() -> dict[str, set[str]]:
    mods = modules()
    edges: dict[str, set[str]] = {}
    for name, path in mods.items():
        targets = {n for n in imported(ast.parse(path.read_text()), name) if n in mods and n != name}
        edges[name] = targets
    return edges


def layer_of(module: str) -> int:
    return LAYER[module.split(".")[0]]


def is_core(path: Path) -> bool:
    rel = str(path.relative_to(ROOT))
    if rel in SHELLS_IN_CORE_PACKAGES:
        return False
    return rel in CORE_MODULES or any(rel.startswith(pkg + "/") and path.name != "__init__.py" for pkg in CORE_PACKAGES)


def test_nothing_imports_upward() -> None:
    upward = sorted(f"{src} -> {dst}" for src, dsts in graph().items() for dst in dsts
                    if layer_of(dst) > layer_of(src))
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


def test_raft_imports_nothing_of_the_broker() -> None:
    """raft/ runs on its own vocabulary: the broker's effects (or anything else of it) would be upward."""
    tree = ast.parse("from effects import Send\n")
    assert [n for n in imported(tree, "raft.core") if n in modules()] == ["effects"]
    assert layer_of("effects") > layer_of("raft.core")
    outside = sorted(f"{src} -> {dst}" for src, dsts in graph().items() if src.startswith("raft")
                     for dst in dsts if not dst.startswith("raft"))
    assert not outside, "raft/ imports the broker:\n" + "\n".join(outside)


def test_no_import_circles() -> None:
    edges = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = [0]

    def strongconnect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            # a package and its own modules (`pkg/__init__` re-exporting) is not a circle of modules
            if len(component) > 1 and not all(c.startswith(min(component, key=len)) for c in component):
                circles.append(sorted(component))
    for v in sorted(edges):
        if v not in index:
            strongconnect(v)
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def is_shell(module: str) -> bool:
    """A shell module, or a module inside a shell package (`actors.quorum.member_changes` is not
    inside `actors.quorum.member`)."""
    return (any(module == shell or module.startswith(shell + ".") for shell in SHELL_MODULES)
            or module.endswith((".shell", ".manager")))


def test_shells_are_matched_by_whole_module_names() -> None:
    assert is_shell("actors.quorum.member") and is_shell("actors.runtime.host")
    assert not is_shell("actors.quorum.member_changes")


def test_cores_in_actors_import_no_shell() -> None:
    mods = modules()
    bad = sorted(f"{name} -> {dst}" for name, path in mods.items() if is_core(path) and name.startswith("actors.")
                 for dst in graph()[name] if is_shell(dst))
    assert not bad, "cores importing shells:\n" + "\n".join(bad)


def core_files() -> list[Path]:
    return [path for path in modules().values() if is_core(path)]


@pytest.mark.parametrize("path", core_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_is_pure_and_explains_itself(path: Path) -> None:
    tree = ast.parse(path.read_text())
    bad = [n for n in imported(tree, "") if n.split(".")[0] in FORBIDDEN]
    assert not bad, f"{path.name} imports {bad}"
    assert ast.get_docstring(tree) or path.name == "__init__.py", f"{path.name} lacks a theory-of-operation docstring"


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    """The check is not vacuous: an upward import written into a lower layer is reported."""
    tree = ast.parse("from actors.runtime.ports import free_port\n")
    assert [n for n in imported(tree, "persist.wal.core") if n in modules()] == ["actors.runtime.ports"]
    assert layer_of("actors.runtime.ports") > layer_of("persist.wal.core")


def test_no_product_package_sits_above_bench() -> None:
    """bench/ may import everything; nothing imports it (pipeline/ once did, for a confirm tracker)."""
    assert all(layer_of("bench.perf.workers") > layer_of(pkg) for pkgs in LAYERS[:-1] for pkg in pkgs)


MODULE_LINES_MAX = 700  # STYLE.md: a module holds one idea, a few hundred lines


def test_hand_written_modules_stay_small() -> None:
    """No hand-written module of the product reaches MODULE_LINES_MAX lines; a generated one
    (its first line says GENERATED, and a test regenerates it) is exempt."""
    big = sorted(f"{path.relative_to(ROOT)}: {n} lines" for path in modules().values()
                 if (n := len(path.read_text().splitlines())) > MODULE_LINES_MAX
                 and not path.read_text().startswith("# GENERATED"))
    assert not big, "modules to split by what their parts are about:\n" + "\n".join(big)
