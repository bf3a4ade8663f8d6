"""`gpubot serve`: the composition of the real parts into one running replica.

Starts, in order: the Kubernetes client, the rules and the permission check (what a person
may have got wrong, before anything is created), the store (schema checked), the chat, the
executor and the service, the leader election (whose callback starts and stops the
scheduler), the Kubernetes watches, and last the HTTP server — so nothing is accepted before
it can be stored and acted on. Stops in the reverse order; SIGKILL at any point is what
the store's records and `Executor.resume` are for.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import uvicorn
from rich.console import Console

from bot.acting.wing import DecisionWing
from bot.chat.queued import ConsoleDelivery, QueuedConsoleChat
from bot.chat.slack import SlackInteractions, SlackOutgoing, SocketModeRunner, build_slack_outgoing
from bot.clock import utcnow
from bot.config import Settings
from bot.errors import InputError, TemporaryError
from bot.facts.gpu_metrics import GpuEvidence, gather_gpu_evidence
from bot.facts.metric_lines import error_lines, lines
from bot.gate.items import ExternalEvidence
from bot.incidents.digest import next_run
from bot.kube.cluster import KubeCluster
from bot.kube.permissions import check_permissions
from bot.model import (
    ActionRequest,
    Diagnosis,
    Incident,
    Lang,
    Signal,
    TimelineEntry,
    TimelineKind,
)
from bot.pipeline.recorder import EvidenceLines
from bot.pipeline.service import Service
from bot.ports import Chat
from bot.process.health import Probe
from bot.process.telemetry import Telemetry
from bot.prom.client import PrometheusMetrics
from bot.replica.http import build_app, server_config
from bot.replica.leader import LeaderElector, LeaseConfig
from bot.replica.schedule import Scheduler
from bot.roots.offline import load_ruleset
from bot.sources.alertmanager.endpoint import WebSettings
from bot.sources.alertmanager.inbox import Inbox
from bot.sources.alertmanager.understanding import alert_mapping
from bot.sources.watches import KubeSignals
from bot.store.database import parse_store_url
from bot.store.sql import SqlStore
from bot.texts import say

log = logging.getLogger("gpubot.serve")

_TOLD_IN_THE_LOG = frozenset({"action-start", "action-result", "approval", "denial", "gate"})
"""Timeline entries the log carries at info, beside the chat: what was done to a node and
by whose decision, for whoever reads the pod's log after the fact."""


def default_identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass
class SlackParts:
    """Slack, when configured: messages out through the outbox (delivered by the leader
    only: the outbox has no claim, two senders would post twice), clicks and `/gpubot` in
    over HTTP or Socket Mode on every replica."""

    outgoing: SlackOutgoing
    interactions: SlackInteractions
    socket: SocketModeRunner | None

    def leading(self, leads: bool) -> None:
        if leads:
            self.outgoing.delivery.start()
        else:
            self.outgoing.delivery.stop()

    def stop(self) -> None:
        if self.socket is not None:
            self.socket.stop()
        self.outgoing.delivery.stop()
        self.interactions.close()


@dataclass
class Replica:
    """One running `gpubot serve`, with handles for tests and shutdown."""

    settings: Settings
    store: SqlStore
    cluster: KubeCluster
    service: Service
    elector: LeaderElector
    scheduler: Scheduler
    watcher: KubeSignals | None
    server: uvicorn.Server
    slack: SlackParts | None = None
    console: ConsoleDelivery | None = None
    """The console chat's printer (without Slack, unless a chat was given): the leader's."""
    _stopped: threading.Event = field(default_factory=threading.Event)

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        # First of all, nothing more is written to the cluster: the executions running here
        # are handed over, so the next leader drives them at once rather than after this
        # process is killed at the end of its grace period.
        self.service.wing.executor.stop()
        self.server.should_exit = True
        if self.watcher is not None:
            self.watcher.stop()
        self.elector.stop()
        self.scheduler.stop()
        if self.slack is not None:
            self.slack.stop()
        if self.console is not None:
            self.console.stop()
        self.service.stop()
        self.cluster.close()
        self.store.close()


@dataclass(frozen=True)
class _Evidence:
    """What Prometheus tells about a node, three ways: lines for a diagnosis, errors for the
    health gate, and the whole reading (an alert's Xid code only Prometheus knows)."""

    lines: EvidenceLines | None
    external: Callable[[str], ExternalEvidence]
    gather: Callable[[str], GpuEvidence] | None


def _evidence(settings: Settings) -> _Evidence:
    prometheus = settings.prometheus
    if not prometheus.url:
        return _Evidence(None, lambda _node: ExternalEvidence(), None)
    metrics = PrometheusMetrics(prometheus.url)

    def gather(node: str) -> GpuEvidence:
        return gather_gpu_evidence(
            metrics,
            node,
            prometheus.window_s,
            node_label=prometheus.node_label,
            timeout_s=prometheus.timeout_s,
        )

    def evidence_lines(node: str) -> list[str]:
        return lines(gather(node), settings.lang)

    def external(node: str) -> ExternalEvidence:
        found = gather(node)
        errors = error_lines(found, settings.lang)
        if errors is None:
            return ExternalEvidence()
        clear_by = found.at + timedelta(seconds=found.window_s) if errors else None
        return ExternalEvidence(new_gpu_errors=errors, errors_clear_by=clear_by)

    return _Evidence(evidence_lines, external, gather)


def build_replica(
    settings: Settings,
    *,
    kube_url: str | None = None,
    kubeconfig: Path | None = None,
    in_cluster: bool = False,
    chat: Chat | None = None,
    watch: bool = True,
) -> Replica:
    token = settings.serve.token()
    if token is None:
        raise InputError(
            "serve.bearer_token",
            "set GPUBOT_SERVE__BEARER_TOKEN or serve.bearer_token_file: the webhook never "
            "runs without credentials",
        )
    _check_slack(settings)
    mapping = alert_mapping(settings)  # a broken alerts_file is a start-up error
    if settings.schedule.digest_at is not None:
        # A bad time or zone is a start-up error, not a digest that never comes.
        next_run(utcnow(), settings.schedule.digest_at, settings.schedule.digest_tz)
    # Every setting a person may have got wrong is checked before the store is opened: a
    # start that fails leaves no new database behind.
    parse_store_url(settings.store_url)
    timeout_s = settings.serve.kube_timeout_s
    if kube_url:
        cluster = KubeCluster.for_url(kube_url, timeout_s)
    elif in_cluster:
        cluster = KubeCluster.in_cluster(timeout_s)
    else:
        cluster = KubeCluster.from_kubeconfig(kubeconfig, request_timeout_s=timeout_s)
    rules = load_ruleset(settings)
    try:
        check_permissions(cluster, settings)
    except TemporaryError as exc:
        # A refusal stops the start (no retry storm); an API server away for a moment does
        # not: /readyz says so until it answers, and every write is checked by the API then.
        log.warning(
            "could not check gpubot's permissions at start (%s): serving the webhook anyway; "
            "/readyz says when the Kubernetes API answers",
            exc,
        )
    store = SqlStore.open(settings.store_url)
    identity = settings.serve.identity or default_identity()
    evidence = _evidence(settings)
    telemetry = Telemetry()
    outgoing = _slack_outgoing(settings, store, telemetry)
    wing = DecisionWing.build(
        cluster,
        store,
        settings,
        executor_id=identity,
        clock=utcnow,
        external=evidence.external,
        # Without Slack there are no user groups: policies name people.
        groups_of=outgoing.groups if outgoing else lambda _user: set(),
    )
    s = settings.serve
    lease = LeaseConfig.from_settings(s)
    holder: list[LeaderElector] = []
    printer: ConsoleDelivery | None = None
    if chat is None and outgoing is not None:
        chat = outgoing.chat
    elif chat is None:
        # Console chat: queued in the store and printed by the leader only, so that with
        # two replicas every message of an incident appears, in order, in one output.
        printer = ConsoleDelivery(store, lambda: sys.stdout, clock=utcnow, metrics=telemetry)
        chat = QueuedConsoleChat(
            store, Console(), settings.lang, clock=utcnow, on_queued=printer.wake
        )
    told = LoggedChat(chat)
    service = Service(
        settings=settings,
        rules=rules,
        store=store,
        cluster=cluster,
        chat=told,
        wing=wing,
        clock=utcnow,
        is_leader=lambda: bool(holder) and holder[0].is_leader,
        evidence=evidence.lines,
        gpu_evidence=evidence.gather,
        inbox=Inbox(
            store,
            settings.node_labels,
            telemetry,
            on_quarantine=quarantine_notice(told, settings.lang),
            mapping=mapping,
        ),
        telemetry=telemetry,
    )

    def on_timeline(entry: TimelineEntry) -> None:
        if entry.kind in _TOLD_IN_THE_LOG:
            log.info("incident %s: %s: %s", entry.incident, entry.actor, entry.text)
        service.on_timeline(entry)

    def on_request(request: ActionRequest, kind: TimelineKind, text: str) -> None:
        if kind in _TOLD_IN_THE_LOG:
            log.info("request %s: %s", request.id, text)
        service.on_request(request, kind, text)

    wing.timeline.notify = on_timeline  # drain progress into the incident's thread
    wing.timeline.on_request = on_request  # or under an ad-hoc request's proposal
    scheduler = Scheduler(service, store.engine, settings.schedule)
    slack = _slack_parts(settings, outgoing, service) if outgoing else None

    telemetry.leader.labels(identity).set(0)

    def on_change(leads: bool) -> None:
        telemetry.leader.labels(identity).set(1 if leads else 0)
        if leads:
            log.info("replica %s leads: it runs actions and scheduled work", identity)
        else:
            log.info("replica %s no longer leads", identity)
        scheduler.leading(leads)
        if slack is not None:
            slack.leading(leads)
        if printer is not None:
            if leads:
                printer.start()
            else:
                printer.stop()

    elector = LeaderElector(cluster, identity, lease, on_change=on_change)
    holder.append(elector)

    def from_kube(signal: Signal) -> None:
        if store.add_signals([signal], utcnow()) == [True]:
            service.on_signals([signal])

    watcher = (
        KubeSignals(
            cluster,
            from_kube,
            operator_namespaces=tuple(settings.operator_namespaces),
            gpu_resource=settings.gpu_resource,
        )
        if watch
        else None
    )
    web = build_app(
        store,
        WebSettings.from_settings(settings, bearer_token=token),
        service.on_delivery,
        metrics=telemetry,
        extra_routes=(
            slack.interactions.routes(body_timeout_s=s.body_timeout_s)
            if slack is not None and slack.socket is None
            else ()
        ),
        probes=[
            Probe(
                "kubernetes api",
                lambda: cluster.unreachable(min(2.0, s.kube_timeout_s)),
                ttl_s=s.kube_probe_ttl_s,
            )
        ],
    )
    config = server_config(
        web,
        s.host,
        s.port,
        header_timeout_s=s.header_timeout_s,
        keep_alive_s=s.keep_alive_s,
    )
    return Replica(
        settings,
        store,
        cluster,
        service,
        elector,
        scheduler,
        watcher,
        uvicorn.Server(config),
        slack,
        printer,
    )


@dataclass
class LoggedChat:
    """A chat that also tells the process's log, at info, what it was handed to post: who
    reads the pod's log sees that a diagnosis went out (and its proposals) beside the
    actions, whatever the chat is."""

    chat: Chat

    def post_diagnosis(
        self,
        incident: Incident,
        diagnosis: Diagnosis,
        requests: Sequence[ActionRequest],
        under: Incident | None = None,
    ) -> str | None:
        log.info(
            "incident %s: diagnosis %s on %s posted%s",
            incident.id,
            diagnosis.rule,
            diagnosis.node or diagnosis.pool or "the cluster",
            "".join(f"; request {r.id} ({r.action.value} {r.node})" for r in requests),
        )
        return self.chat.post_diagnosis(incident, diagnosis, requests, under)

    def post_thread(self, incident: Incident, text: str) -> None:
        self.chat.post_thread(incident, text)

    def ask_again(
        self, incident: Incident | None, old: ActionRequest, new: ActionRequest, why: str
    ) -> None:
        log.info("request %s asked again as %s: %s", old.id, new.id, why)
        self.chat.ask_again(incident, old, new, why)

    def revise_diagnosis(
        self,
        incident: Incident,
        diagnosis: Diagnosis,
        requests: Sequence[ActionRequest],
        note: str,
    ) -> None:
        log.info(
            "incident %s: diagnosis revised to %s%s",
            incident.id,
            diagnosis.rule,
            "".join(f"; request {r.id} ({r.action.value} {r.node})" for r in requests),
        )
        self.chat.revise_diagnosis(incident, diagnosis, requests, note)

    def withdraw(self, incident: Incident, request: ActionRequest, why: str) -> None:
        self.chat.withdraw(incident, request, why)

    def post_notice(self, text: str, monospace: bool = False) -> None:
        self.chat.post_notice(text, monospace)

    def post_result(self, request: ActionRequest, text: str) -> None:
        log.info("request %s (%s %s): %s", request.id, request.action.value, request.node, text)
        self.chat.post_result(request, text)


def quarantine_notice(chat: Chat, lang: Lang) -> Callable[[int, str], None]:
    """What the inbox calls when it sets a webhook delivery aside: a notice in the chat, so
    a person looks at what was accepted and never diagnosed."""

    def notice(delivery_id: int, why: str) -> None:
        chat.post_notice(say(lang, "serve.quarantined", id=delivery_id, why=why[:300]))

    return notice


def _check_slack(settings: Settings) -> None:
    """Before anything is opened: a half-configured Slack is a start-up error, not a bot
    that silently posts nowhere."""
    slack = settings.slack
    if slack.bot_token is None:
        return
    if not slack.channel:
        raise InputError("slack.channel", "required: the channel id diagnoses go to")
    if slack.mode == "socket" and slack.app_token is None:
        raise InputError("slack.app_token", "required in socket mode (an xapp- token)")
    if slack.mode == "http" and slack.signing_secret is None:
        raise InputError("slack.signing_secret", "required in http mode")


def _slack_outgoing(
    settings: Settings, store: SqlStore, metrics: Telemetry
) -> SlackOutgoing | None:
    if settings.slack.bot_token is None:
        return None
    return build_slack_outgoing(
        settings.slack,
        store,
        settings.remediation.approvals,
        settings.lang,
        clock=utcnow,
        metrics=metrics,
    )


def _slack_parts(settings: Settings, outgoing: SlackOutgoing, service: Service) -> SlackParts:
    slack = settings.slack
    socket = None
    interactions = SlackInteractions(
        service, outgoing.chat, slack, client=outgoing.client, lang=settings.lang, clock=utcnow
    )
    if slack.mode == "socket" and slack.app_token is not None:
        socket = SocketModeRunner(interactions, slack.app_token.get_secret_value())
    return SlackParts(outgoing, interactions, socket)


def run(replica: Replica, on_started: Callable[[int], None] | None = None) -> None:
    """Starts everything and serves until the server is told to exit (SIGINT/SIGTERM)."""
    # Everything built so far (rules, clients, the schema) lives as long as the process: out
    # of the collector's reach, a full collection scans only what serving allocates. Without
    # it, one took 100-190 ms in the middle of a webhook (benchmarks/ingest.py).
    gc.collect()
    gc.freeze()
    replica.service.start()
    if replica.slack is not None and replica.slack.socket is not None:
        replica.slack.socket.start()
    replica.elector.start()
    if replica.watcher is not None:
        replica.watcher.start()
    server = replica.server

    def announce() -> None:
        while not server.started and not server.should_exit:
            threading.Event().wait(0.05)
        if server.started and on_started is not None:
            port = server.servers[0].sockets[0].getsockname()[1]
            on_started(port)

    threading.Thread(target=announce, name="announce", daemon=True).start()
    if threading.current_thread() is threading.main_thread():
        # uvicorn shuts down on SIGTERM, then raises it again under the handler it found: with
        # the default one the process died there, before `replica.stop()` released the Lease
        # (the next replica waited out lease_duration_s to act or print) and closed the store.
        signal.signal(signal.SIGTERM, lambda _signal, _frame: setattr(server, "should_exit", True))
    try:
        server.run()
    finally:
        replica.stop()
