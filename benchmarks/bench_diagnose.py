"""Diagnosis time for a large snapshot, against the floor of merely parsing its JSON.

    python benchmarks/bench_diagnose.py [--nodes 5000] [--pods-per-node 13]

Builds the seeded fleet scenario (`gpusim.scenarios.fleet_cluster`: 5,000 8-GPU nodes,
100,000 pods, about 7% of the nodes broken five ways, Xid alerts), writes it as kubectl JSON,
then times, side by side in one process, with Python's defaults (garbage collection on):
`json.loads` of the file (the floor any tool pays), building the facts, and the
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
from bot.facts.collecting import collect_facts
from bot.facts.snapshots import parse_snapshot
from bot.model import Signal
from bot.rules.loading import load_rules
from bot.sources.alertmanager.payloads import signals_from_payload, validate_payload
from bot.sources.alertmanager.understanding import alert_mapping
from gpusim.scenarios import FIXTURE_NOW, fleet_cluster

ROOT = Path(__file__).resolve().parent.parent


def fleet(
    nodes: int, pods_per_node: int, settings: Settings
) -> tuple[dict[str, Any], list[Signal]]:
    """The seeded fleet scenario benchmarks/fleet.py runs, its alerts read as signals."""
    cluster, payload = fleet_cluster(nodes, pods_per_node)
    alerts = validate_payload(payload, "fleet alerts")
    return cluster, signals_from_payload(alerts, settings.node_labels, alert_mapping(settings))


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
    cluster, signals = fleet(args.nodes, args.pods_per_node, settings)
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
