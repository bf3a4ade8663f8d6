"""`gpubot approve` tells how the action ended, not only that the vote was stored (issue
"The live loop", finding 3: a drain refused by the blast radius had printed "approved", rc 0,
and only the console knew). Real processes: `gpubot serve` leads, the CLI votes and waits."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from bot.store.sql import SqlStore
from gpusim import faults
from gpusim.resources import BY_KIND
from tests.helpers.processes import (
    NODE,
    cluster,
    post_alert,
    running_gpubot,
    simulator,
    the_request,
    wait_for,
    xid_alert,
)


def test_a_refused_drain_is_exit_1_with_the_reason_and_the_node_untouched(tmp_path: Path) -> None:
    sim_store = cluster()
    # Another node of the pool is out already: the budget (one node at a time) is spent.
    faults.cordon(sim_store, "gpu-a3", datetime.now(UTC))
    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    with simulator(sim_store) as server, running_gpubot(tmp_path, server.url, url) as bot:
        store = SqlStore.open(url)
        try:
            served = bot.start("gpubot-0")
            status, _ = post_alert(served, xid_alert(sim_store, NODE))
            assert status == 200
            drain = wait_for("the drain request", lambda: the_request(store, NODE), 30, bot)

            done = bot.cli("approve", drain.id, "--as", "alice", "--wait", "30")

            assert done.returncode == 1, (done.stdout, done.stderr, bot.logs())
            assert "approved by alice" in done.stdout
            assert done.stderr.startswith("refused: not run: blast radius"), done.stderr
            assert "offered again" in done.stderr
            node = sim_store.get(BY_KIND["Node"], "", NODE)
            assert not node["spec"].get("unschedulable")
        finally:
            store.close()


def test_an_approval_that_acts_is_exit_0_with_what_it_did(tmp_path: Path) -> None:
    sim_store = cluster()
    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    with simulator(sim_store) as server, running_gpubot(tmp_path, server.url, url) as bot:
        store = SqlStore.open(url)
        try:
            served = bot.start("gpubot-0")
            post_alert(served, xid_alert(sim_store, NODE))
            drain = wait_for("the drain request", lambda: the_request(store, NODE), 30, bot)

            done = bot.cli("approve", drain.id, "--as", "alice", "--wait", "50")

            assert done.returncode == 0, (done.stdout, done.stderr, bot.logs())
            assert "succeeded: drained " + NODE in done.stdout
            assert sim_store.get(BY_KIND["Node"], "", NODE)["spec"]["unschedulable"] is True
        finally:
            store.close()
