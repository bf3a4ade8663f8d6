"""Leader election on the simulator's Lease API, through the real kubernetes client."""

from __future__ import annotations

import threading
from typing import Any

from bot.kube.cluster import KubeCluster
from bot.replica.leader import LeaderElector, LeaseConfig
from gpusim.resources import BY_KIND

CONFIG = LeaseConfig(lease_duration_s=15, renew_deadline_s=10, retry_period_s=2)


class Ticks:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _holder(server: Any) -> str:
    lease = server.store.get(BY_KIND["Lease"], "gpubot", "gpubot-leader")
    return str(lease["spec"]["holderIdentity"])


def test_one_leader_until_it_stops_renewing_then_the_other_takes_over(sim_cluster: Any) -> None:
    server, cluster = sim_cluster
    clock_a, clock_b = Ticks(), Ticks()
    a = LeaderElector(cluster, "replica-a", CONFIG, monotonic=clock_a)
    b = LeaderElector(cluster, "replica-b", CONFIG, monotonic=clock_b)
    assert a.try_acquire_or_renew() and a.is_leader
    assert not b.try_acquire_or_renew() and not b.is_leader
    for _ in range(3):  # A renews; B keeps seeing a live lease
        clock_a.now += 2
        clock_b.now += 2
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()
    assert _holder(server) == "replica-a"

    # A is killed: no more renewals. B waits a whole lease duration from the last change.
    clock_b.now += 14
    assert not b.try_acquire_or_renew()
    clock_b.now += 2
    assert b.try_acquire_or_renew() and b.is_leader
    lease = server.store.get(BY_KIND["Lease"], "gpubot", "gpubot-leader")
    assert lease["spec"]["holderIdentity"] == "replica-b"
    assert lease["spec"]["leaseTransitions"] == 1
    # A, had it survived frozen, no longer believes it leads: its renew deadline passed.
    clock_a.now += 11
    assert not a.is_leader


def test_a_race_for_an_expired_lease_has_one_winner(sim_cluster: Any) -> None:
    server, cluster = sim_cluster
    old = LeaderElector(cluster, "dead", CONFIG, monotonic=Ticks())
    assert old.try_acquire_or_renew()
    racers = []
    for i in range(4):
        ticks = Ticks()
        elector = LeaderElector(KubeCluster.for_url(server.url), f"r{i}", CONFIG, monotonic=ticks)
        assert not elector.try_acquire_or_renew()  # observes the record
        ticks.now += 20  # ...which then never changes for a whole lease
        racers.append(elector)
    won: list[bool] = []
    barrier = threading.Barrier(len(racers))

    def race(elector: LeaderElector) -> None:
        barrier.wait()
        won.append(elector.try_acquire_or_renew())

    threads = [threading.Thread(target=race, args=(e,)) for e in racers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(won) == [False, False, False, True]
    assert _holder(server) in {"r0", "r1", "r2", "r3"}


def test_a_clean_shutdown_hands_over_at_once(sim_cluster: Any) -> None:
    _, cluster = sim_cluster
    changes: list[bool] = []
    a = LeaderElector(cluster, "replica-a", CONFIG, monotonic=Ticks(), on_change=changes.append)
    b = LeaderElector(cluster, "replica-b", CONFIG, monotonic=Ticks())
    assert a.try_acquire_or_renew()
    a.release()
    assert not a.is_leader and changes == [True, False]
    assert b.try_acquire_or_renew()


def test_a_leader_that_cannot_reach_the_api_stops_leading_by_its_deadline(
    sim_cluster: Any,
) -> None:
    server, _ = sim_cluster
    ticks = Ticks()
    cluster = KubeCluster.for_url(server.url)
    a = LeaderElector(cluster, "replica-a", CONFIG, monotonic=ticks)
    assert a.try_acquire_or_renew()
    server.stop()  # the API server goes away
    ticks.now += 5
    assert a.try_acquire_or_renew()  # still within its renew deadline
    ticks.now += 6
    assert not a.try_acquire_or_renew() and not a.is_leader
