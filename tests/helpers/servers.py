"""The real Prometheus and Alertmanager (Debian's packages), started as plain processes on
127.0.0.1 for a test, plus a tiny exporter that serves whatever text a test sets.

    with prometheus_server([Target(url, labels={"instance": "gpu-a1"})]) as prom:
        prom.query("up")

Each server gets a free port, its own temp dir (config, TSDB or storage, log) and is ready
when the context is entered: polled, with a deadline, never a fixed sleep. Prometheus is
ready when `/-/ready` answers, every scrape target has been scraped (and is up, unless
`wait_up=False`), and the configured Alertmanager shows in `/api/v1/alertmanagers`. Expect
about 5-6 s for the first scrape: Prometheus hands targets to its scrape loops on a 5 s
ticker. A process that dies or misses its deadline is killed, and the error carries the tail
of its log. Processes are stopped (SIGTERM, then SIGKILL) on exit.

Importable as `from tests.helpers.servers import ...` (the repository root is on sys.path through
the editable install, as for `tests.conftest`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpusim.serving import LoopbackServer

PROMETHEUS = shutil.which("prometheus") or shutil.which("/usr/bin/prometheus")
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")

# Skipped only outside CI: under .ci/run (CI=true) a missing binary must fail, not hide.
requires_prometheus = pytest.mark.skipif(
    PROMETHEUS is None and not os.environ.get("CI"),
    reason="prometheus not installed (apt-get install prometheus)",
)
requires_alertmanager = pytest.mark.skipif(
    ALERTMANAGER is None and not os.environ.get("CI"),
    reason="alertmanager not installed (apt-get install prometheus-alertmanager)",
)

Json = dict[str, Any]


class ServerError(RuntimeError):
    """A server did not start or did not become ready; the message ends with its log."""


def free_port() -> int:
    """A port free on 127.0.0.1 right now (the process binds it a moment later; a start that
    loses that race is retried)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_get(url: str, timeout_s: float = 2.0) -> tuple[int, bytes]:
    """(status, body); connection failures raise OSError."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def poll(
    check: Callable[[], Any],
    timeout_s: float,
    what: str,
    interval_s: float = 0.05,
    alive: Callable[[], None] | None = None,
) -> Any:
    """Call `check` until it returns something truthy (returned), or raise TimeoutError
    naming `what`. `alive` raises when the thing waited for has died."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while True:
        if alive is not None:
            alive()
        try:
            last = check()
        except OSError as exc:  # not listening yet, connection reset while starting
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:g} s (last: {last!r})")
        time.sleep(interval_s)


# ---- processes ---------------------------------------------------------------------------


class ServerProcess:
    """A server binary running in its own temp dir, its log in `<dir>/server.log`."""

    name = "server"

    def __init__(self, args: Sequence[str], workdir: Path, port: int) -> None:
        self.workdir = workdir
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = workdir / "server.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            list(args),
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def alive(self) -> None:
        """Raise ServerError when the process has exited."""
        code = self.process.poll()
        if code is not None:
            raise ServerError(f"{self.name} exited with {code}:\n{self.log_tail()}")

    def get_json(self, path: str, timeout_s: float = 5.0) -> Json:
        status, body = http_get(self.url + path, timeout_s)
        if status != 200:
            raise ServerError(f"{self.name} GET {path}: {status} {body[:300]!r}")
        data: Json = json.loads(body)
        return data

    def wait_ready(self, timeout_s: float) -> None:
        poll(
            lambda: http_get(self.url + "/-/ready")[0] == 200,
            timeout_s,
            f"{self.name} /-/ready",
            alive=self.alive,
        )

    def pause(self) -> None:
        """SIGSTOP: the process keeps its port (connections queue up) but answers nothing,
        like a server stuck in a long GC or on a saturated host."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a paused process cannot handle TERM
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._log.close()


def _start(
    make: Callable[[int], ServerProcess], ready: Callable[[ServerProcess], None], attempts: int = 3
) -> ServerProcess:
    """Start on a free port and wait until ready; retry when another process took the port
    in between; on any failure kill the process and raise with its log."""
    for attempt in range(attempts):
        server = make(free_port())
        try:
            ready(server)
            return server
        except (ServerError, TimeoutError) as exc:
            tail = server.log_tail()
            server.stop()
            if "address already in use" in tail and attempt + 1 < attempts:
                continue
            print(f"--- {server.name} log (last lines) ---\n{tail}")
            raise ServerError(f"{exc}\n--- {server.name} log ---\n{tail}") from exc
        except BaseException:
            server.stop()
            raise
    raise AssertionError("unreachable")


# ---- Prometheus --------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One scrape target by URL (any path: the simulator serves one node per path), with
    target labels. Note that a target label named like a label of the scraped series is
    renamed `exported_<name>` on those series (honor_labels is off)."""

    url: str
    labels: Mapping[str, str] = field(default_factory=dict)
    job: str = "dcgm-exporter"


def scrape_configs(
    targets: Iterable[Target | str | Mapping[str, Any]], scrape_interval: str
) -> list[Json]:
    """Prometheus `scrape_configs` for `targets`: a Target or URL becomes a static target
    of its job (path in `__metrics_path__`); a mapping is a whole scrape_config, as is."""
    jobs: dict[str, Json] = {}
    raw: list[Json] = []
    for target in targets:
        if isinstance(target, Mapping):
            raw.append(dict(target))
            continue
        if isinstance(target, str):
            target = Target(target)
        parts = urllib.parse.urlsplit(target.url)
        job = jobs.setdefault(
            target.job,
            {
                "job_name": target.job,
                "scrape_interval": scrape_interval,
                "scrape_timeout": scrape_interval,
                "static_configs": [],
            },
        )
        labels = {"__metrics_path__": parts.path or "/metrics", **target.labels}
        if parts.scheme and parts.scheme != "http":
            labels["__scheme__"] = parts.scheme
        job["static_configs"].append({"targets": [parts.netloc], "labels": labels})
    return [*jobs.values(), *raw]


class PrometheusServer(ServerProcess):
    name = "prometheus"

    def query(self, promql: str, at: float | None = None) -> list[Json]:
        """`data.result` of an instant query (raw JSON, independent of gpubot's adapter)."""
        params = {"query": promql, **({"time": str(at)} if at is not None else {})}
        body = self.get_json("/api/v1/query?" + urllib.parse.urlencode(params))
        result: list[Json] = body["data"]["result"]
        return result

    def wait_for(
        self, promql: str, predicate: Callable[[list[Json]], bool], timeout_s: float = 15.0
    ) -> list[Json]:
        """Poll an instant query until `predicate(result)` holds; the result."""
        return poll(  # type: ignore[no-any-return]
            lambda: (lambda r: r if predicate(r) else None)(self.query(promql)),
            timeout_s,
            f"prometheus: {promql}",
            interval_s=0.1,
            alive=self.alive,
        )

    def targets(self) -> list[Json]:
        active: list[Json] = self.get_json("/api/v1/targets?state=active")["data"]["activeTargets"]
        return active

    def alerts(self) -> list[Json]:
        """Alerts of the rules (pending and firing)."""
        alerts: list[Json] = self.get_json("/api/v1/alerts")["data"]["alerts"]
        return alerts

    def reload(self, timeout_s: float = 10.0) -> None:
        """Re-read config and rule files (needs `enable_lifecycle=True`)."""
        request = urllib.request.Request(self.url + "/-/reload", method="POST")
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            if response.status != 200:
                raise ServerError(f"reload: {response.status}")


@contextmanager
def prometheus_server(
    scrape_targets: Iterable[Target | str | Mapping[str, Any]] = (),
    rule_files: Iterable[str | Path] = (),
    alertmanager_url: str | None = None,
    scrape_interval: str = "1s",
    evaluation_interval: str = "1s",
    *,
    wait_up: bool = True,
    alert_resend_delay: str = "1s",
    enable_lifecycle: bool = False,
    extra_args: Sequence[str] = (),
    ready_timeout_s: float = 30.0,
) -> Iterator[PrometheusServer]:
    """A started, ready Prometheus (see the module docstring); stopped on exit.

    `rule_files` are referenced by absolute path (a test can rewrite one and `reload()`);
    `alertmanager_url` is e.g. `alertmanager.url`. `wait_up=False` waits only until every
    target was scraped once, for tests that start with a target down.

    `alert_resend_delay` (Prometheus' default: 1m) is how often a firing alert is sent
    again. Rules run from the start, but Prometheus finds its Alertmanager only about 5 s
    later and drops what it had to send before that; with 1 s the alert arrives at the next
    evaluation instead of a minute later.
    """
    if PROMETHEUS is None:
        raise ServerError("prometheus is not installed")
    targets = list(scrape_targets)
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="prometheus-")))
        config: Json = {
            "global": {
                "scrape_interval": scrape_interval,
                "scrape_timeout": scrape_interval,
                "evaluation_interval": evaluation_interval,
            },
            "scrape_configs": scrape_configs(targets, scrape_interval),
        }
        rules = [str(Path(r).resolve()) for r in rule_files]
        if rules:
            config["rule_files"] = rules
        if alertmanager_url:
            parts = urllib.parse.urlsplit(alertmanager_url)
            config["alerting"] = {
                "alertmanagers": [
                    {
                        "scheme": parts.scheme or "http",
                        "path_prefix": parts.path or "/",
                        "static_configs": [{"targets": [parts.netloc]}],
                    }
                ]
            }
        config_path = workdir / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))

        def make(port: int) -> ServerProcess:
            args = [
                str(PROMETHEUS),
                f"--config.file={config_path}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--web.external-url=http://127.0.0.1:{port}/",
                f"--rules.alert.resend-delay={alert_resend_delay}",
                *(["--web.enable-lifecycle"] if enable_lifecycle else []),
                *extra_args,
            ]
            return PrometheusServer(args, workdir, port)

        def ready(server: ServerProcess) -> None:
            assert isinstance(server, PrometheusServer)
            deadline = time.monotonic() + ready_timeout_s
            server.wait_ready(ready_timeout_s)
            if targets:
                _wait_scraped(server, wait_up, deadline - time.monotonic())
            if alertmanager_url:
                _wait_alertmanager(server, alertmanager_url, deadline - time.monotonic())

        server = _start(make, ready)
        stack.callback(server.stop)
        assert isinstance(server, PrometheusServer)
        yield server


def _wait_scraped(server: PrometheusServer, wait_up: bool, timeout_s: float) -> None:
    """Every active target scraped (and up, with `wait_up`), and its `up` queryable."""

    def scraped() -> bool:
        targets = server.targets()
        if not targets:
            return False
        wanted = ("up",) if wait_up else ("up", "down")
        if not all(t.get("health") in wanted for t in targets):
            return False
        up = server.query("up")
        return len(up) >= len(targets) and (
            not wait_up or all(float(s["value"][1]) == 1 for s in up)
        )

    poll(scraped, max(timeout_s, 0.1), "prometheus: every target scraped", 0.1, server.alive)


def _wait_alertmanager(server: PrometheusServer, url: str, timeout_s: float) -> None:
    netloc = urllib.parse.urlsplit(url).netloc

    def discovered() -> bool:
        data = server.get_json("/api/v1/alertmanagers")["data"]
        return any(netloc in a.get("url", "") for a in data.get("activeAlertmanagers", []))

    poll(discovered, max(timeout_s, 0.1), f"prometheus: alertmanager {url}", 0.1, server.alive)


# ---- Alertmanager ------------------------------------------------------------------------


class AlertmanagerServer(ServerProcess):
    name = "alertmanager"

    def alerts(self) -> list[Json]:
        """`GET /api/v2/alerts`: the alerts it holds (active, silenced, inhibited)."""
        status, body = http_get(self.url + "/api/v2/alerts", 5.0)
        if status != 200:
            raise ServerError(f"alertmanager GET /api/v2/alerts: {status} {body[:300]!r}")
        alerts: list[Json] = json.loads(body)
        return alerts

    def post_alerts(self, alerts: Sequence[Json]) -> None:
        """`POST /api/v2/alerts`, as Prometheus sends them."""
        request = urllib.request.Request(
            self.url + "/api/v2/alerts",
            data=json.dumps(list(alerts)).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            if response.status != 200:
                raise ServerError(f"alertmanager POST /api/v2/alerts: {response.status}")


@contextmanager
def alertmanager_server(
    config_yaml: str,
    *,
    extra_args: Sequence[str] = (),
    ready_timeout_s: float = 20.0,
) -> Iterator[AlertmanagerServer]:
    """A started, ready Alertmanager with `config_yaml` (gossip off); stopped on exit."""
    if ALERTMANAGER is None:
        raise ServerError("alertmanager is not installed")
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="alertmanager-")))
        config_path = workdir / "alertmanager.yml"
        config_path.write_text(config_yaml)

        def make(port: int) -> ServerProcess:
            args = [
                str(ALERTMANAGER),
                f"--config.file={config_path}",
                f"--storage.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--web.external-url=http://127.0.0.1:{port}/",
                "--cluster.listen-address=",
                *extra_args,
            ]
            return AlertmanagerServer(args, workdir, port)

        server = _start(make, lambda s: s.wait_ready(ready_timeout_s))
        stack.callback(server.stop)
        assert isinstance(server, AlertmanagerServer)
        yield server


# ---- a settable exporter -----------------------------------------------------------------


class TextExporter:
    """Serves `text` (Prometheus exposition format) with `status` at any path: for series
    no simulator produces (kube-state-metrics, dcgm-exporter's DCGM_EXP_* metrics) and for
    answers a real server would give only when broken (a 503, a 400 body)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._text = ""
        self._status = 200
        self._content_type = "text/plain; version=0.0.4; charset=utf-8"
        self.requests = 0
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                with exporter._lock:
                    exporter.requests += 1
                    body = exporter._text.encode()
                    status, content_type = exporter._status, exporter._content_type
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._http = LoopbackServer(Handler, 0, "text-exporter")

    @property
    def url(self) -> str:
        return self._http.url

    def set(
        self,
        text: str,
        status: int = 200,
        content_type: str = "text/plain; version=0.0.4; charset=utf-8",
    ) -> None:
        with self._lock:
            self._text, self._status, self._content_type = text, status, content_type

    def start(self) -> TextExporter:
        self._http.start()
        return self

    def stop(self) -> None:
        self._http.stop()


@contextmanager
def text_exporter(text: str = "") -> Iterator[TextExporter]:
    exporter = TextExporter().start()
    exporter.set(text)
    try:
        yield exporter
    finally:
        exporter.stop()
