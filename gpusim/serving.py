"""The one way the simulator serves HTTP: threaded, on 127.0.0.1 only, quiet about clients
that hang up, and stoppable whether or not it was ever started; with a TLS context, HTTPS (the
handshake happens in the connection's own thread, so a slow or refusing client never holds up
the others). It must never bind anything but 127.0.0.1: it is a test cluster's server, and
its exporters have no authentication, as dcgm-exporter and kube-state-metrics have none."""

from __future__ import annotations

import socket
import ssl
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _QuietServer(ThreadingHTTPServer):
    """A threaded HTTP server that sends replies at once and ignores hung-up clients."""

    daemon_threads = True
    tls: ssl.SSLContext | None = None

    def get_request(self) -> tuple[socket.socket, Any]:
        # The handler writes headers and body in separate sends: with Nagle on, the body
        # waits for the client's delayed ACK, about 40 ms per request on Linux, which would
        # make every benchmark against the simulator measure that instead of the work.
        connection, address = super().get_request()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection, address

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        try:
            wrapped = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return  # a client that refused the certificate, or hung up during the handshake
        try:
            super().finish_request(wrapped, client_address)
        finally:
            wrapped.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (a finished watch, kubectl exiting) is normal, not an error.
        if not isinstance(sys.exc_info()[1], ConnectionError | ssl.SSLError):
            super().handle_error(request, client_address)


class LoopbackServer:
    """An HTTP (with `tls`, HTTPS) server on 127.0.0.1 and the thread that serves it."""

    def __init__(
        self,
        handler: type[BaseHTTPRequestHandler],
        port: int,
        name: str,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._http = _QuietServer(("127.0.0.1", port), handler)
        self._http.tls = tls
        self._name = name
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._http.server_address[1])

    @property
    def url(self) -> str:
        scheme = "https" if self._http.tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._http.serve_forever,
            kwargs={"poll_interval": 0.05},  # stop() returns within 50 ms
            name=self._name,
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:  # shutdown() waits for serve_forever, which may never run
            self._http.shutdown()
        self._http.server_close()


def get_handler(handle: Callable[[BaseHTTPRequestHandler], None]) -> type[BaseHTTPRequestHandler]:
    """A request handler class for an exporter: every GET goes to `handle`, nothing is
    logged, nothing is kept on the handler."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            handle(self)

    return Handler
