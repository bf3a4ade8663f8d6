"""From a diagnosis to its message accepted by Slack: gpubot's outbox (`SlackChat` →
SQLite outbox → `OutboxDelivery` → `WebClient`) vs posting straight from the pipeline with
`WebClient.chat_postMessage` (no outbox), against the Slack Web API double on 127.0.0.1.

    python benchmarks/slack_latency.py [--rate 50] [--seconds 8] [--outage-seconds 2]

Each diagnosis is a real one (the shipped rules on the healthy snapshot with gpu-a2's GPUs
gone), recorded as its own incident before the clock starts, so both sides post the same
Block Kit message. Diagnoses are posted on a fixed schedule, `--rate` per
second for `--seconds`; a message's time runs from the call to `post_diagnosis` (or to
`chat_postMessage`) to the moment the double accepted it (its recorded call time).
Then both run again with Slack down (answering 500) for `--outage-seconds` starting one
second in: what the outbox delays, posting straight loses.

Prints one Markdown table (p50, p99 and max of each, ratio outbox / direct in the steady run;
in the outage run the column that matters is "lost") and the machine.
Takes about 30 seconds with the defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from slack_sdk.errors import SlackApiError

from bot.chat.blocks import SNOOZE_ACTION, diagnosis_blocks, fallback_text
from bot.chat.slack import OutboxDelivery, SlackChat, slack_client
from bot.config import Settings, SlackSettings
from bot.facts.snapshots import parse_snapshot
from bot.model import Diagnosis, Incident
from bot.roots.offline import diagnose_snapshot, load_ruleset
from bot.rules.testing import Edit, apply_edits
from bot.store.sql import SqlStore
from tests.helpers.slack_double import SlackDouble

REPO = Path(__file__).resolve().parent.parent
CHANNEL = "C0GPUALERTS"
ZERO_GPUS = {
    "kind": "Node",
    "name": "gpu-a2",
    "merge": {
        "status": {"capacity": {"nvidia.com/gpu": "0"}, "allocatable": {"nvidia.com/gpu": "0"}}
    },
}


def capacity_zero() -> Diagnosis:
    settings = Settings()
    raw = json.loads((REPO / "rules" / "tests" / "snapshots" / "healthy.json").read_text())
    snapshot = parse_snapshot(apply_edits(raw, [Edit.model_validate(ZERO_GPUS)]))
    now = datetime.now(UTC)
    result = diagnose_snapshot(snapshot, [], load_ruleset(settings), settings, now)
    return next(d for d in result.diagnoses if d.rule == "gpu-capacity-zero")


def incidents(store: SqlStore, diagnosis: Diagnosis, count: int, run: str) -> list[Incident]:
    made = []
    for n in range(count):
        d = diagnosis.model_copy(update={"node": f"gpu-{run}-{n}"})
        made.append(store.record_diagnosis(run, d, datetime.now(UTC), 3600).incident)
    return made


def incident_of(blocks: object) -> str | None:
    """The incident id in the snooze button: which diagnosis a posted message is."""
    if not isinstance(blocks, list):
        return None
    for block in blocks:
        for element in block.get("elements", []) if isinstance(block, dict) else []:
            if isinstance(element, dict) and element.get("action_id") == SNOOZE_ACTION:
                value = element.get("value")
                return value if isinstance(value, str) else None
    return None


@dataclass
class Result:
    name: str
    posted: int
    latencies_ms: list[float]

    @property
    def lost(self) -> int:
        return self.posted - len(self.latencies_ms)

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def paced(count: int, rate: float, post: Callable[[int], object]) -> dict[int, float]:
    """Calls `post(n)` on a fixed schedule; returns when each call started (epoch s)."""
    started: dict[int, float] = {}
    begin = time.monotonic()
    for n in range(count):
        delay = begin + n / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        started[n] = time.time()
        post(n)
    return started


def accepted(double: SlackDouble, ids: list[str]) -> dict[str, float]:
    """incident id → when the double accepted its message."""
    wanted = set(ids)
    out: dict[str, float] = {}
    for call in double.calls_to("chat.postMessage"):
        if call.ok:
            incident = incident_of(call.params.get("blocks"))
            if incident in wanted and incident not in out:
                out[incident] = call.at
    return out


def run_outbox(
    diagnosis: Diagnosis, count: int, rate: float, outage_s: float, workdir: Path, run: str
) -> Result:
    with SlackDouble(channels={CHANNEL: "gpu-alerts"}) as double:
        store = SqlStore.open(f"sqlite:///{workdir / f'{run}.db'}")
        made = incidents(store, diagnosis, count, run)
        client = slack_client(SlackSettings(bot_token=double.token, api_url=double.url))
        delivery = OutboxDelivery(store, client, poll_s=0.2)
        chat = SlackChat(store, CHANNEL, on_queued=delivery.wake)
        delivery.start()
        if outage_s:
            threading.Timer(1.0, double.outage, args=(outage_s,)).start()
        started = paced(count, rate, lambda n: chat.post_diagnosis(made[n], diagnosis, []))
        deadline = time.monotonic() + 60
        while store.outbox_pending() and time.monotonic() < deadline:
            time.sleep(0.05)
        delivery.stop()
        store.close()
        at = accepted(double, [i.id for i in made])
    latencies = [(at[i.id] - started[n]) * 1000 for n, i in enumerate(made) if i.id in at]
    return Result(run, count, latencies)


def run_direct(
    diagnosis: Diagnosis, count: int, rate: float, outage_s: float, workdir: Path, run: str
) -> Result:
    with SlackDouble(channels={CHANNEL: "gpu-alerts"}) as double:
        store = SqlStore.open(f"sqlite:///{workdir / f'{run}.db'}")
        made = incidents(store, diagnosis, count, run)
        store.close()
        client = slack_client(SlackSettings(bot_token=double.token, api_url=double.url))

        def post(n: int) -> None:
            blocks = diagnosis_blocks(diagnosis, [], incident=made[n].id)
            with contextlib.suppress(SlackApiError):  # nothing keeps it: the message is lost
                client.chat_postMessage(
                    channel=CHANNEL,
                    text=fallback_text(diagnosis),
                    blocks=[b.to_dict() for b in blocks],
                    unfurl_links=False,
                )

        if outage_s:
            threading.Timer(1.0, double.outage, args=(outage_s,)).start()
        started = paced(count, rate, post)
        at = accepted(double, [i.id for i in made])
    latencies = [(at[i.id] - started[n]) * 1000 for n, i in enumerate(made) if i.id in at]
    return Result(run, count, latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--outage-seconds", type=float, default=2.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the outage's retries are expected
    count = int(args.rate * args.seconds)
    outage_count = int(args.rate * max(4.0, args.outage_seconds + 2))
    diagnosis = capacity_zero()
    blocks = len(diagnosis_blocks(diagnosis, []))
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        rows = [
            (
                run_outbox(diagnosis, count, args.rate, 0, workdir, "outbox"),
                run_direct(diagnosis, count, args.rate, 0, workdir, "direct"),
            ),
            (
                run_outbox(
                    diagnosis, outage_count, args.rate, args.outage_seconds, workdir, "ob-down"
                ),
                run_direct(
                    diagnosis, outage_count, args.rate, args.outage_seconds, workdir, "d-down"
                ),
            ),
        ]
    print(
        f"## Diagnosis → message accepted by the Slack double, {args.rate:g} diagnoses/s "
        f"({blocks} blocks each)\n"
    )
    print("| run | path | posted | lost | p50 ms | p99 ms | max ms | p50 ratio | p99 ratio |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    labels = ["steady", f"Slack down {args.outage_seconds:g} s"]
    for label, (ours, direct) in zip(labels, rows, strict=True):
        for name, result in (
            ("outbox (SlackChat + OutboxDelivery)", ours),
            ("direct WebClient", direct),
        ):
            ratio50 = ratio99 = ""
            if result is ours and label == "steady":
                ratio50 = f"{ours.pct(0.5) / direct.pct(0.5):.2f}×"
                ratio99 = f"{ours.pct(0.99) / direct.pct(0.99):.2f}×"
            print(
                f"| {label} | {name} | {result.posted} | {result.lost} | {result.pct(0.5):.1f} "
                f"| {result.pct(0.99):.1f} | {max(result.latencies_ms or [float('nan')]):.1f} "
                f"| {ratio50} | {ratio99} |"
            )
    print(
        f"\nMachine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, SQLite store on a temp file. Ratio: outbox / direct."
    )


if __name__ == "__main__":
    main()
