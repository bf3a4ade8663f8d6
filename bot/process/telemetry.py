"""gpubot's own Prometheus metrics (`/metrics` of `gpubot serve`), in one object shared by the
parts that drive them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Telemetry:
    """gpubot's own metrics, on one registry per process (tests build many). The webhook
    drives its requests; the inbox the signals; the service the incidents and diagnoses;
    the executor the actions. `gpubot serve` builds one and hands it to each."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.signals_received = Counter(
            "gpubot_signals_received_total",
            "Signals accepted and stored (or recognised as already stored), by source.",
            ["source"],
            registry=r,
        )
        self.signals_duplicate = Counter(
            "gpubot_signals_duplicate_total",
            "Signals received again (retries, repeat_interval, replicas): stored once.",
            ["source"],
            registry=r,
        )
        self.webhook_requests = Counter(
            "gpubot_webhook_requests_total",
            "Alertmanager webhook requests, by HTTP status answered.",
            ["code"],
            registry=r,
        )
        self.webhook_auth_failures = Counter(
            "gpubot_webhook_auth_failures_total",
            "Webhook requests with missing or wrong credentials (answered 401).",
            registry=r,
        )
        self.alerts_truncated = Counter(
            "gpubot_alerts_truncated_total",
            "Alerts Alertmanager left out of accepted payloads (truncatedAlerts), per delivery.",
            registry=r,
        )
        self.signal_handler_errors = Counter(
            "gpubot_signal_handler_errors_total",
            "Stored deliveries whose hand-over to the pipeline raised (the next split takes them).",
            registry=r,
        )
        self.deliveries_dropped = Counter(
            "gpubot_deliveries_dropped_total",
            "Stored webhook deliveries that could not be split into signals: the same count "
            "as gpubot_deliveries_quarantined_total (its name before deliveries were kept).",
            registry=r,
        )
        self.deliveries_quarantined = Counter(
            "gpubot_deliveries_quarantined_total",
            "Stored webhook deliveries that could not be split into signals: kept in the "
            "store, set aside (never split again, never in the way of others), logged.",
            registry=r,
        )
        self.webhook_duration = Histogram(
            "gpubot_webhook_duration_seconds",
            "Time to answer an Alertmanager webhook request, storing included.",
            registry=r,
        )
        self.incidents_open = Gauge(
            "gpubot_incidents_open", "Incidents not yet resolved.", registry=r
        )
        self.diagnoses_posted = Counter(
            "gpubot_diagnoses_posted_total", "Diagnoses handed to the chat.", registry=r
        )
        self.rule_errors = Counter(
            "gpubot_rule_errors_total",
            "Rules that could not be evaluated on a subject (CEL budget, type), by rule: "
            "counted once each time a rule starts failing on a subject. That rule gives no "
            "diagnosis there; every other rule and subject is diagnosed as usual.",
            ["rule"],
            registry=r,
        )
        self.leader = Gauge(
            "gpubot_leader",
            "1 on the replica that holds the leader Lease (runs actions, schedule, Slack "
            "delivery), 0 on the others; by the replica's identity in the Lease.",
            ["identity"],
            registry=r,
        )
        self.outbox_failures = Counter(
            "gpubot_outbox_failures_total",
            "Failed tries of the leader's outbox delivery, by chat (console, slack) and cause: "
            "store (a round the store did not answer; tried again 0.5 s after, doubling up to "
            "15 s), chat (a message the chat or the way to it refused as down; everything "
            "waits, 1 s doubling up to 60 s) or error (a bug, logged with its traceback). The "
            "log tells a store or chat outage once when it begins and once when it ends.",
            ["chat", "cause"],
            registry=r,
        )
        self.actions = Counter(
            "gpubot_actions_total",
            "Remediation actions, by action and outcome.",
            ["action", "outcome"],
            registry=r,
        )
