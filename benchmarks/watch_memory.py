"""Resident memory of gpubot's watch caches for a 5,000-node, 100,000-pod cluster.

    python benchmarks/watch_memory.py [--nodes 5000] [--pods-per-node 13]

The simulated cluster runs in its own process (`gpubot sim serve`). Each side runs in a
process of its own too, so each RSS figure is that side's alone: informers that cache whole
API objects, as a naive informer does (the peer), and gpubot's, which trim every object as
its page arrives and cache only GPU-relevant pods. Prints, per side, the resident memory the
caches add after the initial sync, the peak RSS of the process, and the ratio.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import subprocess
import sys
import time

from bot.kube.cluster import KubeCluster
from bot.sources.watches import Informer, KubeSignals


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def child(role: str, url: str) -> None:
    cluster = KubeCluster.for_url(url)
    cluster.list("Node", label_selector="nvidia.com/gpu.present=true")  # warm the client up
    gc.collect()
    before = rss_mib()
    started = time.perf_counter()
    if role == "naive":
        informers = [
            Informer(cluster, kind, lambda old, new: None) for kind in ("Node", "Pod", "Event")
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
                "added_mib": rss_mib() - before,
                "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "seconds": elapsed,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=13)
    parser.add_argument("--role", choices=["naive", "ours"])
    parser.add_argument("--url")
    args = parser.parse_args()
    if args.role:
        child(args.role, args.url)
        return
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot.cli",
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
    try:
        results = {}
        for role in ("naive", "ours"):
            done = subprocess.run(
                [sys.executable, __file__, "--role", role, "--url", url],
                capture_output=True,
                text=True,
                check=True,
            )
            results[role] = json.loads(done.stdout)
        total = len(KubeCluster.for_url(url).list("Pod"))
    finally:
        server.terminate()
        server.wait(timeout=30)
    naive, ours = results["naive"], results["ours"]
    print(f"{args.nodes + 1} nodes, {total} pods")
    print()
    header = ["watch caches, own process", "pods cached", "RSS added by the caches, MiB"]
    header += ["peak RSS, MiB", "sync s", "ratio"]
    print("| " + " | ".join(header) + " |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    sides = (
        ("whole API objects (naive informer)", naive),
        ("gpubot (trimmed per page, GPU-relevant pods)", ours),
    )
    for label, r in sides:
        ratio = r["added_mib"] / naive["added_mib"]
        cells = [label, str(r["pods"]), f"{r['added_mib']:.0f}", f"{r['peak_mib']:.0f}"]
        cells += [f"{r['seconds']:.1f}", f"{ratio:.2f}"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
