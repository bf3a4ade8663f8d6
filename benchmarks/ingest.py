"""Ingest: alerts per second `gpubot serve` accepts and stores, next to alerts per second the
real Alertmanager accepts on `POST /api/v2/alerts`, in one run on this machine; then the
latency from a webhook arriving to its diagnosis being handed to the chat port.

    python benchmarks/ingest.py [--alerts 20000] [--batch 100] [--senders 4] [--rounds 3]
                                [--nodes 60]

Throughput. Both servers run as their own processes on 127.0.0.1: `gpubot serve` (SQLite in
a temp dir, the simulator as its cluster, no watches) and Debian's `prometheus-alertmanager`
(gossip off). The same `--alerts` distinct firing GPU alerts go to each, `--batch` per
request as Alertmanager sends a webhook, from `--senders` threads with keep-alive
connections. gpubot answers 200 once a batch is stored as received (one row in its inbox);
its worker splits the batches into signals and diagnoses them behind the 200, on the same
two cores. Alertmanager answers after taking the alerts into memory. The figure is alerts /
wall-clock seconds until the last answer; for gpubot also until the last alert was split
into a signal (from /metrics). The servers take turns for `--rounds` rounds; medians. Each
server first gets one untimed batch (a warm-up: see `throughput`).

The simulator (`gpubot sim serve`) runs in a process of its own, as an API server would.

Latency. One replica in this process with a chat adapter that notes the moment
`post_diagnosis` is called (the real console adapter renders the message into memory). The
simulator has `--nodes` GPU nodes; on each in turn a GPU falls off the bus (Xid 79) and the
webhook Alertmanager would send is posted: the time runs from just before the POST to the
hand-over of that node's diagnosis. One at a time, 0.3 s apart so each pass has ended
before the next webhook: latency, not queueing (the throughput run above is the burst).

Needs Debian's prometheus-alertmanager. Prints Markdown tables and the machine.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from bot.chat.console import ConsoleChat
from bot.config import Settings
from bot.model import ActionRequest, Diagnosis, Incident, Lang
from bot.roots import serve as runtime
from gpusim.launching import inject_remote
from tests.helpers.servers import alertmanager_server

TOKEN = "bench-token"
SETTLE_S = 0.3
ALERTMANAGER_CONFIG = """
route:
  receiver: blackhole
receivers:
  - name: blackhole
"""


def gpu_alerts(count: int, nodes: int) -> list[dict[str, Any]]:
    """Distinct firing alerts, as Prometheus would produce from the shipped rules."""
    start = datetime.now(UTC).replace(microsecond=0)
    return [
        {
            "labels": {
                "alertname": "GPUTemperatureHigh",
                "severity": "warning",
                "node": f"gpu-a{i % nodes + 1}",
                "gpu": str(i % 8),
                "instance": f"10.0.{i // 250}.{i % 250}:9400",
            },
            "annotations": {"summary": "GPU temperature above 85 °C for 5 min"},
            "startsAt": (start - timedelta(seconds=i)).isoformat().replace("+00:00", "Z"),
            "generatorURL": "http://prometheus:9090/graph",
        }
        for i in range(count)
    ]


def webhook(alerts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "version": "4",
        "groupKey": '{}:{alertname="GPUTemperatureHigh"}',
        "truncatedAlerts": 0,
        "receiver": "gpubot",
        "status": "firing",
        "alerts": [
            {
                **a,
                "status": "firing",
                "endsAt": "0001-01-01T00:00:00Z",
                "fingerprint": f"{n:016x}",
            }
            for n, a in alerts
        ],
        "groupLabels": {"alertname": "GPUTemperatureHigh"},
        "commonLabels": {"alertname": "GPUTemperatureHigh"},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
    }


def send_all(
    url: str, bodies: list[bytes], senders: int, headers: dict[str, str]
) -> tuple[float, list[int]]:
    """POST every body, `senders` at a time on keep-alive connections; (seconds, statuses)."""
    statuses: list[int] = []
    lock = threading.Lock()
    next_body = iter(bodies)

    def sender() -> None:
        with httpx.Client(timeout=60, headers=headers) as client:
            while True:
                with lock:
                    body = next(next_body, None)
                if body is None:
                    return
                answer = client.post(url, content=body)
                with lock:
                    statuses.append(answer.status_code)

    threads = [threading.Thread(target=sender) for _ in range(senders)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started, statuses


@contextmanager
def simulator(nodes: int) -> Iterator[str]:
    """`gpubot sim serve` in its own process, as an API server is: its work does not share
    gpubot's interpreter. Without its controllers: they reconcile the whole simulated cluster
    after every injected fault, in Python, which would make its lists slow exactly while
    gpubot reads — the simulator's cost, not gpubot's (kube-apiserver answers from its
    watch cache whatever the controllers do)."""
    gpubot = str(Path(sys.executable).with_name("gpubot"))
    process = subprocess.Popen(
        [gpubot, "sim", "serve", "--nodes", str(nodes), "--no-controllers"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        if not first.strip():
            raise SystemExit("gpubot sim serve did not start")
        yield first.split()[2]
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextmanager
def gpubot_serve(kube_url: str, workdir: Path) -> Iterator[str]:
    config = workdir / "settings.yaml"
    config.write_text(yaml.safe_dump({"serve": {"host": "127.0.0.1"}}))
    out = (workdir / "serve.out").open("w")
    err = (workdir / "serve.err").open("w")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUBOT_")}
    env["GPUBOT_SERVE__BEARER_TOKEN"] = TOKEN
    process = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("gpubot")), "serve",
            "--config", str(config), "--port", "0",
            "--kube-url", kube_url, "--store-url", f"sqlite:///{workdir / 'gpubot.db'}",
            "--no-watch", "--log-level", "warning",
        ],
        stdout=out,
        stderr=err,
        env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            text = (workdir / "serve.out").read_text()
            if "listening on " in text:
                port = int(text.split("listening on ", 1)[1].split()[0])
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(
                    f"gpubot serve did not start:\n{(workdir / 'serve.err').read_text()}"
                )
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)
        out.close()
        err.close()


def split_count(url: str) -> float:
    """Alerts the inbox has split into signals so far (duplicates included), from /metrics."""
    text = httpx.get(url + "/metrics", timeout=10).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "gpubot_signals_received_total":
                return sample.value
    return 0.0


def wait_for_split(url: str, count: int) -> None:
    deadline = time.monotonic() + 300
    while split_count(url) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"the inbox did not split {count} alerts within 300 s")
        time.sleep(0.02)


def throughput(
    alerts: int, batch: int, senders: int, rounds: int
) -> tuple[list[float], list[float], list[float], int]:
    """Per round, side by side: Alertmanager's alerts/s, gpubot's (answered: stored as
    received), and gpubot's until every alert is split into signals; and the non-200s."""
    made = gpu_alerts(alerts + batch, 4)
    # One batch first, untimed, to each server: gpubot's first pass in a new process also
    # builds what it keeps for later (the kubernetes client's validators, compiled SQL, the
    # console's layout); a replica that has been up for a minute has done that.
    warm_up_ours = json.dumps(webhook(list(enumerate(made))[alerts:])).encode()
    warm_up_theirs = json.dumps(made[alerts:]).encode()
    made = made[:alerts]
    numbered = list(enumerate(made))
    ours = [
        json.dumps(webhook(numbered[i : i + batch])).encode()
        for i in range(0, len(numbered), batch)
    ]
    theirs = [json.dumps(made[i : i + batch]).encode() for i in range(0, len(made), batch)]
    peer: list[float] = []
    answered: list[float] = []
    split: list[float] = []
    bad = 0
    with simulator(4) as kube_url:
        for _ in range(rounds):
            with alertmanager_server(ALERTMANAGER_CONFIG) as alertmanager:
                httpx.post(
                    alertmanager.url + "/api/v2/alerts",
                    content=warm_up_theirs,
                    headers={"Content-Type": "application/json"},
                ).raise_for_status()
                seconds, statuses = send_all(
                    alertmanager.url + "/api/v2/alerts",
                    theirs,
                    senders,
                    {"Content-Type": "application/json"},
                )
            bad += sum(s != 200 for s in statuses)
            peer.append(alerts / seconds)
            with (
                tempfile.TemporaryDirectory(prefix="gpubot-ingest-") as tmp,
                gpubot_serve(kube_url, Path(tmp)) as url,
            ):
                httpx.post(
                    url + "/alertmanager",
                    content=warm_up_ours,
                    headers={"Authorization": f"Bearer {TOKEN}"},
                ).raise_for_status()
                wait_for_split(url, batch)
                time.sleep(1.0)  # its diagnosis done too
                started = time.perf_counter()
                seconds, statuses = send_all(
                    url + "/alertmanager",
                    ours,
                    senders,
                    {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
                )
                bad += sum(s != 200 for s in statuses)
                answered.append(alerts / seconds)
                wait_for_split(url, alerts + batch)
                split.append(alerts / (time.perf_counter() - started))
    return peer, answered, split, bad


class TimedChat(ConsoleChat):
    """The console adapter, rendering into memory, noting when each diagnosis arrives."""

    def __init__(self) -> None:
        super().__init__(Console(file=io.StringIO(), width=120), Lang.EN)
        self.handed: dict[str, float] = {}
        self.arrived = threading.Condition()

    def post_diagnosis(
        self,
        incident: Incident,
        diagnosis: Diagnosis,
        requests: Sequence[ActionRequest],
        under: Incident | None = None,
    ) -> str | None:
        handed = time.perf_counter()  # the hand-over; rendering is the adapter's own time
        result = super().post_diagnosis(incident, diagnosis, requests, under)
        with self.arrived:
            self.handed.setdefault(incident.node or "", handed)
            self.arrived.notify_all()
        return result


def latency(nodes: int) -> list[float]:
    chat = TimedChat()
    seconds: list[float] = []
    with (
        tempfile.TemporaryDirectory(prefix="gpubot-latency-") as tmp,
        simulator(nodes) as kube_url,
    ):
        settings = Settings.model_validate(
            {
                "store_url": f"sqlite:///{Path(tmp) / 'gpubot.db'}",
                "serve": {"host": "127.0.0.1", "port": 0, "bearer_token": TOKEN},
            }
        )
        replica = runtime.build_replica(settings, kube_url=kube_url, chat=chat, watch=False)
        bound: list[int] = []
        server = threading.Thread(
            target=runtime.run, args=(replica,), kwargs={"on_started": bound.append}, daemon=True
        )
        server.start()
        deadline = time.monotonic() + 30
        while not bound and time.monotonic() < deadline:
            time.sleep(0.02)
        url = f"http://127.0.0.1:{bound[0]}/alertmanager"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        try:
            with httpx.Client(timeout=30, headers=headers) as client:
                for index in range(nodes):
                    node = f"gpu-a{index + 1}"
                    injected = inject_remote(kube_url, "xid", node, {"code": 79, "gpu": 3})
                    body = json.dumps(injected["payload"]).encode()
                    sent = time.perf_counter()
                    answer = client.post(url, content=body)
                    if answer.status_code != 200:
                        raise SystemExit(f"webhook answered {answer.status_code}: {answer.text}")
                    with chat.arrived:
                        if not chat.arrived.wait_for(lambda n=node: n in chat.handed, timeout=30):
                            raise SystemExit(f"no diagnosis for {node} within 30 s")
                    seconds.append(chat.handed[node] - sent)
                    # Let the pass end (rendering, proposals, resolves) before the next
                    # webhook: this measures one webhook's latency, not a queue behind it.
                    time.sleep(SETTLE_S)
        finally:
            replica.server.should_exit = True
            server.join(timeout=30)
    return seconds


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--alerts", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=60)
    args = parser.parse_args()

    peer, answered, split, bad = throughput(args.alerts, args.batch, args.senders, args.rounds)
    am = statistics.median(peer)
    print(
        f"{args.alerts} distinct firing alerts, {args.batch} per request, {args.senders} "
        f"senders; median of {args.rounds} rounds, the two servers taking turns; "
        f"{bad} non-200 answers\n"
    )
    print("| receiver | alerts/s | ratio vs Alertmanager | ratio in each round |")
    print("| --- | ---: | ---: | --- |")
    for name, rates in (
        ("Alertmanager `POST /api/v2/alerts` (in memory)", peer),
        ("gpubot serve `POST /alertmanager` (stored as received)", answered),
        ("gpubot serve, until every alert is split into signals", split),
    ):
        rate = statistics.median(rates)
        each = ", ".join(f"{ours / theirs:.2f}" for ours, theirs in zip(rates, peer, strict=True))
        print(f"| {name} | {rate:,.0f} | {rate / am:.2f} | {each} |")

    waits = latency(args.nodes)
    print(f"\nwebhook → diagnosis handed to the chat port, {len(waits)} nodes one at a time\n")
    print("| p50 | p99 | max | mean |")
    print("| ---: | ---: | ---: | ---: |")
    ms = [w * 1000 for w in waits]
    print(
        f"| {percentile(ms, 0.5):.1f} ms | {percentile(ms, 0.99):.1f} ms | {max(ms):.1f} ms "
        f"| {statistics.fmean(ms):.1f} ms |"
    )
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")  # fmt: skip


if __name__ == "__main__":
    main()
