"""Startup: `gpubot diagnose` of the 50-node fleet snapshot as a whole CLI, against the bare
interpreter.

    python benchmarks/startup.py [--rounds 10] [--baseline DIR]

The seeded 50-node fleet snapshot (`gpusim.scenarios.fleet_cluster(50)`, as benchmarks/fleet.py
writes it) and its alerts are written as files. Then, taking turns for `--rounds` rounds, each
in its own process: the peers `python -c pass` and `python -c "import json"` (what any Python
command pays before its own work), and the `gpubot` console script beside this interpreter:
`--help`, `diagnose --format json` and `diagnose --format text` of the same files. With
`--baseline DIR` (another checkout, e.g. `git archive main | tar -x -C DIR`), that checkout's
`gpubot diagnose --format json` runs in the same turn, with this interpreter and its packages.

gpubot runs as installed: the packages' bytecode is compiled first (pip and the image compile
it at install; a checkout under PYTHONDONTWRITEBYTECODE=1 would otherwise compile gpubot's
sources again in every run: about 0.05 s of a diagnosis here).

Figures are CPU seconds (user + system, the kernel's accounting of the finished child),
medians with the spread (min-max) of the rounds; ratios are taken within each round.

Goal (issue 18): 50-node `gpubot diagnose`, whole CLI, <= 0.4 s.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import sys
import tempfile
from pathlib import Path

from fleet import Run, gpubot_entry, med, run, spread  # the same child accounting as fleet.py

from gpusim.scenarios import FIXTURE_NOW, fleet_cluster

ROOT = Path(__file__).resolve().parent.parent
NOW = FIXTURE_NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
GOAL_S = 0.4


def baseline_entry(checkout: Path) -> list[str]:
    # A checkout from before the commands package (bot/commands/) has its entry in bot/cli.py.
    code = (
        f"import sys; sys.path.insert(0, {str(checkout)!r})\n"
        "try:\n    from bot.commands import main\n"
        "except ImportError:\n    from bot.cli import main\n"
        "main()"
    )
    return [sys.executable, "-c", code]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--baseline", type=Path, help="another checkout to run side by side")
    args = parser.parse_args()
    checkouts = [ROOT, *([args.baseline] if args.baseline else [])]
    for checkout in checkouts:
        for package in ("bot", "gpusim"):
            compileall.compile_dir(checkout / package, quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        cluster, payload = fleet_cluster(50)
        snapshot, alerts = Path(tmp, "fleet-50.json"), Path(tmp, "alerts-50.json")
        snapshot.write_text(json.dumps(cluster))
        alerts.write_text(json.dumps(payload))
        files = ["--snapshot", str(snapshot), "--alerts", str(alerts), "--now", NOW]
        gpubot = gpubot_entry()
        commands: dict[str, list[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            'python -c "import json"': [sys.executable, "-c", "import json"],
            "gpubot --help": [*gpubot, "--help"],
            "gpubot diagnose --format json": [*gpubot, "diagnose", *files, "--format", "json"],
            "gpubot diagnose --format text": [*gpubot, "diagnose", *files, "--format", "text"],
        }
        if args.baseline:
            commands["baseline: gpubot diagnose --format json"] = [
                *baseline_entry(args.baseline),
                "diagnose",
                *files,
                "--format",
                "json",
            ]
        runs: dict[str, list[Run]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, argv in commands.items():
                runs[name].append(run(argv))
    load = os.getloadavg()[0]
    print(f"{args.rounds} rounds, load average {load:.1f} at the end; CPU seconds (user + system)")
    print()
    print(
        "| command | CPU s (spread) | wall s | peak RSS MiB | vs `python -c pass` "
        "| vs `import json` |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    bare, imported = runs["python -c pass"], runs['python -c "import json"']
    for name, done in runs.items():
        cpu = [r.cpu_s for r in done]
        over_bare = [a.cpu_s / max(b.cpu_s, 1e-3) for a, b in zip(done, bare, strict=True)]
        over_json = [a.cpu_s / max(b.cpu_s, 1e-3) for a, b in zip(done, imported, strict=True)]
        print(
            f"| `{name}` | {med(cpu):.3f} ({spread(cpu)}) | {med([r.wall_s for r in done]):.2f} "
            f"| {med([r.rss_mib for r in done]):.0f} | {med(over_bare):.1f}x | "
            f"{med(over_json):.1f}x |"
        )
    diagnose = [r.cpu_s for r in runs["gpubot diagnose --format json"]]
    print()
    print(
        f"goal: 50-node diagnose, whole CLI, <= {GOAL_S} s: {med(diagnose):.3f} s CPU "
        f"({spread(diagnose)}): {'met' if med(diagnose) <= GOAL_S else 'not met'}"
    )
    if args.baseline:
        before = runs["baseline: gpubot diagnose --format json"]
        after = runs["gpubot diagnose --format json"]
        ratios = [a.cpu_s / b.cpu_s for a, b in zip(after, before, strict=True)]
        print(f"this checkout / baseline, diagnose JSON: {med(ratios):.2f} ({spread(ratios)})")


if __name__ == "__main__":
    main()
