"""Fleet scale: `gpubot diagnose` as a whole process against `json.loads` of the same file.

    python benchmarks/fleet.py [--sizes 50 500 5000] [--rounds 3] [--alerts 5000 50000]

For each size, the seeded fleet snapshot (`gpusim.scenarios.fleet_cluster`: 8-GPU nodes, 20
pods each, about 7% of the nodes broken five ways, Xid alerts as an Alertmanager payload) is
written as kubectl JSON. Then, taking turns for `--rounds` rounds, each in its own process:
the peer, `json.loads` of the file's bytes (the floor any tool reading the snapshot pays, with
Python's defaults), and `gpubot diagnose --format json` of the same file and alerts; at the
largest size `--format text` too. Figures are CPU seconds (user + system, from the kernel's
accounting of the finished child) and the child's peak RSS; ratios are taken pair by pair
and the median is printed with the spread of the rounds. gpubot is started as installed: by
its console script, its bytecode compiled first (as pip and the image do; a checkout under
PYTHONDONTWRITEBYTECODE=1 would compile its sources again in every run). The files are written
by a child of their own: Linux carries a process's peak RSS across fork and exec, so a child of
a parent that had built a 5,000-node snapshot in memory reported the parent's 1.4 GB as its peak.

Then firing alerts: the 500-node snapshot with each count of `--alerts` firing alerts spread
over its nodes (an alert no rule reads: each node diagnosis lists them as also firing).

Goals (issue 18): at 5,000 nodes gpubot <= 1.0x the peer, peak RSS <= 2x the file, text
output <= 1.2x JSON output; time(5,000) / time(500) <= 11, and the same for 50,000 firing
alerts against 5,000; 50 nodes <= 0.4 s whole CLI.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpusim.scenarios import FIXTURE_NOW, fleet_cluster

ROOT = Path(__file__).resolve().parent.parent
NOW = FIXTURE_NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
ALERT_NODES = 500
PEER = "import json, sys\nwith open(sys.argv[1], 'rb') as f:\n    json.loads(f.read())\n"


@dataclass
class Run:
    cpu_s: float
    wall_s: float
    rss_mib: float


@dataclass
class Size:
    nodes: int
    file_mib: float
    peer: list[Run] = field(default_factory=list)
    json_out: list[Run] = field(default_factory=list)
    text_out: list[Run] = field(default_factory=list)


def run(argv: list[str]) -> Run:
    """One child process, its CPU time and peak RSS as the kernel accounted them."""
    started = os.times().elapsed
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{argv[:4]}... exited {child.returncode}")
    wall = os.times().elapsed - started
    return Run(usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024)


def gpubot_entry() -> list[str]:
    """The console script pip wrote beside this interpreter, as a user starts it."""
    script = Path(sys.executable).parent / "gpubot"
    if script.is_file():
        return [sys.executable, str(script)]
    return [sys.executable, "-c", "from bot.commands import main; main()"]


def gpubot(snapshot: Path, alerts: Path, fmt: str) -> list[str]:
    files = ["--snapshot", str(snapshot), "--alerts", str(alerts)]
    return [*gpubot_entry(), "diagnose", *files, "--now", NOW, "--format", fmt]


def many_alerts(payload: dict[str, Any], nodes: int, count: int) -> dict[str, Any]:
    """`payload` with `count` more firing alerts, spread over the snapshot's GPU nodes."""
    extra = [
        {
            "status": "firing",
            "labels": {"alertname": "FleetNoise", "node": f"gpu-a{i % nodes + 1}", "n": str(i)},
            "annotations": {"summary": "an alert no rule reads"},
            "startsAt": NOW,
            "fingerprint": f"noise-{i}",
        }
        for i in range(count)
    ]
    return {**payload, "alerts": [*payload["alerts"], *extra]}


def write_files(nodes: int, snapshot: Path, alerts: Path, extra_alerts: int = 0) -> None:
    """The seeded snapshot and its alerts, written by a child process (see the docstring)."""
    argv = [sys.executable, __file__, "--write", str(nodes), str(snapshot), str(alerts)]
    subprocess.run([*argv, str(extra_alerts)], check=True)


def _write(nodes: int, snapshot: str, alerts: str, extra_alerts: int) -> None:
    cluster, payload = fleet_cluster(nodes)
    Path(snapshot).write_text(json.dumps(cluster))
    if extra_alerts:
        payload = many_alerts(payload, nodes, extra_alerts)
    Path(alerts).write_text(json.dumps(payload))


def alert_growth(counts: list[int], rounds: int, tmp: str) -> dict[int, list[Run]]:
    snapshot = Path(tmp, "alerts-fleet.json")
    files = {}
    for count in counts:
        files[count] = Path(tmp, f"many-alerts-{count}.json")
        write_files(ALERT_NODES, snapshot, files[count], count)
    runs: dict[int, list[Run]] = {count: [] for count in counts}
    for _ in range(rounds):
        for count in counts:
            runs[count].append(run(gpubot(snapshot, files[count], "json")))
    return runs


def med(values: list[float]) -> float:
    return statistics.median(values)


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 500, 5000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--alerts", type=int, nargs="*", default=[5000, 50000])
    parser.add_argument("--write", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:
        nodes, snapshot, alerts, extra = args.write
        _write(int(nodes), snapshot, alerts, int(extra))
        return
    sizes: list[Size] = []
    largest = max(args.sizes)
    for package in ("bot", "gpusim"):
        compileall.compile_dir(ROOT / package, quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        for nodes in args.sizes:
            snapshot, alerts = Path(tmp, f"fleet-{nodes}.json"), Path(tmp, f"alerts-{nodes}.json")
            write_files(nodes, snapshot, alerts)
            size = Size(nodes, snapshot.stat().st_size / 2**20)
            for _ in range(args.rounds):
                size.peer.append(run([sys.executable, "-c", PEER, str(snapshot)]))
                size.json_out.append(run(gpubot(snapshot, alerts, "json")))
                if nodes == largest:
                    size.text_out.append(run(gpubot(snapshot, alerts, "text")))
            sizes.append(size)
            print(f"{nodes} nodes done", file=sys.stderr)
        alerts = alert_growth(args.alerts, args.rounds, tmp) if args.alerts else {}
    print(f"{args.rounds} rounds; CPU seconds (user + system) of each process, medians")
    print()
    print(
        "| nodes | snapshot MiB | json.loads s | gpubot diagnose s | ratio (spread) "
        "| gpubot peak RSS MiB | RSS / file |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for size in sizes:
        ratios = [g.cpu_s / p.cpu_s for g, p in zip(size.json_out, size.peer, strict=True)]
        rss = med([r.rss_mib for r in size.json_out])
        print(
            f"| {size.nodes:,} | {size.file_mib:.0f} | {med([r.cpu_s for r in size.peer]):.2f} "
            f"| {med([r.cpu_s for r in size.json_out]):.2f} | {med(ratios):.2f} "
            f"({spread(ratios)}) | {rss:.0f} | {rss / size.file_mib:.1f} |"
        )
    print()
    big = sizes[-1]
    text = [t.cpu_s / j.cpu_s for t, j in zip(big.text_out, big.json_out, strict=True)]
    print(f"text / JSON output at {big.nodes:,} nodes: {med(text):.2f} ({spread(text)})")
    by_nodes = {s.nodes: s for s in sizes}
    if 500 in by_nodes and 5000 in by_nodes:
        growth = [
            a.cpu_s / b.cpu_s
            for a, b in zip(by_nodes[5000].json_out, by_nodes[500].json_out, strict=True)
        ]
        peer = [
            a.cpu_s / b.cpu_s for a, b in zip(by_nodes[5000].peer, by_nodes[500].peer, strict=True)
        ]
        print(
            f"growth 500 -> 5,000 nodes: gpubot {med(growth):.1f}x ({spread(growth)}), "
            f"json.loads {med(peer):.1f}x"
        )
    if 50 in by_nodes:
        small = by_nodes[50].json_out
        print(
            f"50 nodes, whole CLI: {med([r.cpu_s for r in small]):.2f} s CPU, "
            f"{med([r.wall_s for r in small]):.2f} s wall ({spread([r.wall_s for r in small])})"
        )

    if alerts:
        counts = sorted(alerts)
        print()
        print(f"| firing alerts, {ALERT_NODES} nodes | gpubot diagnose s | peak RSS MiB |")
        print("| ---: | ---: | ---: |")
        for count in counts:
            cpu = med([r.cpu_s for r in alerts[count]])
            print(f"| {count:,} | {cpu:.2f} | {med([r.rss_mib for r in alerts[count]]):.0f} |")
        low, high = alerts[counts[0]], alerts[counts[-1]]
        growth = [a.cpu_s / b.cpu_s for a, b in zip(high, low, strict=True)]
        print()
        print(
            f"growth {counts[0]:,} -> {counts[-1]:,} alerts: {med(growth):.1f}x ({spread(growth)})"
        )


if __name__ == "__main__":
    main()
