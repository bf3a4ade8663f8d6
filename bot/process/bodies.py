"""Reading a request's body within a size limit and a deadline, for every endpoint that reads
one (`POST /alertmanager`, `POST /slack/events`).

Why it exists: uvicorn cuts neither a body that grows without end nor one that never ends. A
client that declares 1,000 bytes and sends one a minute would hold a connection, a task and
its buffer for good; three hundred of them hold three hundred. The limit bounds the memory of
one request, the deadline the time: past it the request is answered 408 and the connection
closed (`CLOSE_CONNECTION`). Headers that never end are the server's to cut
(`bot.replica.http.server_config`).

What it must never do: wait for a byte past the deadline, or keep more than `limit` bytes.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request

CLOSE_CONNECTION = {"Connection": "close"}
"""Headers of the 408: the rest of a body that came too slowly is not read, so the connection
cannot carry another request."""


class BodyTooLarge(Exception):
    """The body grew past the limit (a chunked request has no Content-Length to check first)."""


class BodyTooSlow(Exception):
    """The body was not complete within the deadline."""


async def read_body(request: Request, limit: int, timeout_s: float) -> bytes:
    """The whole body; `BodyTooLarge` as soon as it passes `limit` bytes, `BodyTooSlow` when it
    is not complete `timeout_s` after the first read began. `ClientDisconnect` (Starlette's)
    when the client goes away first."""
    chunks: list[bytes] = []

    async def read() -> None:
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(f"body larger than {limit} bytes")
            chunks.append(chunk)

    try:
        await asyncio.wait_for(read(), timeout_s)
    except TimeoutError:
        raise BodyTooSlow(f"the body was not complete within {timeout_s:g} s") from None
    return b"".join(chunks)
