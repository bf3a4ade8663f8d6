"""What `gpubot diagnose` prints must not change when the fleet-scale work makes it faster.

The hashes below were taken from the code before that work (main at f5517bc): the output of a
seeded 300-node fleet snapshot in each format, and every rule test's diagnoses. The text
format's and the rule tests' were taken again from main at e9662ed, after deliberate changes
of wording and layout there (console panels, runbook below the panel, drain proposal texts).
A change that alters a single byte of what the on-call reads fails here; a deliberate change
of wording updates the hash in the same commit, saying why.

The output is compared as printed, evidence lines in their order: they were compared sorted
until the rules iterated their maps through `sortedKeys()`, since cel-cpp iterates a CEL map in
a hash order that changed from one process to the next. The hashes were taken again then, the
lines of a map now in the order of its keys. The rule tests' was taken again when a node only
alerts name stopped counting itself in "How wide?" (issue 31 item 4): the three tests of a node
the snapshot does not have said "1 node(s) in the cluster show this", now "not counted (not in
the cluster); 0 node(s) in the cluster show this"; nothing else changed."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.commands.offline_commands import diagnosis_json
from bot.config import Settings
from bot.roots.offline import run_rule_tests
from gpusim.scenarios import fleet_cluster
from tests.helpers.paths import REPO, RULES

NOW = "2026-12-02T03:00:00Z"
GPUBOT = [sys.executable, "-m", "bot.commands", "diagnose", "--now", NOW]

FLEET_OUTPUT = {
    "json": "e661f8b960f0675aa59de18e9e032b8b15c3642a0390f026b7e8ebc9175a6ce2",
    "markdown": "3bf101ad414b5a4456e242a389a45da4c5f9c572de3e89508ed403c1305ea049",
    "text": "72763480ef51277b11214b76bbe2112eef039342b76669e895b15695cf1755f6",
}
RULE_TEST_DIAGNOSES = "2b58f726901a3b23220c502467f1fdd15d3d367cf53586da595608c1c5b3d81e"


@pytest.fixture(scope="module")
def fleet_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("fleet")
    cluster, alerts = fleet_cluster(300)
    snapshot, payload = folder / "snapshot.json", folder / "alerts.json"
    snapshot.write_text(json.dumps(cluster))
    payload.write_text(json.dumps(alerts))
    return snapshot, payload


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("fmt", sorted(FLEET_OUTPUT))
def test_a_fleet_snapshot_is_diagnosed_byte_for_byte_as_before(
    fleet_files: tuple[Path, Path], fmt: str
) -> None:
    snapshot, alerts = fleet_files
    done = subprocess.run(
        [*GPUBOT, *["--snapshot", str(snapshot), "--alerts", str(alerts), "--format", fmt]],
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "120", "TERM": "dumb"},
    )
    assert done.returncode == 0, done.stderr.decode()
    assert b"gpu-a" in done.stdout
    assert _sha(done.stdout) == FLEET_OUTPUT[fmt]


def test_every_rule_tests_diagnoses_are_as_before() -> None:
    outcomes = [o for run in run_rule_tests(RULES, Settings()) for o in run.outcomes]
    assert outcomes and all(o.passed for o in outcomes)
    # Where each test is, relative to the checkout: the same hash in any clone.
    told = [
        [o.where.removeprefix(f"{REPO}/"), o.name, [diagnosis_json(d) for d in o.diagnoses]]
        for o in outcomes
    ]
    assert _sha(json.dumps(told, ensure_ascii=False).encode()) == RULE_TEST_DIAGNOSES
