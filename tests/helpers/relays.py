"""A TCP relay on 127.0.0.1 that a test can cut and restore: the network between gpubot and a
peer (its PostgreSQL), failing as a network does, with nothing in gpubot replaced.

    with TcpRelay(5432) as relay:          # postgresql://...@127.0.0.1:{relay.port}/...
        relay.cut()                        # open connections reset, new ones refused
        relay.restore()                    # the same port answers again

While cut, the port is closed (a connect is refused, as by a database that is down) and every
relayed connection is closed (a query in flight fails, as on a restart). Restored, it listens
on the same port again.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from typing import Self


class TcpRelay:
    """Relays every connection to 127.0.0.1:`target`. Owns its listening socket, the relayed
    connections and their threads; never binds anything but 127.0.0.1."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = 0
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener: socket.socket | None = None

    def __enter__(self) -> Self:
        self.restore()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cut()

    def restore(self) -> None:
        """Listen (again, on the same port once it had one) and relay."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Close the port and every relayed connection."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._open = self._open, set()
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._listener is not listener:  # cut meanwhile
                    client.close()
                    upstream.close()
                    return
                self._open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
