"""Bench analysis job: a run's node logs, flow samples and locust CSVs into a report with plots.

    python -m pipeline.jobs.bench_report --out var/report \\
        --locust bench/out/locust/warren-steady --log "var/warren/log/warren.log*" --flow var/flow.jsonl

Writes OUT/report.md and, for what it was given, throughput.png and latency.png (locust),
flow.png (flow states) and log.png (log lines by level). Every input is optional and may be
missing: the report says what it had.

Inputs
- locust: the --csv PREFIX of a run (PREFIX_stats.csv, PREFIX_stats_history.csv; run locust with
  --csv-full-history to get a line per request type over time, otherwise the aggregate is plotted).
- node logs: structlog JSON lines (`{"timestamp": ISO 8601 or Unix seconds, "level": ..,
  "event": .., ...}`), as a node writes them to DATA_DIR/log/warren.log (and its rotated
  warren.log.N); the console lines it writes to the terminal ("2026-01-02 03:04:05 [info ] event
  k=v") are read too, and any other line is skipped.
- flow samples, JSON lines: what `warrenctl flow --formatter json` prints, one snapshot a line
  (`{"ts": .., "links": [{"kind": .., "name": .., "state": .., "flow_share": ..}, ..], ..}`), or one
  line per link and sample; lines with neither a `state` nor `links` are skipped:
      {"ts": 1732480000.25, "kind": "connection", "name": "127.0.0.1:50312 -> 127.0.0.1:5672",
       "state": "flow", "flow_share": 0.4}
  ts is Unix seconds; kind is connection, channel, queue, store, wal or follower; state is
  running, flow (out of credit) or blocked (by an alarm); flow_share (optional) is the share of the
  last seconds spent in flow.
"""
from __future__ import annotations

import argparse
import glob
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

LOG_CONSOLE = r"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)\S*\s+\[\s*(\w+)\s*\]\s+(\S+)"
LOG_JSON_DDL = "timestamp string, level string, event string"
FLOW_DDL = "ts double, kind string, name string, state string, flow_share double"
FLOW_SNAPSHOT_DDL = "ts double, links array<struct<kind: string, name: string, state: string, flow_share: double>>"
PERCENTILES = ("50%", "95%", "99%")
log_bucket_s = 10
STATE_COLORS = {"running": "tab:green", "flow": "tab:orange", "blocked": "tab:red"}


# ---------------------------------------------------------------- reading (Spark)
def read_logs(spark: Any, paths: list[str]) -> Any | None:
    files = [f for p in paths for f in glob.glob(p)]
    if not files:
        return None
    lines = spark.read.text(files)
    js = F.from_json(F.when(F.col("value").startswith("{"), F.col("value")), LOG_JSON_DDL)
    console = F.regexp_extract("value", LOG_CONSOLE, 1)
    stamp = F.coalesce(F.try_to_timestamp(js.timestamp),  # ANSI mode: malformed is null, not an error
                       F.timestamp_seconds(js.timestamp.try_cast("double")),
                       F.try_to_timestamp(F.when(console != "", console)))
    level = F.coalesce(js.level, F.regexp_extract("value", LOG_CONSOLE, 2))
    event = F.coalesce(js.event, F.regexp_extract("value", LOG_CONSOLE, 3))
    return (lines.select(stamp.alias("ts"), F.lower(level).alias("level"), event.alias("event"),
                         F.col("value").alias("line"))
            .where(F.col("ts").isNotNull() & (F.col("level") != "")))


def read_flow(spark: Any, path: str | None) -> Any | None:
    if not path or not glob.glob(path):
        return None
    raw = spark.read.text(path)
    per_link = raw.select(F.from_json("value", FLOW_DDL).alias("r")).select("r.*")
    snapshots = (raw.select(F.from_json("value", FLOW_SNAPSHOT_DDL).alias("s")).where(F.col("s.links").isNotNull())
                 .select(F.col("s.ts").alias("ts"), F.explode("s.links").alias("l"))
                 .select("ts", "l.kind", "l.name", "l.state", "l.flow_share"))
    return (per_link.unionByName(snapshots).where(F.col("state").isNotNull() & F.col("ts").isNotNull())
            .withColumn("time", F.timestamp_seconds("ts")))


def read_locust(spark: Any, prefix: str | None) -> tuple[Any | None, Any | None]:
    if not prefix:
        return None, None
    final = history = None
    if Path(f"{prefix}_stats.csv").exists():
        final = spark.read.option("header", "true").csv(f"{prefix}_stats.csv")
    if Path(f"{prefix}_stats_history.csv").exists():
        raw = spark.read.option("header", "true").csv(f"{prefix}_stats_history.csv")
        history = raw.select(
            F.timestamp_seconds(F.col("Timestamp").try_cast("long")).alias("time"),
            F.concat_ws(" ", F.col("Type"), F.col("Name")).alias("series"), F.col("Name").alias("name"),
            F.col("Requests/s").try_cast("double").alias("rps"),
            F.col("Failures/s").try_cast("double").alias("fps"),
            *[F.col(f"`{p}`").try_cast("double").alias(p) for p in PERCENTILES])  # "N/A" before any request
        per_type = history.where(F.col("name") != "Aggregated")
        history = per_type if per_type.limit(1).count() else history
    return final, history


# ---------------------------------------------------------------- plots (matplotlib)
def _plt() -> Any:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig: Any, axes: list[Any], path: Path) -> None:
    from matplotlib.dates import DateFormatter
    for ax in axes:
        ax.xaxis.set_major_formatter(DateFormatter("%H:%M:%S"))
        ax.grid(alpha=0.3)
    fig.autofmt_xdate()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    _plt().close(fig)


def plot_locust(history: Any, out: Path) -> list[str]:
    pdf = history.orderBy("time").toPandas()
    if pdf.empty:
        return []
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 4))
    for series, part in pdf.groupby("series"):
        ax.plot(part["time"], part["rps"], label=series)
    ax.set_ylabel("requests/s")
    ax.set_title("locust: throughput by request type")
    ax.legend(fontsize="small")
    _save(fig, [ax], out / "throughput.png")
    fig, axes = plt.subplots(len(PERCENTILES), 1, figsize=(10, 3 * len(PERCENTILES)), sharex=True)
    for ax, p in zip(axes, PERCENTILES):
        for series, part in pdf.groupby("series"):
            ax.plot(part["time"], part[p], label=series)
        ax.set_ylabel(f"p{p.rstrip('%')} ms")
    axes[0].set_title("locust: latency percentiles over time")
    axes[0].legend(fontsize="small")
    _save(fig, list(axes), out / "latency.png")
    return ["throughput.png", "latency.png"]


def plot_flow(flow: Any, out: Path) -> list[str]:
    counts = flow.groupBy("time", "kind", "state").count().orderBy("time").toPandas()
    if counts.empty:
        return []
    plt = _plt()
    kinds = sorted(counts["kind"].unique())
    fig, axes = plt.subplots(len(kinds), 1, figsize=(10, 2.6 * len(kinds)), sharex=True, squeeze=False)
    for ax, kind in zip(axes[:, 0], kinds):
        table = (counts[counts["kind"] == kind].pivot_table(index="time", columns="state", values="count",
                                                             aggfunc="sum").fillna(0))
        states = [s for s in ("running", "flow", "blocked") if s in table.columns]
        states += [s for s in table.columns if s not in states]
        ax.stackplot(table.index, *[table[s] for s in states], labels=states,
                     colors=[STATE_COLORS.get(s, "tab:gray") for s in states])
        ax.set_ylabel(f"{kind}s")
        ax.legend(fontsize="small", loc="upper left")
    axes[0, 0].set_title("flow states over time (links per state)")
    _save(fig, list(axes[:, 0]), out / "flow.png")
    return ["flow.png"]


def plot_logs(logs: Any, out: Path) -> list[str]:
    bucket = F.timestamp_seconds(F.floor(F.unix_timestamp("ts") / log_bucket_s) * log_bucket_s)
    pdf = logs.groupBy(bucket.alias("time"), "level").count().orderBy("time").toPandas()
    if pdf.empty:
        return []
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 3.5))
    for level, part in pdf.groupby("level"):
        ax.plot(part["time"], part["count"], marker=".", label=level)
    ax.set_ylabel(f"lines per {log_bucket_s} s")
    ax.set_title("node log lines by level")
    ax.legend(fontsize="small")
    _save(fig, [ax], out / "log.png")
    return ["log.png"]


# ---------------------------------------------------------------- the report
def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join("" if v is None else str(v) for v in row) + " |" for row in rows]


def locust_section(final: Any) -> list[str]:
    rows = final.collect()
    body = [[r["Type"] or "", r["Name"], r["Request Count"], r["Failure Count"],
             f"{float(r['Average Response Time']):.2f}", r["50%"], r["95%"], r["99%"],
             f"{float(r['Requests/s']):.1f}"] for r in rows]
    return ["## locust", ""] + _table(["type", "name", "requests", "failures", "avg ms", "p50 ms", "p95 ms",
                                       "p99 ms", "req/s"], body)


def flow_section(flow: Any) -> list[str]:
    per = flow.groupBy("kind", "state").agg(F.count("*").alias("samples"), F.avg("flow_share").alias("share"))
    total = flow.groupBy("kind").agg(F.count("*").alias("all"))
    rows = per.join(total, "kind").orderBy("kind", "state").collect()
    body = [[r["kind"], r["state"], r["samples"], f"{100 * r['samples'] / r['all']:.1f}%",
             "" if r["share"] is None else f"{r['share']:.2f}"] for r in rows]
    return ["## flow states", ""] + _table(["kind", "state", "samples", "of the kind's samples",
                                            "mean flow_share"], body)


def log_section(logs: Any) -> list[str]:
    levels = logs.groupBy("level").count().orderBy(F.desc("count")).collect()
    events = logs.groupBy("event").count().orderBy(F.desc("count")).limit(10).collect()
    bad = logs.where(F.col("level").isin("warning", "error", "critical")).orderBy("ts").limit(10).collect()
    lines = ["## node log", ""] + _table(["level", "lines"], [[r["level"], r["count"]] for r in levels])
    lines += [""] + _table(["event (top 10)", "lines"], [[r["event"], r["count"]] for r in events])
    if bad:
        lines += ["", "First warnings and errors:", ""] + [f"    {r['line'][:200]}" for r in bad]
    return lines


def report(spark: Any, out: Path, locust: str | None = None, logs: list[str] | None = None,
           flow: str | None = None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    lines = ["# bench report", ""]
    images: list[str] = []
    final, history = read_locust(spark, locust)
    if final is not None:
        lines += locust_section(final) + [""]
    else:
        lines += ["## locust", "", f"no locust CSVs ({locust or 'none given'})", ""]
    if history is not None:
        images += plot_locust(history, out)
    samples = read_flow(spark, flow)
    if samples is not None:
        lines += flow_section(samples) + [""]
        images += plot_flow(samples, out)
    else:
        lines += ["## flow states", "", f"no flow samples ({flow or 'none given'})", ""]
    log_lines = read_logs(spark, logs or [])
    if log_lines is not None:
        lines += log_section(log_lines) + [""]
        images += plot_logs(log_lines, out)
    else:
        lines += ["## node log", "", "no node logs given or found", ""]
    lines += [f"![{name}]({name})" for name in images]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="directory for report.md and the PNGs")
    p.add_argument("--locust", help="the locust --csv prefix of the run")
    p.add_argument("--log", action="append", default=[], help="a node log file or glob (repeatable)")
    p.add_argument("--flow", help="flow samples, JSON lines")
    p.add_argument("--master", default="local[2]")
    a = p.parse_args(argv)
    from pipeline.jobs.session import local_session
    spark = local_session("bench_report", a.master)
    print(report(spark, Path(a.out), a.locust, a.log, a.flow))
    return 0


if __name__ == "__main__":
    sys.exit(main())
