#!/usr/bin/python3
"""One self-contained HTML page from gangsched-sim's CSV files: the
comparison table, GPU utilization over time, waits per queue, and each
queue's GPUs against its fair share over time (docs/SIMULATOR.md, "The
report"). The plots are inline SVG drawn by matplotlib; the page loads
nothing from anywhere.

  sim/tools/gangsched_sim_report.py --runs=DIR --html=report.html

DIR is gangsched-sim's --out: the files of one run, or with several configs
comparison.csv and one folder per config. gangsched-sim --report runs this.
The same CSV files give the same bytes.
"""

from __future__ import annotations

import argparse
import csv
import html
import io
import os
import sys
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Fixed SVG ids and no date: the same page for the same inputs.
plt.rcParams["svg.hashsalt"] = "gangsched-sim"
plt.rcParams["svg.fonttype"] = "none"
plt.rcParams["font.size"] = 9


@dataclass
class Run:
    name: str
    workloads: list[dict]
    queues: list[dict]
    cluster: list[dict]
    timeline: list[dict]


def read_csv(path: str) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_runs(root: str) -> tuple[list[Run], list[dict]]:
    comparison = read_csv(os.path.join(root, "comparison.csv"))
    runs = []
    for row in comparison:
        folder = root if len(comparison) == 1 else os.path.join(
            root, row["config"])
        runs.append(Run(row["config"],
                        read_csv(os.path.join(folder, "workloads.csv")),
                        read_csv(os.path.join(folder, "queues.csv")),
                        read_csv(os.path.join(folder, "cluster.csv")),
                        read_csv(os.path.join(folder, "queue_timeline.csv"))))
    return runs, comparison


def svg(fig: plt.Figure) -> str:
    out = io.StringIO()
    fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = out.getvalue()
    return text[text.index("<svg"):]  # no XML prolog inside HTML


def hours(seconds: str) -> float:
    return float(seconds) / 3600.0


def utilization_plot(runs: list[Run]) -> str:
    fig, ax = plt.subplots(figsize=(9, 3.2))
    for run in runs:
        ax.step([hours(r["time"]) for r in run.cluster],
                [float(r["utilization"]) * 100 for r in run.cluster],
                where="post", label=run.name, linewidth=1)
    ax.set_xlabel("hours")
    ax.set_ylabel("GPUs in use (%)")
    ax.set_ylim(0, 105)
    ax.set_title("GPU utilization over time")
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return svg(fig)


def wait_plot(runs: list[Run]) -> str:
    queues = sorted({w["queue"] for run in runs for w in run.workloads})
    fig, axes = plt.subplots(1, len(queues), figsize=(9, 3.2), squeeze=False,
                             sharey=True)
    for ax, queue in zip(axes[0], queues):
        for run in runs:
            waits = sorted(hours(w["start"]) - hours(w["arrival"])
                           for w in run.workloads
                           if w["queue"] == queue and w["start"])
            if waits:
                n = len(waits)
                ax.step(waits, [(i + 1) / n * 100 for i in range(n)],
                        where="post", label=run.name, linewidth=1)
        ax.set_title(f"queue {queue}")
        ax.set_xlabel("wait (hours)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("workloads started within (%)")
    axes[0][-1].legend(loc="lower right")
    fig.suptitle("Waits from arrival to start, per queue")
    fig.tight_layout()
    return svg(fig)


def share_plot(run: Run) -> str:
    fig, ax = plt.subplots(figsize=(9, 3.2))
    queues = sorted({r["queue"] for r in run.timeline})
    for i, queue in enumerate(queues):
        rows = [r for r in run.timeline if r["queue"] == queue]
        x = [hours(r["time"]) for r in rows]
        color = f"C{i % 10}"
        ax.step(x, [float(r["allocated_gpus"]) for r in rows], where="post",
                color=color, linewidth=1, label=f"{queue}: GPUs held")
        ax.step(x, [float(r["fair_share_gpus"]) for r in rows], where="post",
                color=color, linewidth=1, linestyle="--",
                label=f"{queue}: fair share")
    ax.set_xlabel("hours")
    ax.set_ylabel("GPUs")
    ax.set_title(f"{run.name}: GPUs held against fair share, per queue")
    ax.legend(loc="upper right", fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return svg(fig)


def table(rows: list[dict], columns: list[str]) -> str:
    # Long names (fair_share_deviation_gpus) may break after an underscore,
    # so a wide table wraps its headers to fit the page.
    head = "".join(
        f"<th>{html.escape(c).replace('_', '_<wbr>')}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(r.get(c, ''))}</td>"
                         for c in columns) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


STYLE = """
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1000px; }
table { border-collapse: collapse; margin: 8px 0 20px; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; }
th { vertical-align: bottom; }
th { background: #f3f3f3; }
td:first-child, th:first-child { text-align: left; }
.plot { margin: 12px 0 28px; }
.wide { overflow-x: auto; }
"""


def page(runs: list[Run], comparison: list[dict]) -> str:
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        "<title>gangsched-sim report</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>gangsched-sim report</h1>",
        "<p>Times in virtual seconds (plots in hours); GPU-hours; waits "
        "from arrival to first start. The model is in gangsched's "
        "docs/SIMULATOR.md.</p>",
        "<h2>Configs side by side</h2>",
        f"<div class='wide'>{table(comparison, list(comparison[0].keys()))}"
        "</div>",
        "<h2>Per queue</h2>",
    ]
    queue_columns = ["config", "queue", "workloads", "wait_p50", "wait_p95",
                     "wait_max", "gpu_hours_used", "gpu_hours_deserved",
                     "fair_share_deviation_gpus", "preemptions", "reclaims",
                     "lost_gpu_hours", "saved_gpu_hours"]
    parts.append("<div class='wide'>" + table(
        [{"config": run.name, **q} for run in runs for q in run.queues],
        queue_columns) + "</div>")
    parts.append(f"<div class='plot' id='utilization'>"
                 f"{utilization_plot(runs)}</div>")
    parts.append(f"<div class='plot' id='waits'>{wait_plot(runs)}</div>")
    for i, run in enumerate(runs):
        parts.append(f"<div class='plot' id='share-{i}'>"
                     f"{share_plot(run)}</div>")
    parts.append("</body></html>\n")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", required=True, help="gangsched-sim's --out")
    ap.add_argument("--html", required=True, help="the page to write")
    args = ap.parse_args(argv)
    try:
        runs, comparison = read_runs(args.runs)
        if not runs:
            raise ValueError("comparison.csv lists no run")
        text = page(runs, comparison)
        with open(args.html, "w") as f:
            f.write(text)
    except (OSError, ValueError, KeyError) as e:
        print(f"gangsched_sim_report: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
