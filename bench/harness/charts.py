"""Draws the harness's charts from results.json: latency by contender,
throughput against concurrency, memory against session count.

Usage: python3 charts.py results.json OUTDIR (the harness runs it)."""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def sections(report, sid):
    return [s for s in report["sections"] if s["id"] == sid]


def latency(report, out):
    cold = sections(report, "a") + sections(report, "b")
    if not cold:
        return
    fig, axes = plt.subplots(len(cold), 1, figsize=(8, 3.2 * len(cold)))
    for ax, s in zip(axes if len(cold) > 1 else [axes], cold):
        rows = [r for r in s["rows"] if not r.get("skipped")]
        names = [r["contender"] for r in rows]
        med = [r["median"] for r in rows]
        err = [max(r["p99"] - r["median"], 0) for r in rows]
        ax.barh(names, med, xerr=[[0] * len(err), err], color="#4a7ab5", capsize=3)
        ax.invert_yaxis()
        ax.set_xlabel("ms (median, whisker to p99)")
        ax.set_title(s["title"], fontsize=10)
        for y, (m, e) in enumerate(zip(med, err)):
            ax.text(m + e, y, f"  {m:.0f}", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "latency_by_contender.png"), dpi=110)


def throughput(report, out):
    thr = [s for s in sections(report, "e") if "throughput" in s["title"]]
    if not thr:
        return
    fig, ax = plt.subplots(figsize=(9, 4.5))
    by = {}
    for r in thr[0]["rows"]:
        by.setdefault(r["contender"], []).append((r["x"], r["median"]))
    for name, pts in by.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("concurrent runs")
    ax.set_ylabel("runs/s (log scale)")
    ax.set_title("python3 -c 'print(1)': throughput against concurrency", fontsize=10)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "throughput_vs_concurrency.png"), dpi=110)


def memory(report, out):
    mem = sections(report, "g")
    if not mem:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    by = {}
    for r in mem[0]["rows"]:
        if not r.get("skipped"):
            by.setdefault(r["contender"], []).append((r["x"], r["median"]))
    for name, pts in by.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("idle sessions")
    ax.set_ylabel("MiB of host memory per session")
    ax.set_title("host memory per idle session", fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "memory_vs_sessions.png"), dpi=110)


def main():
    with open(sys.argv[1]) as f:
        report = json.load(f)
    out = sys.argv[2]
    latency(report, out)
    throughput(report, out)
    memory(report, out)


if __name__ == "__main__":
    main()
