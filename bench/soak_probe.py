"""The soak's view inside the node processes (`bench.soak --probe`): every sample asks each host of
each node for the control op `memory` (actors/runtime/memory_probe.py), and the report lists the
tables that grew between the first and the last sample after the warm-up, and, when the nodes ran
with WARREN_TRACEMALLOC=1, the allocation sites that grew most since the warm-up ended."""
from __future__ import annotations

from typing import Any

from scripts.local_cluster import Cluster

probe_timeout_s = 20.0
tables_shown = 12
sites_shown = 6
MIB = 1 << 20


def ask_all(cluster: Cluster, *, keep: bool) -> dict[str, dict[str, Any]]:
    """node -> host -> the `memory` answer (an error string for a host that did not answer)."""
    out: dict[str, dict[str, Any]] = {}
    for name in cluster.nodes:
        out[name] = {}
        try:
            hosts = cluster.hosts(name)
        except Exception as e:  # noqa: BLE001 - a node restarting: this sample has no probe of it
            out[name]["error"] = f"{type(e).__name__}: {e}"
            continue
        for host in hosts:
            try:
                answer = cluster.control(name, host, "memory", {"keep": keep, "limit": 15, "collect": True})
            except Exception as e:  # noqa: BLE001 - same
                answer = {"error": f"{type(e).__name__}: {e}"}
            out[name][host] = answer
    return out


def report(samples: list[Any]) -> list[str]:
    """Lines for soak.txt: per node and host, the tables that grew most and the grown sites."""
    probed = [s for s in samples if s.probe]
    if len(probed) < 2:
        return ["  probe: fewer than two probed samples after the warm-up"]
    first, last = probed[0], probed[-1]
    lines = [f"  probe, {first.t_s:.0f} s -> {last.t_s:.0f} s (tables: summed len over the actors of a type):"]
    for node, hosts in last.probe.items():
        for host, answer in sorted(hosts.items()):
            before = first.probe.get(node, {}).get(host)
            if not isinstance(answer, dict) or "containers" not in answer or not isinstance(before, dict) \
                    or "containers" not in before or before.get("pid") != answer.get("pid"):
                continue  # restarted in between, or silent
            was, now = before["containers"], answer["containers"]
            grown = sorted(((now[k] - was.get(k, 0), k) for k in now if now[k] > was.get(k, 0)), reverse=True)
            tables = ", ".join(f"{k} {was.get(k, 0)}->{now[k]}" for _, k in grown[:tables_shown]) or "none grew"
            heap = ""
            if "malloc" in before and "malloc" in answer:
                m0, m1 = before["malloc"], answer["malloc"]
                heap = (f"malloc in use {m0['in_use_bytes'] / MIB:.1f}->{m1['in_use_bytes'] / MIB:.1f} MiB, free "
                        f"{m0['free_bytes'] / MIB:.1f}->{m1['free_bytes'] / MIB:.1f} MiB; ")
            lines.append(f"    {node}/{host}: {heap}gc objects {before['gc_objects']}->{answer['gc_objects']}; {tables}")
            alloc = answer.get("allocations")
            if alloc:
                lines.append(f"      traced {alloc['traced_bytes'] / 1048576:.1f} MiB; grown since the warm-up:")
                for site in alloc["top"][:sites_shown]:
                    lines.append(f"        {site['size_diff'] / 1024:+9.1f} KiB {site['count_diff']:+7d} blocks  "
                                 + " < ".join(site["where"][:4]))
    return lines
