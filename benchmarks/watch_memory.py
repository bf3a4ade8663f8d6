"""Memory held by gpubot's watch caches for a 5,000-node, 100,000-pod cluster.

    python benchmarks/watch_memory.py [--nodes 5000] [--pods-per-node 13]

The simulated cluster runs in its own process (`gpubot sim serve`), so only the watcher's
memory is measured here. Side by side in this process: the same three informers (nodes,
pods, events) caching whole API objects, as a naive informer does (the peer), and gpubot's,
which cache only what the signal diffs read and only the pods that matter (GPU Operator
pods and GPU-requesting pods). Prints the memory each retains after the initial sync
(tracemalloc), the ratio, and this process's peak RSS.
"""

from __future__ import annotations

import argparse
import gc
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from bot.kube.cluster import KubeCluster
from bot.sources.kube import Informer, KubeSignals


def serve(nodes: int, pods_per_node: int) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot.cli",
            "sim",
            "serve",
            "--nodes",
            str(nodes),
            "--pods-per-node",
            str(pods_per_node),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().split()[2]


def retained(build: Callable[[], Any]) -> tuple[float, float, Any]:
    gc.collect()
    tracemalloc.start()
    started = time.perf_counter()
    held = build()
    elapsed = time.perf_counter() - started
    gc.collect()
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return current / 2**20, elapsed, held


def naive(cluster: KubeCluster) -> list[Informer]:
    informers = [
        Informer(cluster, kind, lambda old, new: None) for kind in ("Node", "Pod", "Event")
    ]
    for informer in informers:
        informer.sync()
    return informers


def ours(cluster: KubeCluster) -> KubeSignals:
    watcher = KubeSignals(cluster, lambda signal: None)
    for informer in watcher.informers:
        informer.sync()
    return watcher


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=13)
    args = parser.parse_args()
    process, url = serve(args.nodes, args.pods_per_node)
    try:
        cluster = KubeCluster.for_url(url)
        cluster_pods = len(cluster.list("Pod", field_selector="status.phase=Running"))
        naive_mib, naive_s, held = retained(lambda: naive(cluster))
        pods_naive = len(held[1].cache)
        del held
        ours_mib, ours_s, watcher = retained(lambda: ours(cluster))
        pods_ours = len(watcher.informers[1].cache)
    finally:
        process.terminate()
        process.wait(timeout=30)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{args.nodes + 1} nodes, {cluster_pods} pods")
    print()
    print("| watch caches after the initial sync | pods cached | MiB retained | sync s | ratio |")
    print("| --- | ---: | ---: | ---: | ---: |")
    print(
        f"| whole API objects (naive informer) | {pods_naive} | {naive_mib:.0f} "
        f"| {naive_s:.1f} | 1.00 |"
    )
    print(
        f"| gpubot (trimmed, GPU-relevant pods) | {pods_ours} | {ours_mib:.0f} "
        f"| {ours_s:.1f} | {ours_mib / naive_mib:.2f} |"
    )
    print()
    print(f"peak RSS of this process (both runs, JSON parsing included): {peak:.0f} MiB")


if __name__ == "__main__":
    main()
