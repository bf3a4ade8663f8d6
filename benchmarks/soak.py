"""A simulated hour on a 60-node pool: a fault every (compressed) minute, through the serving
code, and what the on-call would have seen.

    python benchmarks/soak.py [--faults 60] [--every 4] [--nodes 60]

One drill (`bot.roots.drill.play_drill`: the simulator, a real Prometheus when installed, one
replica composed as `serve` composes it, a recording chat) is generated and played. Each
minute of the hour is `--every` seconds of wall time: the waiting windows are at drill scale
(settle 8 s, resolve-after 8 s, the Prometheus window 20 s), so the timing figures are
seconds at that scale, not at production's. Fault i hits node i, round-robin over:

- Xid 79 and ECC double-bit errors: two approvers drain the node, it is repaired (reboot or
  GPU reset) and the uncordon offer is waited for (not approved: nodes stay out, so the
  blast radius is set wide enough for the hour);
- a device-plugin crash loop and Fabric Manager down: steady problems, never repaired during
  the hour, on the other node of each training job's pair.

Printed against the goals of issue "The live loop":
- messages per fault (goal 1.0): diagnosis messages posted, over faults;
- reopen cycles per steady problem (goal 0);
- wrong-proposal window (goal 0 s): summed over the faults proposing a drain, the seconds
  buttons of another action could be clicked on the node before the drain was offered;
- fault to the right diagnosis, p50 / p99 (goal: the alert's delay, 3 s here);
- repair to the uncordon offer, p50 / p99 (goal: within a minute).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass

from bot.config import Settings
from bot.drills.judging import Record, channel_messages, events, wrong_window
from bot.drills.spec import Drill
from bot.model import Action
from bot.roots.drill import find_prometheus, play_drill


@dataclass(frozen=True)
class Kind:
    fault: str
    params: dict[str, object]
    rule: str
    drained: bool


KINDS = (
    Kind("xid", {"code": 79, "gpu": 3}, "gpu-fell-off-bus", True),
    Kind("plugin-crashloop", {}, "device-plugin-crashloop", False),
    Kind("ecc-dbe", {"gpu": 0}, "gpu-ecc-error", True),
    Kind("fabric-manager-down", {}, "fabric-manager-down", False),
)
"""Drained and steady problems alternate: the scenario runs one training job over each pair
of nodes (gpu-a1 and gpu-a2, ...) with a budget of one disruption, so only one node of a
pair is drained; two drains in one job would wait on the budget (a drill of its own). No
NotReady node: the scenario's pods lack the tolerations admission gives real pods, so the
node lifecycle controller would evict the pair's other worker at once and block its drain."""
APPROVE_AFTER_S = 10.0
REPAIR_AFTER_S = 18.0


def script(faults: int, every_s: float) -> list[tuple[float, dict[str, object]]]:
    """(seconds from the start, step) for the whole hour, in time order."""
    timed: list[tuple[float, dict[str, object]]] = []
    for index in range(faults):
        node, kind, at = f"gpu-a{index + 1}", KINDS[index % len(KINDS)], index * every_s
        timed.append(
            (
                at,
                {
                    "fault": kind.fault,
                    "node": node,
                    "params": kind.params,
                    "alert_after": 3,  # faults the cluster cannot show come as alerts
                },
            )
        )
        if kind.drained:
            for who in ("alice", "bob"):
                decide = {"action": "drain", "node": node, "as": who}
                timed.append((at + APPROVE_AFTER_S, {"approve": decide}))
            timed.append((at + REPAIR_AFTER_S, {"repair": kind.fault, "node": node}))
    return sorted(timed, key=lambda t: t[0])


def drill(faults: int, every_s: float, nodes: int) -> Drill:
    steps: list[dict[str, object]] = []
    now = 0.0
    for at, step in script(faults, every_s):
        if at > now:
            steps.append({"wait": at - now})
            now = at
        steps.append(step)
    steps.append({"wait": 45})  # the last repairs' gates and offers
    people = {"users": ["alice", "bob"]}
    return Drill.model_validate(
        {
            "drill": "soak",
            "about": f"{faults} faults, one every {every_s:g} s, on {nodes} nodes",
            "cluster": {"gpu_nodes": nodes, "pods_per_node": 1},
            "settings": {
                # Fifteen nodes of one pool with the same steady fault within the hour would be
                # a pool-wide failure (at 25 %): this hour measures node problems.
                "thresholds": {"pool_wide_min_share": 0.5},
                "remediation": {
                    "blast_radius": {"max_nodes": nodes, "max_share": 1.0},
                    "approvals": {
                        "drain": {**people, "two_person": True},
                        "uncordon": people,
                    },
                },
            },
            "script": steps,
            "expect": {},
        }
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def figures(record: Record) -> dict[str, str]:
    story = events(record)
    faults = [p for p in record.played if p.kind == "fault"]
    repairs = {p.node: p.at for p in record.played if p.kind == "repair"}
    by_fault = {k.fault: k for k in KINDS}
    to_right: list[float] = []
    to_offer: list[float] = []
    wrong = 0.0
    for played in faults:
        kind = by_fault[played.what]
        right = next(
            (
                e
                for e in story
                if e.node == played.node
                and e.kind in ("diagnosis", "revision")
                and e.rule == kind.rule
                and e.at >= played.at
            ),
            None,
        )
        if right is not None:
            to_right.append((right.at - played.at).total_seconds())
        if kind.drained:
            wrong += wrong_window(Action.DRAIN, record, played.node, played.at)
            repaired = repairs.get(played.node)
            offer = next(
                (
                    e
                    for e in story
                    if repaired is not None
                    and e.node == played.node
                    and e.at >= repaired
                    and Action.UNCORDON in e.offered
                ),
                None,
            )
            if offer is not None and repaired is not None:
                to_offer.append((offer.at - repaired).total_seconds())
    steady_nodes = {p.node for p in faults if not by_fault[p.what].drained}
    steady = [i for i in record.incidents if i.node in steady_nodes]
    reopens = sum(i.reopened for i in steady)
    messages = channel_messages(record)
    faulted = {p.node: by_fault[p.what].rule for p in faults}
    others: dict[str, int] = {}
    for seen in record.seen:
        if seen.kind == "diagnosis" and seen.node not in faulted:
            key = f"{seen.rule} on {seen.node or 'the cluster'}"
            others[key] = others.get(key, 0) + 1
    drained = sum(1 for p in faults if by_fault[p.what].drained)

    def spread(values: list[float], out_of: int) -> str:
        if not values:
            return "none"
        return (
            f"p50 {statistics.median(values):.1f} s, p99 {percentile(values, 0.99):.1f} s "
            f"({len(values)} of {out_of})"
        )

    return {
        "faults": str(len(faults)),
        "messages per fault": f"{messages / max(1, len(faults)):.2f} ({messages} messages)",
        "reopen cycles per steady problem": f"{reopens / max(1, len(steady)):.2f}",
        "wrong-proposal window": f"{wrong:.1f} s over {drained} drained faults",
        "fault to the right diagnosis": spread(to_right, len(faults)),
        "repair to the uncordon offer": spread(to_offer, drained),
        "messages about no faulted node": ", ".join(f"{k} ×{v}" for k, v in others.items())
        or "none",
        "script errors": "; ".join(record.errors) or "none",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", type=int, default=60)
    parser.add_argument("--every", type=float, default=4.0, help="wall seconds per minute")
    parser.add_argument("--nodes", type=int, default=60)
    args = parser.parse_args()
    if args.nodes < args.faults:
        sys.exit("--nodes must be at least --faults: each fault gets its own node")
    prometheus = find_prometheus("auto")
    if prometheus is None:
        print("note: no prometheus on PATH: the health gate cannot pass", file=sys.stderr)
    record = play_drill(
        drill(args.faults, args.every, args.nodes), Settings(), prometheus_bin=prometheus
    )
    wall = (record.ended - record.started).total_seconds()
    print(
        f"soak: {args.faults} faults every {args.every:g} s on {args.nodes} nodes, "
        f"{wall:.0f} s of wall time"
    )
    for name, value in figures(record).items():
        print(f"  {name}: {value}")


if __name__ == "__main__":
    main()
