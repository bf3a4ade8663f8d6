"""`gpubot diagnose` on the inputs people actually have, as a subprocess: kubectl's YAML, several
files and stdin, a GPU Operator must-gather folder (laid out as NVIDIA's must-gather.sh writes
it: tests/data/must-gather/README.md), and a kernel log of one node."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.helpers.look_alikes import ABSENT, HIDDEN, LOOK_ALIKES, payload
from tests.helpers.paths import HEALTHY, REPO

DATA = REPO / "tests" / "data"
NOW = "2026-12-02T03:00:00Z"


def gpubot(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.commands", *args],
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )


def _found(done: subprocess.CompletedProcess[str]) -> list[tuple[str, str | None, list[str]]]:
    assert done.returncode == 0, done.stderr
    diagnoses: list[dict[str, Any]] = json.loads(done.stdout)["diagnoses"]
    return [(d["rule"], d["node"], [p["action"] for p in d["proposals"]]) for d in diagnoses]


def test_a_must_gather_folder_is_diagnosed_and_says_what_it_lacks() -> None:
    bundle = DATA / "must-gather" / "xid79-device-plugin-crashloop"
    done = gpubot("diagnose", "--snapshot", str(bundle), "--format", "json")
    assert _found(done) == [("gpu-fell-off-bus", "gpu-node-2", ["drain"])]
    assert "not known: no events: must-gather does not collect them" in done.stderr


def test_a_bundle_with_unreadable_parts_is_diagnosed_from_the_rest_and_lists_them() -> None:
    bundle = DATA / "must-gather" / "partial-driver-crashloop-unreadable"
    done = gpubot("diagnose", "--snapshot", str(bundle), "--format", "json")
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: ")]
    assert any("skipped" in n for n in notes) and any("not known" in n for n in notes), notes
    assert "Traceback" not in done.stderr


def test_a_kernel_log_gives_the_node_its_xid(tmp_path: Path) -> None:
    log = DATA / "kernel-logs" / "nvsentinel155-xid79-fallen-off-bus.dmesg"
    done = gpubot(
        "diagnose",
        "--snapshot",
        str(HEALTHY),
        "--kernel-log",
        str(log),
        "--node",
        "gpu-a2",
        "--now",
        NOW,
        "--format",
        "json",
    )
    assert ("gpu-fell-off-bus", "gpu-a2", ["drain"]) in _found(done)
    without = gpubot("diagnose", "--snapshot", str(HEALTHY), "--kernel-log", str(log))
    assert without.returncode == 2 and "give --node NODE" in without.stderr


def test_yaml_several_files_and_stdin_are_one_snapshot(tmp_path: Path) -> None:
    items = json.loads(HEALTHY.read_text())["items"]
    nodes = [i for i in items if i["kind"] == "Node"]
    for node in nodes:
        if node["metadata"]["name"] == "gpu-a3":
            node["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    rest = [i for i in items if i["kind"] != "Node"]
    as_yaml = tmp_path / "nodes.yaml"
    as_yaml.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    done = gpubot(
        "diagnose",
        "--snapshot",
        str(as_yaml),
        "--snapshot",
        "-",
        "--now",
        NOW,
        "--format",
        "json",
        stdin=json.dumps({"kind": "List", "items": rest}),
    )
    assert ("gpu-capacity-zero", "gpu-a3", ["cordon"]) in _found(done)


def test_an_unreadable_input_is_one_line_naming_it_and_exit_2(tmp_path: Path) -> None:
    not_a_bundle = tmp_path / "empty"
    not_a_bundle.mkdir()
    done = gpubot("diagnose", "--snapshot", str(not_a_bundle))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {not_a_bundle}: not a GPU Operator must-gather folder")
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    garbled = tmp_path / "s.yaml"
    garbled.write_text("items: [1, 2\n")
    bad = gpubot("diagnose", "--snapshot", str(garbled))
    assert bad.returncode == 2 and bad.stderr.startswith(f"error: {garbled}")


def test_nodes_only_alerts_name_are_shown_escaped_and_not_counted_in_how_wide(
    tmp_path: Path,
) -> None:
    """Issue 31 item 4 offline: a snapshot may lack a node, so a node only alerts name is still
    diagnosed (said to be absent, no command, no proposal), but its name is shown escaped and
    it is not counted in "How wide?": with six look-alikes of gpu-a1 and gpu-z9 beside the
    real gpu-a1, each absent one said "8 node(s) in the cluster show this"."""
    alerts = tmp_path / "alerts.json"
    alerts.write_text(json.dumps(payload()))
    done = gpubot(
        "diagnose",
        *("--snapshot", str(HEALTHY), "--alerts", str(alerts), "--now", NOW),
        *("--format", "markdown"),
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert not set(out) & set(HIDDEN), [c for c in out if c in HIDDEN]
    absent = [*LOOK_ALIKES.values(), ABSENT]
    # Only the real gpu-a1 is counted, in every absent node's answer.
    assert re.findall(r"(\d+) node\(s\) in the cluster show this", out) == ["1"] * len(absent)
    assert "1 of 4 nodes in pool a100-east show this" in out  # the real gpu-a1, as before
    for escaped in absent:
        assert f"— {escaped}\n" in out  # the diagnosis' subject
        assert f"no node {escaped} in the cluster" in out
    assert out.count("not counted (not in the cluster); 1 node(s) in the cluster show this") == len(
        absent
    )
