"""Memory and pass time with many firing alerts (issue 15, "bounded memory"; issue 18, the
serve pass with 20,000 firing alerts), `gpubot serve`'s code against a peer run beside it.

    python benchmarks/alerts_memory.py [--levels 5000,20000,50000] [--nodes 1000]
                                       [--pass-alerts 20000] [--pass-nodes 100]
                                       [--rounds 3] [--peer-tree DIR] [--skip-memory]

Memory. `gpubot serve` runs as its own process (SQLite in a temp dir, the simulator as its
cluster in another process, no watches, console chat). Per level, a fresh process gets that
many distinct firing GPU alerts spread over `--nodes` nodes, posted as Alertmanager sends
them (500 per webhook, 4 senders). Once every alert is split into a signal (/metrics) and
the process has stopped using CPU (its passes are over), its peak RSS (VmHWM) and settled
RSS (VmRSS) are read from /proc; then every alert is resolved the same way and the settled
RSS is read again. The peer is the same process right after start with one webhook (what a
quiet replica holds), and, with `--peer-tree`, the same measure on another checkout's code
(main's, from `git worktree add`): each run in turn, `--rounds` rounds, medians and spread.

Pass time. In a child process per checkout (`--pass-child`), one replica is built in
process (`build_replica`, nothing started) on a simulator with `--pass-nodes` nodes; the
same pass is timed on an empty store, then with `--pass-alerts` firing alerts on those nodes
stored as the inbox stores them: a full pass (`run([])`, what the sweep runs) and a pass
about one node (`run([alert])`, what a webhook about one node starts), each repeated after
a first, untimed one. The ratio is against the empty store in the same process.

Prints Markdown tables and the machine. Needs nothing beyond the dev install.
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
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

TOKEN = "bench-token"
HERE = Path(__file__).resolve().parent.parent
PER_WEBHOOK = 500
SENDERS = 4
MIB = 1024 * 1024


def alerts(count: int, nodes: int, status: str = "firing") -> list[dict[str, Any]]:
    """Distinct GPU temperature alerts, as Prometheus fires them from the shipped rules."""
    start = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
    ends = "0001-01-01T00:00:00Z" if status == "firing" else "2026-12-04T10:00:00Z"
    return [
        {
            "status": status,
            "labels": {
                "alertname": "GPUTemperatureHigh",
                "severity": "warning",
                "node": f"gpu-a{i % nodes + 1}",
                "gpu": str(i // nodes % 8),
                "instance": f"10.0.{i // 250 % 250}.{i % 250}:9400",
                "serial": f"{i:08d}",
            },
            "annotations": {"summary": "GPU temperature above 85 °C for 5 min"},
            "startsAt": (start - timedelta(seconds=i)).isoformat().replace("+00:00", "Z"),
            "endsAt": ends,
            "generatorURL": "http://prometheus:9090/graph",
            "fingerprint": f"{i:016x}",
        }
        for i in range(count)
    ]


def webhook(batch: list[dict[str, Any]], status: str = "firing") -> dict[str, Any]:
    return {
        "version": "4",
        "groupKey": '{}:{alertname="GPUTemperatureHigh"}',
        "truncatedAlerts": 0,
        "receiver": "gpubot",
        "status": status,
        "alerts": batch,
        "groupLabels": {"alertname": "GPUTemperatureHigh"},
        "commonLabels": {"alertname": "GPUTemperatureHigh"},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
    }


def bodies(count: int, nodes: int, status: str) -> list[bytes]:
    made = alerts(count, nodes, status)
    return [
        json.dumps(webhook(made[i : i + PER_WEBHOOK], status)).encode()
        for i in range(0, count, PER_WEBHOOK)
    ]


def send_all(url: str, sent: list[bytes]) -> None:
    lock = threading.Lock()
    left = iter(sent)
    failed: list[str] = []

    def sender() -> None:
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        with httpx.Client(timeout=120, headers=headers) as client:
            while True:
                with lock:
                    body = next(left, None)
                if body is None:
                    return
                answer = client.post(url + "/alertmanager", content=body)
                while answer.status_code == 503:  # the store is busy: retry, as Alertmanager does
                    time.sleep(float(answer.headers.get("Retry-After", "1")))
                    answer = client.post(url + "/alertmanager", content=body)
                if answer.status_code != 200:
                    failed.append(f"{answer.status_code} {answer.text[:200]}")

    threads = [threading.Thread(target=sender) for _ in range(SENDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failed:
        raise SystemExit(f"the webhook refused {len(failed)} bodies: {failed[0]}")


def env_for(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUBOT_")}
    env["PYTHONPATH"] = str(tree)
    env["GPUBOT_SERVE__BEARER_TOKEN"] = TOKEN
    return env


@contextmanager
def simulator(nodes: int) -> Iterator[str]:
    """`gpubot sim serve` in its own process, without its controllers (as in ingest.py: the
    simulator's reconciling is its cost, not gpubot's)."""
    gpubot = str(Path(sys.executable).with_name("gpubot"))
    process = subprocess.Popen(
        [gpubot, "sim", "serve", "--nodes", str(nodes), "--no-controllers"],
        stdout=subprocess.PIPE,
        text=True,
        env=env_for(HERE),
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
def serve(tree: Path, kube_url: str, workdir: Path) -> Iterator[tuple[str, int]]:
    """`gpubot serve` on `tree`'s code: (its URL, its pid)."""
    config = workdir / "settings.yaml"
    config.write_text(yaml.safe_dump({"serve": {"host": "127.0.0.1"}}))
    out = (workdir / "serve.out").open("w")
    err = (workdir / "serve.err").open("w")
    process = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("gpubot")), "serve",
            "--config", str(config), "--port", "0",
            "--kube-url", kube_url, "--store-url", f"sqlite:///{workdir / 'gpubot.db'}",
            "--no-watch", "--log-level", "error",
        ],
        stdout=out,
        stderr=err,
        env=env_for(tree),
        cwd=workdir,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            text = (workdir / "serve.out").read_text(errors="replace")
            if "listening on " in text:
                port = int(text.split("listening on ", 1)[1].split()[0])
                break
            if process.poll() is not None or time.monotonic() > deadline:
                told = (workdir / "serve.err").read_text()
                raise SystemExit(f"gpubot serve did not start:\n{told}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}", process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        out.close()
        err.close()


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise SystemExit(f"no {field} for pid {pid}")


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def split_count(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=30).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "gpubot_signals_received_total":
                return sample.value
    return 0.0


def settle(url: str, pid: int, split: int, quiet_s: float = 3.0, timeout_s: float = 1800) -> float:
    """Waits until `split` alerts were split and the process has used no CPU for `quiet_s`
    (its passes are over); the seconds that took."""
    started = time.monotonic()
    while split_count(url) < split:
        if time.monotonic() - started > timeout_s:
            raise SystemExit(f"{split} alerts not split within {timeout_s} s")
        time.sleep(0.2)
    ticks, quiet_since = cpu_ticks(pid), time.monotonic()
    while time.monotonic() - quiet_since < quiet_s:
        time.sleep(0.5)
        now = cpu_ticks(pid)
        if now - ticks > 2:  # more than 20 ms of CPU in half a second: still working
            ticks, quiet_since = now, time.monotonic()
        if time.monotonic() - started > timeout_s:
            raise SystemExit(f"still busy after {timeout_s} s")
    return time.monotonic() - started


def memory_run(tree: Path, kube_url: str, count: int, nodes: int) -> dict[str, float]:
    """MiB: idle after one webhook, peak, settled with `count` firing, settled after resolve;
    seconds to split and settle."""
    firing = bodies(count, nodes, "firing")
    resolved = bodies(count, nodes, "resolved")
    warm = json.dumps(webhook(alerts(1, 1))).encode()
    with (
        tempfile.TemporaryDirectory(prefix="gpubot-alerts-memory-") as tmp,
        serve(tree, kube_url, Path(tmp)) as (url, pid),
    ):
        send_all(url, [warm])
        settle(url, pid, 1)
        idle = status_kib(pid, "VmRSS") / 1024
        send_all(url, firing)
        firing_s = settle(url, pid, 1 + count)
        peak = status_kib(pid, "VmHWM") / 1024
        held = status_kib(pid, "VmRSS") / 1024
        send_all(url, resolved)
        resolved_s = settle(url, pid, 1 + 2 * count)
        after = status_kib(pid, "VmRSS") / 1024
        peak = max(peak, status_kib(pid, "VmHWM") / 1024)
    return {
        "idle": idle,
        "peak": peak,
        "firing": held,
        "resolved": after,
        "firing_s": firing_s,
        "resolved_s": resolved_s,
    }


def pass_child(kube_url: str, count: int, nodes: int, repeats: int) -> None:
    """Runs in a child with the checkout's code on PYTHONPATH; prints JSON seconds."""
    from rich.console import Console

    from bot.chat.console import ConsoleChat
    from bot.config import Settings
    from bot.model import Lang
    from bot.roots import serve as runtime
    from bot.sources.alertmanager.payloads import signals_from_payload, validate_payload

    with tempfile.TemporaryDirectory(prefix="gpubot-pass-") as tmp:
        settings = Settings.model_validate(
            {
                "store_url": f"sqlite:///{Path(tmp) / 'gpubot.db'}",
                "serve": {"host": "127.0.0.1", "port": 0, "bearer_token": TOKEN},
            }
        )
        chat = ConsoleChat(Console(file=io.StringIO(), width=120), Lang.EN)
        replica = runtime.build_replica(settings, kube_url=kube_url, chat=chat, watch=False)
        passes = replica.service.passes
        storm = [
            signal
            for start in range(0, count, PER_WEBHOOK)
            for signal in signals_from_payload(
                validate_payload(webhook(alerts(count, nodes)[start : start + PER_WEBHOOK])),
                settings.node_labels,
            )
        ]
        one = [storm[0]]

        def timed(batch: list[Any]) -> list[float]:
            passes.run(batch)  # the first is untimed: caches, compiled SQL, matches
            seconds = []
            for _ in range(repeats):
                started = time.perf_counter()
                passes.run(batch)
                seconds.append(time.perf_counter() - started)
            return seconds

        found = {"empty_full": timed([]), "empty_one": timed(one)}
        received = datetime.now(UTC)
        for start in range(0, len(storm), 2000):
            replica.store.add_signals(storm[start : start + 2000], received)
        found["storm_full"] = timed([])
        found["storm_one"] = timed(one)
        replica.store.close()
    print(json.dumps(found))


def pass_times(tree: Path, kube_url: str, count: int, nodes: int, repeats: int) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable, str(Path(__file__).resolve()), "--pass-child", kube_url,
            "--pass-alerts", str(count), "--pass-nodes", str(nodes), "--repeats", str(repeats),
        ],
        env=env_for(tree),
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"pass child on {tree} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def spread(values: list[float]) -> str:
    return f"{min(values):.0f}–{max(values):.0f}" if len(values) > 1 else f"{values[0]:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="5000,20000,50000")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pass-alerts", type=int, default=20000)
    parser.add_argument("--pass-nodes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--peer-tree", type=Path)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--skip-pass", action="store_true")
    parser.add_argument("--pass-child")
    args = parser.parse_args()
    if args.pass_child:
        pass_child(args.pass_child, args.pass_alerts, args.pass_nodes, args.repeats)
        return
    trees = [("this checkout", HERE)]
    if args.peer_tree:
        trees.append((f"peer ({args.peer_tree})", args.peer_tree.resolve()))

    if not args.skip_pass:
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in trees}
        with simulator(args.pass_nodes) as kube_url:
            for _ in range(args.rounds):
                for name, tree in trees:
                    run = pass_times(
                        tree, kube_url, args.pass_alerts, args.pass_nodes, args.repeats
                    )
                    runs[name].append(run)
                    print(name, json.dumps(run), file=sys.stderr, flush=True)
        print(
            f"\nPass time, {args.pass_alerts:,} firing alerts on {args.pass_nodes} nodes; "
            f"median of {args.repeats} passes per round, {args.rounds} rounds (spread of the "
            "round medians); the peer is the same pass on an empty store, same process\n"
        )
        print("| code | pass | empty store | with the alerts | ratio | ratio per round |")
        print("| --- | --- | ---: | ---: | ---: | --- |")
        for name, _ in trees:
            for kind, label in (("full", "full (sweep)"), ("one", "one node (webhook)")):
                empty = [statistics.median(r[f"empty_{kind}"]) * 1000 for r in runs[name]]
                storm = [statistics.median(r[f"storm_{kind}"]) * 1000 for r in runs[name]]
                ratios = ", ".join(f"{s / e:.2f}" for s, e in zip(storm, empty, strict=True))
                print(
                    f"| {name} | {label} | {statistics.median(empty):.1f} ms "
                    f"({spread(empty)}) | {statistics.median(storm):.1f} ms ({spread(storm)}) "
                    f"| {statistics.median(storm) / statistics.median(empty):.2f} | {ratios} |"
                )

    if not args.skip_memory:
        levels = [int(level) for level in args.levels.split(",")]
        found: dict[tuple[str, int], list[dict[str, float]]] = {}
        with simulator(args.nodes) as kube_url:
            for _ in range(args.rounds):
                for level in levels:
                    for name, tree in trees:
                        run = memory_run(tree, kube_url, level, args.nodes)
                        found.setdefault((name, level), []).append(run)
                        # As it goes: a run at 50,000 alerts takes minutes on a shared VM.
                        print(name, level, json.dumps(run), file=sys.stderr, flush=True)
        print(
            f"\nMemory of `gpubot serve` (RSS, MiB), firing alerts on {args.nodes} nodes; "
            f"median of {args.rounds} rounds (spread); idle = the same process after one "
            "webhook\n"
        )
        print(
            "| code | alerts | idle | peak | settled, firing | settled, resolved "
            "| peak / idle | to split and settle |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for (name, level), rows in found.items():

            def median(key: str, rows: list[dict[str, float]] = rows) -> float:
                return statistics.median(r[key] for r in rows)

            print(
                f"| {name} | {level:,} | {median('idle'):.0f} | {median('peak'):.0f} "
                f"({spread([r['peak'] for r in rows])}) | {median('firing'):.0f} "
                f"({spread([r['firing'] for r in rows])}) | {median('resolved'):.0f} "
                f"({spread([r['resolved'] for r in rows])}) | "
                f"{median('peak') / median('idle'):.1f} | "
                f"{median('firing_s'):.0f} s + {median('resolved_s'):.0f} s |"
            )
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")  # fmt: skip


if __name__ == "__main__":
    main()
