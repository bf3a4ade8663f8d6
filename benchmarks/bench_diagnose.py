"""Diagnosis time for a large snapshot, against the floor of merely parsing its JSON.

    python benchmarks/bench_diagnose.py [--nodes 5000] [--pods-per-node 13]

Builds a healthy GPU cluster (5,000 8-GPU nodes, 100,000 pods: 7 GPU Operator pods, one
training worker and 12 other pods per node), breaks 2% of the nodes (zero capacity, Xid
alerts, cordons with PDB blocks), writes it as kubectl JSON, then times, side by side in one
process: `json.loads` of the file (the floor any tool pays), building the facts, and the
full diagnosis with every shipped rule. Prints a Markdown table of seconds and ratios.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
import tracemalloc
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from bot.config import Settings
from bot.diagnose import diagnose
from bot.evidence.collecting import collect_facts
from bot.evidence.snapshots import parse_snapshot
from bot.model import Signal
from bot.rules.loading import load_rules
from gpusim.scenarios import FIXTURE_NOW, healthy_cluster

ROOT = Path(__file__).resolve().parent.parent


def broken_cluster(nodes: int, pods_per_node: int) -> tuple[dict[str, Any], list[Signal]]:
    cluster = healthy_cluster(nodes, pods_per_node=pods_per_node)
    signals = []
    gpu_nodes = [
        i for i in cluster["items"] if i["kind"] == "Node" and i["metadata"]["name"] != "cpu-1"
    ]
    for index, node in enumerate(gpu_nodes):
        if index % 50 == 1:
            node["status"]["allocatable"]["nvidia.com/gpu"] = "0"
        elif index % 50 == 2:
            name = node["metadata"]["name"]
            signals.append(
                Signal(
                    source="alertmanager",
                    name="GPUXidError",
                    node=name,
                    gpu="3",
                    labels={"alertname": "GPUXidError", "node": name, "gpu": "3", "xid": "48"},
                    fingerprint=f"xid-{name}",
                )
            )
        elif index % 50 == 3:
            node["spec"]["unschedulable"] = True
            node["spec"]["taints"] = [
                {
                    "key": "node.kubernetes.io/unschedulable",
                    "effect": "NoSchedule",
                    "timeAdded": "2026-12-02T02:00:00Z",
                }
            ]
    for item in cluster["items"]:
        if item["kind"] == "PodDisruptionBudget":
            item["status"]["disruptionsAllowed"] = 0
    return cluster, signals


def timed(repeat: int, work: Any) -> tuple[float, Any]:
    runs = []
    result = None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = work()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=13)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    settings = Settings()
    rules = load_rules([ROOT / "rules"])
    cluster, signals = broken_cluster(args.nodes, args.pods_per_node)
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot.json"
        path.write_text(json.dumps(cluster))
        size_mb = path.stat().st_size / 2**20
        pods = sum(1 for i in cluster["items"] if i["kind"] == "Pod")
        del cluster
        t_json, raw = timed(args.repeat, lambda: json.loads(path.read_text()))
        snapshot = parse_snapshot(raw)
        t_facts, facts = timed(
            args.repeat, lambda: collect_facts(snapshot, signals, settings, FIXTURE_NOW)
        )
        t_diag, result = timed(args.repeat, lambda: diagnose(facts, signals, rules, settings))
        tracemalloc.start()
        collect_facts(snapshot, signals, settings, FIXTURE_NOW)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    total = t_facts + t_diag
    print(
        f"snapshot: {len(snapshot.nodes)} nodes, {pods} pods, {size_mb:.0f} MiB of JSON; "
        f"{len(rules.rules)} rules; {len(result.diagnoses)} diagnoses, "
        f"{len(result.errors)} rule errors"
    )
    print()
    print(f"| step | seconds (median of {args.repeat}) | × json.loads |")
    print("| --- | ---: | ---: |")
    print(f"| json.loads of the snapshot (floor) | {t_json:.2f} | 1.0 |")
    print(f"| facts (objects, blockers, pending pods) | {t_facts:.2f} | {t_facts / t_json:.1f} |")
    print(f"| diagnose (all rules, 3 passes, questions) | {t_diag:.2f} | {t_diag / t_json:.1f} |")
    print(f"| facts + diagnose | {total:.2f} | {total / t_json:.1f} |")
    print()
    print(f"peak memory while building facts: {peak / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
