"""Rule evaluation throughput, and the measurement behind our choice of CEL package.

    pip install -e '.[bench]' && python benchmarks/bench_rules.py [--signals 2000]

A stream of alert signals, each about one node of a 200-node GPU pool: for every signal the
bot builds that node's facts context and evaluates every shipped node rule on it (the work
done per incoming alert). Measured side by side on the same contexts and expressions:

- cel-expr-python (Google's cel-cpp bindings; what gpubot uses, through bot.rules.cel)
- common-expression-language (Rust cel-interpreter bindings)
- cel-python (pure Python)

Prints signals per second for each and the ratio to ours. Only the `when` conditions are
timed for the peers, since they decide whether a rule fires at all.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.config import Settings
from bot.diagnose import infer_stage
from bot.facts.collecting import collect_facts
from bot.facts.snapshots import parse_snapshot
from bot.model import Lang, Signal
from bot.rules.contexts import node_context, node_pool_context
from bot.rules.loading import load_rules
from bot.rules.matching import match
from gpusim.scenarios import FIXTURE_NOW, healthy_cluster

ROOT = Path(__file__).resolve().parent.parent
XIDS = ["13", "31", "48", "63", "74", "79", "94", "95", "119"]
ALERTS = ["GPUXidError", "GPUECCDoubleBitError", "GPUNVLinkErrors", "GPUTemperatureHigh"]


def make_signals(count: int, nodes: list[str]) -> list[Signal]:
    signals = []
    for i, (node, alert) in enumerate(zip(itertools.cycle(nodes), itertools.cycle(ALERTS))):
        if i == count:
            break
        labels = {"alertname": alert, "node": node, "gpu": str(i % 8)}
        if alert == "GPUXidError":
            labels["xid"] = XIDS[i % len(XIDS)]
        signals.append(
            Signal(
                source="alertmanager",
                name=alert,
                node=node,
                gpu=labels["gpu"],
                labels=labels,
                fingerprint=f"f{i}",
            )
        )
    return signals


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--signals", type=int, default=2000)
    parser.add_argument("--nodes", type=int, default=200)
    args = parser.parse_args()
    settings = Settings()
    rules = load_rules([ROOT / "rules"])
    node_rules = [r for r in rules.rules if r.spec.scope == "node" and not r.spec.after_node_rules]
    snapshot = parse_snapshot(healthy_cluster(args.nodes))
    names = [n["metadata"]["name"] for n in snapshot.nodes if n["metadata"]["name"] != "cpu-1"]
    signals = make_signals(args.signals, names)

    # What gpubot does per signal: facts context for the node, then every node rule.
    facts = collect_facts(snapshot, signals, settings, FIXTURE_NOW)
    contexts = []
    start = time.perf_counter()
    fired = 0
    for signal in signals:
        node = facts.nodes[signal.node or ""]
        stage = infer_stage(node, settings)
        pool = node_pool_context(facts.pools.get(node.pool or ""))
        context = node_context(node, stage, [signal], rules.xid_catalog, pool, settings, Lang.EN)
        contexts.append((context, stage))
        fired += len(match(node_rules, context, node.name, stage).matches)
    ours_full = len(signals) / (time.perf_counter() - start)

    # Rules with `variables` need gpubot's evaluation of those first: compared are the rest.
    conditions = [r.spec.when for r in node_rules if not r.spec.variables]
    results: list[tuple[str, float]] = []
    for name, engine in engines().items():
        try:
            run = engine(conditions)
        except ImportError:
            print(f"({name} not installed: pip install -e '.[bench]')")
            continue
        start = time.perf_counter()
        for context, _ in contexts:
            run(context)
        results.append((name, len(contexts) / (time.perf_counter() - start)))

    ours = dict(results).get("cel-expr-python (ours)")
    print(
        f"{len(signals)} signals over {len(names)} nodes, "
        f"{len(node_rules)} node rules, {fired} matches"
    )
    print()
    print(f"| engine | signals/s, `when` of {len(conditions)} node rules | × ours |")
    print("| --- | ---: | ---: |")
    for name, rate in results:
        print(
            f"| {name} | {rate:,.0f} | {rate / ours:.3f} |"
            if ours
            else f"| {name} | {rate:,.0f} | |"
        )
    print()
    print(
        f"Full per-signal path in gpubot (context + all node rules, evidence, proposals): "
        f"{ours_full:,.0f} signals/s"
    )


def engines() -> dict[str, Callable[[list[str]], Callable[[dict[str, Any]], None]]]:
    def ours(conditions: list[str]) -> Callable[[dict[str, Any]], None]:
        from bot.rules.cel import Activation, EvaluationError, Expression

        programs = [Expression(c) for c in conditions]

        def run(context: dict[str, Any]) -> None:
            activation = Activation(context)
            for program in programs:
                with contextlib.suppress(EvaluationError):
                    program.evaluate(activation)

        return run

    def rust(conditions: list[str]) -> Callable[[dict[str, Any]], None]:
        import cel  # common-expression-language

        programs = [cel.compile(c) for c in conditions]

        def run(context: dict[str, Any]) -> None:
            env = cel.Context(context)
            for program in programs:
                with contextlib.suppress(Exception):  # one rule's error must not stop the rest
                    program.execute(env)

        return run

    def pure(conditions: list[str]) -> Callable[[dict[str, Any]], None]:
        import celpy  # cel-python

        environment = celpy.Environment()
        programs = [environment.program(environment.compile(c)) for c in conditions]

        def run(context: dict[str, Any]) -> None:
            activation = {k: celpy.json_to_cel(v) for k, v in context.items()}
            for program in programs:
                with contextlib.suppress(Exception):
                    program.evaluate(activation)

        return run

    return {
        "cel-expr-python (ours)": ours,
        "common-expression-language (Rust)": rust,
        "cel-python (pure Python)": pure,
    }


if __name__ == "__main__":
    main()
