"""The live loop over time, as the on-call reads it: one replica's serving passes and the
leader's follow-up on the simulated cluster, the chat recorded. What a drill shows over a
scripted hour, pinned here step by step (safety invariant 9): a refused drain is offered
again once its reason clears; a repaired node is told what still keeps it out, then offered
back; a message says what is true now, not what was true when it was posted."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from bot.config import BlastRadius, Remediation
from bot.model import Action, IncidentState
from gpusim.resources import BY_KIND
from tests.helpers.rigs import LIVE_POLICY, Live, make_live


def drained(live: Live, node: str) -> None:
    """Xid 79 on `node`: the drain proposed, two people approve, it runs."""
    live.run(live.fault("xid", node, code=79, gpu=3))
    drain = live.undecided(node, Action.DRAIN)
    assert live.service.approve(drain.id, "alice").status == "need-another"
    outcome = live.service.approve(drain.id, "bob")
    assert outcome.status == "succeeded", outcome.message
    assert live.cordoned(node)


def test_a_drain_the_blast_radius_refused_is_offered_again_with_new_buttons_when_it_fits(
    sim_cluster: Any, tmp_path: Path
) -> None:
    live = make_live(
        sim_cluster,
        tmp_path,
        remediation=Remediation(
            approvals=LIVE_POLICY, blast_radius=BlastRadius(max_nodes=1, max_share=0.5)
        ),
    )
    drained(live, "gpu-a1")
    live.run(live.fault("xid", "gpu-a3", code=79, gpu=6))
    refused = live.undecided("gpu-a3", Action.DRAIN)
    live.service.approve(refused.id, "alice")
    outcome = live.service.approve(refused.id, "bob")
    # Told where the approver acted, and in the thread; nothing failed, nothing cordoned.
    assert outcome.status == "refused"
    assert "offered again" in outcome.message
    assert not live.cordoned("gpu-a3")
    [incident] = live.store.incidents(node="gpu-a3")
    assert incident.state is IncidentState.AWAITING_APPROVAL
    assert any("offered again" in s.text for s in live.shown("thread", "gpu-a3"))

    # The pool is still full: nothing is offered, however often the leader looks.
    live.follow_up()
    assert live.shown("asked-again", "gpu-a3") == []

    live.uncordon_by_hand("gpu-a1")
    live.follow_up()
    [again] = live.shown("asked-again", "gpu-a3")
    assert again.offered == (Action.DRAIN,)
    assert "the pool has room now" in again.text
    new = live.undecided("gpu-a3", Action.DRAIN)
    assert new.id != refused.id  # new buttons: the refused request stays refused
    live.follow_up()
    assert len(live.shown("asked-again", "gpu-a3")) == 1  # offered once

    live.service.approve(new.id, "alice")
    assert live.service.approve(new.id, "bob").status == "succeeded"
    assert live.cordoned("gpu-a3")
    assert ("ml", "train-llm-1-worker-0") in live.server.store.evictions


def test_a_repaired_node_is_told_what_keeps_it_out_and_until_when_then_offered_back(
    sim_cluster: Any, tmp_path: Path
) -> None:
    live = make_live(sim_cluster, tmp_path)
    drained(live, "gpu-a2")
    [incident] = live.store.incidents(node="gpu-a2")
    # Rebooted: 8 of 8 GPUs again, the Xid alert resolved; Prometheus still holds the Xid
    # in the gate's window for a while.
    clear_by = live.clock() + timedelta(minutes=10)
    live.prometheus.errors = ["Xid 79 on GPU 3"]
    live.prometheus.clear_by = clear_by
    live.run(live.repair("xid", "gpu-a2"))
    assert live.cordoned("gpu-a2")  # repaired is not back: the gate and a person decide

    live.follow_up()
    [told] = [s for s in live.shown("thread", "gpu-a2") if "health gate still fails" in s.text]
    assert "no-new-gpu-errors: Xid 79 on GPU 3" in told.text
    assert f"out of the window by {clear_by:%H:%M:%S} UTC" in told.text
    assert live.requests("gpu-a2", Action.UNCORDON) == []
    live.follow_up()  # nothing changed: not said twice
    assert len([s for s in live.shown("thread", "gpu-a2") if "gate still fails" in s.text]) == 1

    # The window passes with no new error: the next follow-up (every 5 s) offers it back.
    live.prometheus.errors = []
    live.prometheus.clear_by = None
    live.follow_up()
    [offer] = [s for s in live.shown("revision", "gpu-a2") if Action.UNCORDON in s.offered]
    assert "put it back into service?" in offer.text
    uncordon = live.undecided("gpu-a2", Action.UNCORDON)
    assert live.service.approve(uncordon.id, "alice").status == "succeeded"
    assert not live.cordoned("gpu-a2")
    assert live.store.incident(incident.id).state is not IncidentState.FAILED


def test_a_drain_proposal_names_the_blocking_budget_and_drops_it_once_freed(
    sim_cluster: Any, tmp_path: Path
) -> None:
    live = make_live(sim_cluster, tmp_path)
    live.fault("pdb-block", "gpu-a1")
    live.run(live.fault("xid", "gpu-a1", code=79, gpu=2))
    [posted] = live.shown("diagnosis", "gpu-a1")
    assert posted.offered == (Action.DRAIN,)
    assert "PDB train-llm-0-pdb (disruptionsAllowed=0" in posted.text
    assert "PDB train-llm-0-pdb (disruptionsAllowed=0" in live.out.getvalue()  # the console

    live.repair("pdb-block", "gpu-a1")
    live.run()  # the budget freed within 30 s of the post: the message waits
    assert live.shown("revision", "gpu-a1") == []
    live.follow_up()
    assert live.shown("revision", "gpu-a1") == []
    # Once the pace allows, the leader's follow-up (every 5 s) revises it: no signal needed.
    live.clock.ahead = timedelta(seconds=31)
    live.follow_up()
    [revised] = live.shown("revision", "gpu-a1")
    assert "train-llm-0-pdb" not in revised.text.split("\n", 1)[1]
    assert revised.text.startswith("updated: no longer in the drain's way: pdb ml/")
    assert revised.offered == (Action.DRAIN,)  # the same request's buttons stay
    assert "updated: no longer in the drain's way: pdb ml/" in live.out.getvalue()
    [incident] = live.store.incidents(node="gpu-a1")
    assert any(e.text.startswith("updated: ") for e in live.store.timeline(incident.id))
    live.clock.ahead = timedelta(seconds=70)
    live.run()  # found again the same: not revised again
    assert len(live.shown("revision", "gpu-a1")) == 1


def test_a_pod_gone_is_no_longer_listed_as_in_the_drains_way_in_chinese_too(
    sim_cluster: Any, tmp_path: Path
) -> None:
    live = make_live(sim_cluster, tmp_path, lang="zh")
    live.fault("pdb-block", "gpu-a1")
    live.run(live.fault("xid", "gpu-a1", code=79, gpu=2))
    [posted] = live.shown("diagnosis", "gpu-a1")
    [pod] = [line for line in posted.text.splitlines() if "ml/" in line and "disruptions" in line]
    name = pod.split("ml/", 1)[1].split(":", 1)[0]
    live.server.store.delete(BY_KIND["Pod"], "ml", name)
    live.clock.ahead = timedelta(seconds=31)
    live.run()
    [revised] = live.shown("revision", "gpu-a1")
    assert revised.text.startswith(f"已更新：不再阻塞排空：pdb ml/{name} ")
    assert f"ml/{name}" not in revised.text.split("\n", 1)[1]
