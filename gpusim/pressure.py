"""An API server under pressure: for a while, requests on some paths are answered as a loaded
or failing kube-apiserver answers them, instead of being served.

kube-apiserver's API Priority and Fairness rejects what it cannot queue with a 429 whose
`Retry-After` header says when to come back (and `details.retryAfterSeconds` the same), its
message "Too many requests, please try again later."; a failing one answers 500 or 503. A
well-behaved client (client-go, kubectl) honours the header and backs off otherwise; this is
how a test shows gpubot does too, counting what reached the server.

It must never answer a path it was not told to, and it ends by itself when its time is up.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from gpusim.resources import ApiError

_REASONS = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}
_MESSAGES = {
    429: "Too many requests, please try again later.",
    500: "Internal error occurred: the server is failing",
    503: "The server is currently unable to handle the request",
}


@dataclass(frozen=True)
class Refusal:
    """What a request gets instead of its answer: the Status, and the headers it comes with."""

    error: ApiError
    headers: dict[str, str]


class ApiPressure:
    """Owns the one pressure applied now, if any: until when, on which paths, with which
    answer. Never refuses a path it was not given, nor past its end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until = 0.0
        self._status = 0
        self._retry_after_s: int | None = None
        self._path_part = ""

    def apply(
        self, status: int, seconds: float, *, retry_after_s: int | None = None, path_part: str = ""
    ) -> None:
        """For `seconds` from now, every request whose path contains `path_part` ("" for all)
        is answered `status` (429, 500 or 503), with `Retry-After` when given."""
        if status not in _REASONS:
            raise ValueError(f"status {status}: one of {sorted(_REASONS)}")
        with self._lock:
            self._until = time.monotonic() + seconds
            self._status = status
            self._retry_after_s = retry_after_s
            self._path_part = path_part

    def refusal(self, path: str) -> Refusal | None:
        with self._lock:
            if time.monotonic() >= self._until or self._path_part not in path:
                return None
            status, retry_after = self._status, self._retry_after_s
        details = {"retryAfterSeconds": retry_after} if retry_after is not None else None
        error = ApiError(status, _REASONS[status], _MESSAGES[status], details)
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
        return Refusal(error, headers)
