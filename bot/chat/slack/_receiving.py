"""The incoming side: `SlackInteractions`, one slack-bolt `App` shared by HTTP
(`POST /slack/events`) and Socket Mode, with every check a request meets before anything is
acknowledged, and the pool that does the work after.

Why it exists: no request that Slack did not send, or sent before, may change anything
(docs/architecture.md, invariant 7). Checks, in this order:

1. (HTTP, in front of bolt) a body over `max_body_bytes` → 413, one not complete within the
   body deadline → 408; a timestamp header that is not a number → 401 (slack_sdk's verifier
   would raise on it, a 500); a bad signature or a timestamp more than 5 minutes away → 401,
   logged as one line that holds neither the body nor the signature (bolt would log the whole
   body at INFO: a forger could fill the log); a body bolt cannot parse → 400 (bolt would
   answer a parse error with a 500).
2. bolt's `RequestVerification` (always on): the same verification again, inside bolt, so
   the bolt app is never reachable unverified whoever routes to it.
3. replay (a global bolt middleware, so it sees verified requests only): a signature taken
   before → 401 with `X-Slack-No-Retry: 1`; the store down → 503. Slack signs
   `v0:timestamp:body` and asks apps to refuse a timestamp more than 5 minutes away
   ("Verifying requests from Slack"), so within those minutes the same signature twice is a
   replay. The store remembers each signature (a digest) for that window
   (`note_signed_request`: the first INSERT wins, as a vote's), so a copy sent to another
   replica, or to this one after a restart, is refused too: a slash command proposes once,
   and a click votes once before the vote's own constraint is even asked. Slack itself
   never sends a command or a click twice (it retries only Events API deliveries, marked
   `X-Slack-Retry-Num`, and gpubot subscribes to no event); that header is outside the
   signature, so it changes nothing here.
4. `block_actions`: a click on a button that is not ours → 400, store down → 503
   (`_buttons.click_problem`).

Then the listener acknowledges at once (bolt's `process_before_response=True`: the ack is
the HTTP answer, well within Slack's 3 seconds) and hands the work to a small thread pool:
the engine's decision, the message update, the ephemeral answer (`_buttons`, `_command`).
Checks 3 and 4 are bolt middleware, so Socket Mode (where Slack authenticates the websocket
with the app-level token and there is nothing to sign) gets check 4 too.

What it must never do: switch request verification off, not even for tests (they sign as
Slack signs), log a request's body, or do the work before the ack. It only wires: what a
click or a command does is `_buttons` and `_command`.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from slack_bolt import Ack, App, BoltRequest, BoltResponse, Respond
from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response
from slack_bolt.authorization import AuthorizeResult
from slack_sdk import WebClient
from slack_sdk.signature import SignatureVerifier
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.chat.blocks import ACTION_IDS
from bot.chat.slack._buttons import click_of, click_problem, handle_click
from bot.chat.slack._command import handle_command
from bot.chat.slack._handling import Handling
from bot.chat.slack._ports import Engine
from bot.chat.slack._posting import SlackChat
from bot.clock import Clock, utcnow
from bot.config import SlackSettings
from bot.errors import InputError, StoreUnavailable
from bot.model import Lang
from bot.process.bodies import CLOSE_CONNECTION, BodyTooLarge, BodyTooSlow, read_body

log = logging.getLogger("gpubot.slack")

BOLT_APP_NAME = "gpubot.slack.bolt"
"""The bolt app's name, which is also the name of the logger bolt configures at every request
(its level and handlers copied from the base logger). Named "gpubot", bolt would reset the
level of every gpubot logger at each click."""
_bolt_log = logging.getLogger(BOLT_APP_NAME)
# bolt logs every request that fails its verification at INFO, body and all. Ours are
# refused (and logged, briefly) before bolt sees them; this keeps bolt's own lines at warning.
_bolt_log.setLevel(logging.WARNING)

TIMESTAMP = re.compile(r"[0-9]{1,12}")
"""What `X-Slack-Request-Timestamp` holds: Unix seconds."""

REPLAY_WINDOW = timedelta(minutes=5, seconds=30)
"""How long a signature is remembered: SignatureVerifier's window (a timestamp more than 5
minutes away either way is refused) and a little clock skew between the replicas."""


def _digest(signature: str) -> str:
    """What the store keeps of a signature: a fixed-size key, and never the signature itself
    (the log holds none either)."""
    return hashlib.sha256(signature.encode()).hexdigest()


def _first(headers: Mapping[str, Sequence[str]], name: str) -> str:
    values = headers.get(name) or [""]
    return values[0]


class SlackInteractions:
    """Buttons and `/gpubot`, for HTTP (`routes`) and Socket Mode (`SocketModeRunner`).

    Owns the bolt `App` (its signing secret, verification always on, its middleware and
    listeners) and the pool that handles acknowledged interactions with the futures still
    running (`wait_idle`, `close`). The signatures it took are the store's, not its own: a
    replica's memory is not where a replay to another replica could be seen.

    Must never acknowledge a request that failed a check, nor make Slack wait for the
    engine: the ack goes first, the work to the pool.
    """

    def __init__(
        self,
        engine: Engine,
        chat: SlackChat,
        settings: SlackSettings,
        *,
        client: WebClient,
        lang: Lang = Lang.EN,
        clock: Clock = utcnow,
        workers: int = 4,
    ) -> None:
        self.engine = engine
        self.chat = chat
        self.settings = settings
        self.client = client
        self.lang = lang
        self.clock = clock
        self._handling = Handling(engine, chat, settings, lang, clock)
        secret = settings.signing_secret.get_secret_value() if settings.signing_secret else None
        if secret is None and settings.mode == "http":
            raise InputError("slack.signing_secret", "required in http mode")
        # Socket Mode has nothing to sign; an unguessable secret keeps the HTTP route shut.
        self._secret = secret or secrets.token_hex(32)
        self._verifier = SignatureVerifier(self._secret)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="slack-work")
        self._pending: set[Future[None]] = set()
        self._pending_lock = threading.Condition()
        token = settings.bot_token.get_secret_value() if settings.bot_token else None

        def authorize(enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
            # One workspace, one token: no auth.test per request, nor when Slack is down.
            return AuthorizeResult(enterprise_id=enterprise_id, team_id=team_id, bot_token=token)

        # bolt copies this client (base URL, timeout) per request and sets the token that
        # `authorize` returns; handing it a token as well only earns a warning.
        template = WebClient(base_url=client.base_url, timeout=client.timeout, retry_handlers=[])
        self.app = App(
            name=BOLT_APP_NAME,
            logger=_bolt_log,
            signing_secret=self._secret,
            client=template,
            authorize=authorize,
            process_before_response=True,
            request_verification_enabled=True,
            ignoring_self_events_enabled=False,
        )
        self.app.use(self._refuse_replays)  # check 3
        self.app.use(self._refuse_foreign_clicks)  # check 4
        for action_id in ACTION_IDS:
            self.app.action(action_id)(self._on_action)
        self.app.command(settings.command)(self._on_command)

    # -- HTTP: check 1, then bolt ---------------------------------------------------------

    def routes(self, path: str = "/slack/events", *, body_timeout_s: float = 10.0) -> list[Route]:
        async def endpoint(request: Request) -> Response:
            return await self._endpoint(request, body_timeout_s)

        return [Route(path, endpoint, methods=["POST"])]

    async def _endpoint(self, request: Request, body_timeout_s: float = 10.0) -> Response:
        try:
            raw = await read_body(request, self.settings.max_body_bytes, body_timeout_s)
        except BodyTooLarge:
            return JSONResponse({"error": "request too large"}, status_code=413)
        except BodyTooSlow:
            return JSONResponse(
                {"error": "request body too slow"}, status_code=408, headers=CLOSE_CONNECTION
            )
        except ClientDisconnect:
            return JSONResponse({"error": "client disconnected"}, status_code=400)
        timestamp = request.headers.get("x-slack-request-timestamp", "")
        signature = request.headers.get("x-slack-signature", "")
        if not TIMESTAMP.fullmatch(timestamp):
            return self._forged(request, raw, "a timestamp that is not Unix seconds")
        try:
            valid = self._verifier.is_valid(raw, timestamp, signature)
        except UnicodeDecodeError:  # slack_sdk decodes the body first; Slack's bodies are ASCII
            valid = False
        if not valid:
            return self._forged(request, raw, f"a bad signature or a stale timestamp {timestamp}")
        try:
            bolt_request = to_bolt_request(request, raw)
        except Exception:  # bolt parses before it verifies; this one is signed, so malformed
            return JSONResponse({"error": "malformed body"}, status_code=400)
        response = await run_in_threadpool(self.app.dispatch, bolt_request)
        return to_starlette_response(response)

    @staticmethod
    def _forged(request: Request, raw: bytes, why: str) -> Response:
        """401, and one short line in the log: never the body, nor the signature sent."""
        client = request.client.host if request.client else "?"
        log.warning("refused a Slack request from %s with %s (%d bytes)", client, why, len(raw))
        return JSONResponse({"error": "invalid request"}, status_code=401)

    # -- before the ack: checks 3 and 4 (bolt ran check 2) ----------------------------------

    def _refuse_replays(
        self, req: BoltRequest, resp: BoltResponse, next: Callable[[], BoltResponse]
    ) -> BoltResponse:
        """Runs after bolt verified the signature and timestamp (HTTP), so the timestamp is
        Unix seconds within 5 minutes of now. Socket Mode has no signature: Slack
        authenticated the websocket."""
        if req.mode != "socket_mode":
            timestamp = _first(req.headers, "x-slack-request-timestamp")
            signature = _first(req.headers, "x-slack-signature")
            sent_at = datetime.fromtimestamp(int(timestamp), UTC)
            try:
                first = self.engine.store.note_signed_request(
                    _digest(signature), sent_at, self.clock() - REPLAY_WINDOW
                )
            except StoreUnavailable:
                return BoltResponse(status=503, body={"error": "store unavailable"})
            if not first:
                log.warning("refused a replayed Slack request (timestamp %s)", timestamp)
                # Slack's way to say a failed delivery must not be sent again (the Events
                # API's retries): this one's first copy was taken, another cannot help.
                no_retry: dict[str, str | Sequence[str]] = {"X-Slack-No-Retry": "1"}
                return BoltResponse(
                    status=401, body={"error": "replayed request"}, headers=no_retry
                )
        next()
        return resp

    def _refuse_foreign_clicks(
        self, req: BoltRequest, resp: BoltResponse, next: Callable[[], BoltResponse]
    ) -> BoltResponse:
        try:
            problem = click_problem(self.engine.store, req.body)
        except StoreUnavailable:
            return BoltResponse(status=503, body={"error": "store unavailable"})
        if problem is not None:
            log.warning("refused a Slack interaction: %s", problem)
            return BoltResponse(status=400, body={"error": problem})
        next()
        return resp

    # -- the ack, then the pool ------------------------------------------------------------

    def _on_action(self, ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        ack()
        click = click_of(body)
        self._submit(lambda: handle_click(self._handling, click, respond))

    def _on_command(self, ack: Ack, command: dict[str, Any], respond: Respond) -> None:
        ack()
        user, text = str(command.get("user_id", "")), str(command.get("text", ""))
        self._submit(lambda: handle_command(self._handling, user, text, respond))

    def _submit(self, work: Callable[[], None]) -> None:
        def run() -> None:
            try:
                work()
            except Exception:
                log.exception("handling a Slack interaction failed")

        future = self._pool.submit(run)
        with self._pending_lock:
            self._pending.add(future)

        def done(f: Future[None]) -> None:
            with self._pending_lock:
                self._pending.discard(f)
                self._pending_lock.notify_all()

        future.add_done_callback(done)

    def wait_idle(self, timeout_s: float = 10.0) -> bool:
        """True once every acknowledged interaction has been handled (for tests, shutdown)."""
        with self._pending_lock:
            return self._pending_lock.wait_for(lambda: not self._pending, timeout_s)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=False)
