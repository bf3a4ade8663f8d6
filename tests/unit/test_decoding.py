"""A snapshot file decoded trimmed to what the facts read gives the very facts the whole
objects give: for every rule test's cluster (the shipped snapshots with each test's edits:
crash loops, PDBs, finalizers, evictions, events, pending pods) and the seeded fleet. A part
the facts start reading that `bot.facts.decoding` does not declare fails here."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings
from bot.facts.collecting import collect_facts, resolve_signal_nodes
from bot.facts.decoding import decode_trimmed, read_trimmed
from bot.facts.snapshots import Snapshot, parse_snapshot, read_objects_file
from bot.model import ClusterFacts, Signal
from bot.roots.offline import build_case, rule_test_files
from bot.rules.testing import load_test_file
from gpusim.scenarios import FIXTURE_NOW, fleet_cluster
from tests.helpers.paths import RULES

SETTINGS = Settings()


def _facts(snapshot: Snapshot, signals: list[Signal], now: Any) -> ClusterFacts:
    return collect_facts(snapshot, resolve_signal_nodes(snapshot, signals), SETTINGS, now)


def _both_ways(raw: dict[str, Any], tmp_path: Path) -> tuple[Snapshot, Snapshot]:
    file = tmp_path / "snapshot.json"
    file.write_text(json.dumps(raw))
    whole = Snapshot.from_items(read_objects_file(file))
    trimmed = Snapshot.from_items(read_objects_file(file, for_facts=True))
    return whole, trimmed


def _cases() -> list[tuple[str, Path, int]]:
    found = []
    for file in rule_test_files(RULES):
        parsed, _ = load_test_file(file)
        found += [
            (f"{file.parent.name}/{file.name}:{t.name}", file, i)
            for i, t in enumerate(parsed.tests)
        ]
    return found


@pytest.mark.parametrize(
    ("case", "file", "index"), _cases(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_rule_tests_cluster_has_the_same_facts_trimmed(
    case: str, file: Path, index: int, tmp_path: Path
) -> None:
    test = load_test_file(file)[0].tests[index]
    snapshot, signals = build_case(test, file.parent, SETTINGS)
    raw = {
        "kind": "List",
        "items": [
            *snapshot.nodes,
            *snapshot.pods,
            *snapshot.events,
            *snapshot.pdbs,
            *snapshot.daemonsets,
        ],
    }
    whole, trimmed = _both_ways(raw, tmp_path)
    assert trimmed.pods == [] or trimmed.pods != whole.pods, "nothing was trimmed"
    assert _facts(trimmed, signals, test.now) == _facts(whole, signals, test.now)


def _by_pod(pod: dict[str, Any], address: str | None, ref: str = "") -> Signal:
    """An exporter's alert naming its pod (or one the snapshot lacks), and maybe its address."""
    ref = ref or f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
    return Signal(
        source="alertmanager",
        name="GPUXidError",
        node=address,
        labels={"xid": "79"},
        annotations={"gpubot.pods": ref},
        fingerprint=ref + str(address),
    )


def test_the_fleet_snapshot_has_the_same_facts_trimmed(tmp_path: Path) -> None:
    cluster, _ = fleet_cluster(40)
    pods = [i for i in cluster["items"] if i["kind"] == "Pod"][::97]
    signals = [_by_pod(p, None) for p in pods]
    signals += [_by_pod(p, p["status"]["podIP"], "monitoring/gone") for p in pods]
    whole, trimmed = _both_ways(cluster, tmp_path)
    resolved = resolve_signal_nodes(trimmed, signals)
    assert all(s.node and s.node.startswith(("gpu-", "cpu-")) for s in resolved)
    assert resolved == resolve_signal_nodes(whole, signals)
    facts = _facts(trimmed, signals, FIXTURE_NOW)
    assert facts.nodes and any(n.blockers for n in facts.nodes.values())
    assert facts == _facts(whole, signals, FIXTURE_NOW)


def test_a_shape_the_trimmed_decoder_refuses_is_read_the_generic_way(tmp_path: Path) -> None:
    cluster, _ = fleet_cluster(2)
    pod = next(i for i in cluster["items"] if i["kind"] == "Pod")
    pod["metadata"]["ownerReferences"] = "not a list"
    assert decode_trimmed(json.dumps(cluster).encode()) is None
    whole, read = _both_ways(cluster, tmp_path)
    assert read.pods == whole.pods
    assert _facts(read, [], FIXTURE_NOW) == _facts(parse_snapshot(cluster), [], FIXTURE_NOW)


def test_a_mapped_file_given_back_page_by_page_is_decoded_whole(tmp_path: Path) -> None:
    cluster, _ = fleet_cluster(40)
    file = tmp_path / "fleet.json"
    file.write_text(json.dumps(cluster, indent=2))
    # Pages returned to the kernel after every item: what is read again comes back intact.
    mapped = read_trimmed(file, give_back_every=1)
    assert mapped is not None and len(mapped["items"]) == len(cluster["items"])
    assert mapped == decode_trimmed(file.read_bytes())
    whole = parse_snapshot(cluster)
    assert _facts(Snapshot.from_items(mapped["items"]), [], FIXTURE_NOW) == _facts(
        whole, [], FIXTURE_NOW
    )


def test_trimmed_parts_read_as_the_dicts_they_stand_for(tmp_path: Path) -> None:
    pod = {
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml", "uid": "not declared"},
        "status": {"phase": "Running", "containerStatuses": [{"name": "c", "lastState": {}}]},
    }
    read = decode_trimmed(json.dumps(pod).encode())
    assert read is not None
    meta, status = read["metadata"], read["status"]
    assert isinstance(meta, Mapping) and dict(meta) == {"name": "p", "namespace": "ml"}
    assert (meta.get("name"), meta.get("uid"), meta.get("labels", {})) == ("p", None, {})
    assert "name" in meta and "labels" not in meta and "get" not in meta
    assert status.get("items") is None  # a method's name is not a field
    with pytest.raises(KeyError):
        meta["labels"]
    last = status["containerStatuses"][0]["lastState"]
    assert not last and len(last) == 0 and list(last) == [] and (last or {}).get("x") is None
    assert bool(status) and len(status) == 2


def test_a_pipe_is_read_the_generic_way(tmp_path: Path) -> None:
    cluster, _ = fleet_cluster(2)
    fifo = tmp_path / "snapshot"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text, args=(json.dumps(cluster),))
    writer.start()
    assert read_trimmed(fifo) is None  # not opened: the writer still waits for its reader
    objects = read_objects_file(fifo, for_facts=True)
    writer.join(timeout=10)
    assert [o["metadata"]["name"] for o in objects] == [
        o["metadata"]["name"] for o in cluster["items"]
    ]


def test_an_alert_naming_a_pods_second_ip_finds_its_node_trimmed_too(tmp_path: Path) -> None:
    # Real pods list their addresses in status.podIPs (dual stack: IPv4 then IPv6).
    cluster, _ = fleet_cluster(4)
    pods = [i for i in cluster["items"] if i["kind"] == "Pod"]
    for n, pod in enumerate(pods):
        pod["status"]["podIPs"] = [{"ip": pod["status"]["podIP"]}, {"ip": f"fd00::{n:x}"}]
    pod = pods[-1]
    signal = _by_pod(pod, f"fd00::{len(pods) - 1:x}", "monitoring/gone")
    whole, trimmed = _both_ways(cluster, tmp_path)
    [resolved] = resolve_signal_nodes(trimmed, [signal])
    assert resolved.node == pod["spec"]["nodeName"]
    assert [resolved] == resolve_signal_nodes(whole, [signal])
