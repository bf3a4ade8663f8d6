"""Resident memory of gpubot's watch caches for a 5,000-node, 100,000-pod cluster.

    python benchmarks/watch_memory.py [--nodes 5000] [--pods-per-node 13] [--rounds 3]
                                      [--peer-tree DIR] [--url URL]

The simulated cluster runs in its own process (`gpubot sim serve`, or the one `--url` names).
Each side runs in a process of its own too, so each RSS figure is that side's alone:
informers that cache whole API objects, as a naive informer does (the peer), and gpubot's.
With `--peer-tree`, gpubot's watches as another checkout has them (main's, from
`git worktree add`) run as a third side, with that checkout's `bot` on the path. The sides
take turns, `--rounds` rounds, against the same cluster.

Per side: RSS once the client is warm (imports, one small request), what the caches add
after the initial sync, and the peak RSS of the whole process (VmHWM), as medians with the
spread over the rounds; the ratio of peak RSS against the naive informer, per round.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def status_mib(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def child(role: str, url: str) -> None:
    from bot.kube.cluster import KubeCluster
    from bot.sources.watches import Informer, KubeSignals

    cluster = KubeCluster.for_url(url)
    # Warm the client up (TLS, connection pool, lazily imported models) with one small request.
    cluster.list("Node", field_selector="metadata.name=cpu-1")
    gc.collect()
    before = status_mib("VmRSS")
    started = time.perf_counter()
    if role == "naive":
        informers = [
            Informer(cluster, kind, lambda old, new: None, project=lambda obj: obj)
            for kind in ("Node", "Pod", "Event")
        ]
    else:
        informers = KubeSignals(cluster, lambda signal: None).informers
    for informer in informers:
        informer.sync()
    elapsed = time.perf_counter() - started
    gc.collect()
    print(
        json.dumps(
            {
                "pods": len(informers[1].cache),
                "warm_mib": before,
                "added_mib": status_mib("VmRSS") - before,
                "peak_mib": status_mib("VmHWM"),
                "seconds": elapsed,
            }
        )
    )


def spread(values: list[float]) -> str:
    return f"{min(values):.0f}–{max(values):.0f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=13)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--peer-tree", type=Path, help="another checkout whose watches to run")
    parser.add_argument("--url", help="a running `gpubot sim serve` to use")
    parser.add_argument("--role", choices=["naive", "ours"])
    args = parser.parse_args()
    if args.role:
        child(args.role, args.url)
        return
    server = None
    url = args.url
    if url is None:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bot.commands",
                "sim",
                "serve",
                "--no-controllers",
                "--nodes",
                str(args.nodes),
                "--pods-per-node",
                str(args.pods_per_node),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None
        url = server.stdout.readline().split()[2]
    sides = [("whole API objects (naive informer)", "naive", HERE)]
    if args.peer_tree:
        sides.append((f"gpubot at {args.peer_tree}", "ours", args.peer_tree.resolve()))
    sides.append(("gpubot (this checkout)", "ours", HERE))
    runs: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in sides}
    try:
        for _ in range(args.rounds):
            for label, role, tree in sides:
                done = subprocess.run(
                    [sys.executable, __file__, "--role", role, "--url", url],
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd=tree,
                    env={**os.environ, "PYTHONPATH": str(tree)},
                )
                runs[label].append(json.loads(done.stdout))
        from bot.kube.cluster import KubeCluster

        nodes = len(KubeCluster.for_url(url).list("Node"))
        pods = len(KubeCluster.for_url(url).list("Pod"))
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    naive = runs[sides[0][0]]
    print(f"{nodes} nodes, {pods} pods; {args.rounds} rounds, medians (spread)")
    print(f"{platform.python_version()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print()
    header = ["watch caches, own process", "pods cached", "RSS warm, MiB"]
    header += ["added by the caches, MiB", "peak RSS, MiB", "sync s", "peak ratio per round"]
    print("| " + " | ".join(header) + " |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for label, _, _ in sides:
        rs = runs[label]
        cells = [label, f"{rs[0]['pods']:.0f}"]
        for key in ("warm_mib", "added_mib", "peak_mib"):
            values = [r[key] for r in rs]
            cells.append(f"{statistics.median(values):.0f} ({spread(values)})")
        seconds = [r["seconds"] for r in rs]
        cells.append(f"{statistics.median(seconds):.1f} ({min(seconds):.1f}–{max(seconds):.1f})")
        ratios = [r["peak_mib"] / n["peak_mib"] for r, n in zip(rs, naive, strict=True)]
        cells.append(", ".join(f"{x:.2f}" for x in ratios))
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
