"""Two replicas with console chat (issue 19 item 6): every message of the bot appears, in
order, in ONE place, the leader's output, as Slack's do (through the store's outbox, sent by
the leader only). Before, an incident's diagnosis printed in whichever replica ran the pass.
"""

from __future__ import annotations

import re
from pathlib import Path

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
