"""A campaign's report: the checker's figures as text, and confirms/s over time with the fault windows
shaded (PNG, matplotlib)."""
from __future__ import annotations

from pathlib import Path

from tests.faults.checker import Result
from tests.faults.schedule import Schedule

COLOURS = {"partition": "tab:blue", "kill": "tab:red", "pause": "tab:orange", "kill-host": "tab:purple",
           "combined": "tab:brown"}


def text(result: Result, schedule: Schedule, *, mode: str, queues: str, replay: str, took_s: float,
         events: list[tuple[float, str]], notes: list[str], failures: list[str]) -> str:
    """`failures`: what went wrong besides the checker's verdict (a queue that could not be drained)."""
    rounds = ", ".join(f"{n} {k}" for n, k in schedule.rounds().items())
    lines = [
        f"warren fault campaign: {len(schedule.nodes)} nodes ({mode}), seed {schedule.seed}; queues {queues}",
        f"verdict: {'PASS' if result.ok and not failures else 'FAIL'}",
        *failures,
        f"schedule: {schedule.time_s:.0f} s of faults, {len(schedule.windows)} windows ({rounds}); "
        f"campaign took {took_s:.0f} s in all",
        f"published {result.published}, confirmed {result.confirmed}, nacked {result.nacked}, "
        f"indeterminate {result.indeterminate}",
        f"consumed {result.consumed} distinct ids in {result.deliveries} deliveries: duplicates {result.duplicates}",
        f"lost (confirmed, never consumed): {len(result.lost)}",
        f"unexpected (consumed, never published): {len(result.unexpected)}",
        f"not confirmed but consumed all the same: {result.unconfirmed_consumed}",
        f"availability, confirms/s: baseline {result.baseline_rate:.1f} outside the fault windows; "
        + ", ".join(f"{n} {r:.1f}" for n, r in result.availability().items()),
        f"replay: {replay}",
        *notes,
        "",
        "windows (start-end s, confirms/s, what):",
        *(f"  {w.start_s:7.1f}-{w.end_s:7.1f}  {w.rate:7.1f}  {w.what}" for w in result.windows),
    ]
    if result.lost:
        lines += ["", f"lost ids (first 50 of {len(result.lost)}):", *(f"  {m}" for m in result.lost[:50])]
    if result.unexpected:
        lines += ["", f"unexpected ids (first 50 of {len(result.unexpected)}):",
                  *(f"  {m}" for m in result.unexpected[:50])]
    lines += ["", "events:", *(f"  {t:7.1f}  {what}" for t, what in events)]
    return "\n".join(lines) + "\n"


def plot(path: Path, confirm_times: list[float], result: Result, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    end = int(max([*confirm_times, *(w.end_s for w in result.windows), 1.0])) + 1
    per_second = [0] * end
    for t in confirm_times:
        per_second[int(t)] += 1
    fig, ax = plt.subplots(figsize=(12, 4))
    ax.plot(range(end), per_second, color="black", linewidth=0.8, label="confirms/s")
    seen = set()
    for w in result.windows:
        label = w.nemesis if w.nemesis not in seen else None
        seen.add(w.nemesis)
        ax.axvspan(w.start_s, w.end_s, color=COLOURS.get(w.nemesis, "grey"), alpha=0.25, label=label)
    ax.set_xlabel("seconds")
    ax.set_ylabel("confirms/s")
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
