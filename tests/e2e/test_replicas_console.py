"""Two replicas with console chat (issue 19 item 6): every message of the bot appears, in
order, in ONE place, the leader's output, as Slack's do (through the store's outbox, sent by
the leader only). Before, an incident's diagnosis printed in whichever replica ran the pass.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import yaml

from bot.store.sql import SqlStore
from gpusim.state import ClusterState
from tests.e2e.test_replicas import lease_holder, postgres_url  # noqa: F401 (a fixture)
from tests.helpers.processes import (
    NODE,
    cluster,
    post_alert,
    running_gpubot,
    simulator,
    the_request,
    wait_for,
    write_settings,
    xid_alert,
)


def _said(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_console_chat_of_two_replicas_prints_only_in_the_leaders_output(
    postgres_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    sim_store: ClusterState = cluster()
    with (
        simulator(sim_store) as server,
        running_gpubot(tmp_path, server.url, postgres_url) as bot,
    ):
        store = SqlStore.open(postgres_url)
        try:
            replicas = [bot.serve("replica-a"), bot.serve("replica-b")]
            for replica in replicas:
                replica.wait_listening()
            holder = wait_for("a leader", lambda: lease_holder(sim_store), 15, bot)
            [leader] = [r for r in replicas if r.identity == holder]
            [follower] = [r for r in replicas if r is not leader]

            # The follower takes the webhook and runs the pass: it must not print.
            status, body = post_alert(follower, xid_alert(sim_store, NODE))
            assert status == 200, body
            drain = wait_for("the drain request", lambda: the_request(store, NODE), 30, bot)
            incident = drain.incident
            assert incident

            def printed() -> bool:
                out = _said(leader.out.read_text(errors="replace"))
                return f"incident {incident}" in out and drain.id in out

            wait_for("the diagnosis in the leader's output", printed, 15, bot)
            leader_out = _said(leader.out.read_text(errors="replace"))
            follower_out = _said(follower.out.read_text(errors="replace"))
            assert "gpu-fell-off-bus" in leader_out
            assert "$ kubectl" in leader_out  # the runbook, commands whole
            assert f"incident {incident}" not in follower_out, follower_out
            assert "gpu-fell-off-bus" not in follower_out, follower_out
            assert drain.id not in follower_out, follower_out
            # In order: the diagnosis's heading before its request.
            assert leader_out.index(f"incident {incident}") < leader_out.index(drain.id)
        finally:
            store.close()


def test_a_single_replica_with_console_chat_prints_its_diagnosis_at_once(tmp_path: Path) -> None:
    """One `gpubot serve` on SQLite, no Lease in the cluster yet: it leads at once, so the
    console chat's queue is printed as it fills, not held for a leader."""
    sim_store: ClusterState = cluster()
    store_url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    with simulator(sim_store) as server, running_gpubot(tmp_path, server.url, store_url) as bot:
        assert lease_holder(sim_store) is None
        replica = bot.start("lone")
        status, body = post_alert(replica, xid_alert(sim_store, NODE))
        assert status == 200, body
        answered = time.monotonic()

        def printed() -> bool:
            return "gpu-fell-off-bus" in _said(replica.out.read_text(errors="replace"))

        wait_for("the diagnosis in the replica's output", printed, 15, bot)
        assert time.monotonic() - answered < 3.0, replica.tail()
        assert lease_holder(sim_store) == "lone"


def test_a_replica_stopped_with_sigterm_hands_the_lease_on_so_the_next_prints_at_once(
    tmp_path: Path,
) -> None:
    """A rollout stops the pod with SIGTERM and starts another. uvicorn re-raised the signal
    once it had shut down, and the process died there, before it released the Lease: the new
    replica printed nothing (and ran nothing) until the old lease expired, 16 s here."""
    sim_store: ClusterState = cluster()
    store_url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    config = write_settings(tmp_path / "settings.yaml")
    lease = {"lease_duration_s": 15, "renew_deadline_s": 10, "retry_period_s": 2}  # the defaults
    settings = yaml.safe_load(config.read_text())
    settings["serve"].update(lease)
    config.write_text(yaml.safe_dump(settings))
    with (
        simulator(sim_store) as server,
        running_gpubot(tmp_path, server.url, store_url, config) as bot,
    ):
        old = bot.start("old")
        wait_for("the first replica to lead", lambda: lease_holder(sim_store) == "old", 15, bot)
        old.process.terminate()
        assert old.process.wait(30) == 0, old.tail()
        assert lease_holder(sim_store) is None  # released

        new = bot.start("new")
        status, body = post_alert(new, xid_alert(sim_store, NODE))
        assert status == 200, body
        answered = time.monotonic()

        def printed() -> bool:
            return "gpu-fell-off-bus" in _said(new.out.read_text(errors="replace"))

        wait_for("the diagnosis in the new replica's output", printed, 30, bot)
        assert time.monotonic() - answered < 3.0, new.tail()
