"""A Slack Web API double: a real HTTP server on 127.0.0.1 (port 0) for the real clients.

Why it exists: the bot's Slack edge (slack_sdk's `WebClient`, slack-bolt's `respond`) is
tested against a server, never by patching the client (the rule we follow: "fake the server, not the
client"). Point a client at it with `WebClient(token=double.token, base_url=double.url)`;
`url` ends with `/`, as `WebClient` needs (it joins `base_url` and the method name).

What it serves, shaped like Slack's responses (`{"ok": true, ...}`, errors as
`{"ok": false, "error": "..."}` with HTTP 200, as Slack answers):

- `auth.test`; `chat.postMessage` (stores the message, answers `channel`, `ts`, `message`);
  `chat.update`; `chat.postEphemeral` (`message_ts`); `usergroups.users.list` and
  `usergroups.list` (groups configured per test); `conversations.replies`.
- response URLs it hands out (`double.response_url(...)`, also inside the payloads it builds):
  `POST /response/<id>` with Slack's fields (`replace_original`, `delete_original`,
  `response_type`), at most 5 uses each, as Slack allows.

It records every call (`Call`: method, params from query and form or JSON body, headers, raw
body, answer, time), checks the bearer token (`not_authed`, `invalid_auth`), validates blocks
with slack_sdk's own models plus the limits slack_sdk leaves out (50 blocks, unique block ids,
unique action ids per block: `invalid_blocks`), and can be told to fail:
`fail(status=429, retry_after=1, times=3)` answers 429 with `Retry-After` (body
`{"ok": false, "error": "ratelimited"}`) to the next three calls; `outage(seconds)` answers 500
until the double's clock passes the end (inject `clock` to control time instead of sleeping).

It also signs requests exactly as Slack does (`sign`: `v0=` HMAC-SHA256 of `v0:ts:body`),
and builds `block_actions` and slash-command bodies shaped like Slack's documented ones
(`interaction_body` is the url-encoded `payload=` form Slack posts).

Not Slack's wording, and said so here: the error texts for a used-up or unknown response URL
(`used_url`, `expired_url`), and `fatal_error` / `service_unavailable` for injected 5xx. It
does not do files, pagination cursors or scopes per method.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import itertools
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block

DEFAULT_TOKEN = "xoxb-gpubot-test-token"
SIGNING_SECRET = "gpubot-test-signing-secret"
MAX_BLOCKS = 50
MAX_TEXT = 40_000
RESPONSE_URL_USES = 5

Json = dict[str, Any]


@dataclass(frozen=True)
class Call:
    """One request the double received, and what it answered."""

    method: str
    """The API method (`chat.postMessage`), or `response_url` for a response URL post."""
    http_method: str
    path: str
    params: Json
    """Query string and body merged (body wins); JSON bodies keep their types."""
    headers: dict[str, str]
    body: bytes
    status: int
    answer: Json
    at: float

    @property
    def ok(self) -> bool:
        return self.status == 200 and bool(self.answer.get("ok"))

    @property
    def error(self) -> str | None:
        error = self.answer.get("error")
        return error if isinstance(error, str) else None


@dataclass
class _Failure:
    status: int
    retry_after: int | None
    times: int
    methods: Collection[str] | None


@dataclass
class _ResponseUrl:
    channel: str | None
    message_ts: str | None
    user: str | None
    uses: int = 0
    posts: list[Json] = field(default_factory=list)


class _Reply(Exception):
    """Raised inside a method to answer with an error (HTTP 200, like Slack)."""

    def __init__(self, error: str, status: int = 200, **extra: Any) -> None:
        super().__init__(error)
        self.status = status
        self.body: Json = {"ok": False, "error": error, **extra}


class SlackDouble:
    """The Slack Web API on 127.0.0.1; start it with `with SlackDouble() as double:`."""

    def __init__(
        self,
        *,
        token: str = DEFAULT_TOKEN,
        groups: Mapping[str, Collection[str]] | None = None,
        group_handles: Mapping[str, str] | None = None,
        channels: Mapping[str, str] | None = None,
        members: Mapping[str, Collection[str]] | None = None,
        team_id: str = "T0GPUBOT",
        team_domain: str = "gpubot-test",
        bot_user_id: str = "U0GPUBOT",
        bot_id: str = "B0GPUBOT",
        app_id: str = "A0GPUBOT",
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`groups`: user group id → member user ids (`S0ONCALL` → `[U1, U2]`), with
        `group_handles` (id → handle, `gpu-oncall`) for `usergroups.list`. `channels`: channel
        id → name; when given, other channels are `channel_not_found`. `members`: channel id →
        users, for `user_not_in_channel` on ephemeral messages."""
        self.token = token
        self.team_id = team_id
        self.team_domain = team_domain
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.app_id = app_id
        self.clock = clock
        self._groups = {g: list(users) for g, users in (groups or {}).items()}
        self._handles = dict(group_handles or {})
        self._channels = dict(channels) if channels is not None else None
        self._members = {c: set(users) for c, users in (members or {}).items()}
        self._lock = threading.Condition()
        self._calls: list[Call] = []
        self._messages: dict[str, list[Json]] = {}
        self._history: dict[tuple[str, str], list[Json]] = {}
        self._ephemerals: list[Json] = []
        self._response_urls: dict[str, _ResponseUrl] = {}
        self._failures: list[_Failure] = []
        self._outage: tuple[float, int, Collection[str] | None] | None = None
        self._seq = itertools.count(1)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> SlackDouble:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.double = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> SlackDouble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def root(self) -> str:
        if self._server is None:
            raise RuntimeError("the Slack double is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/"

    @property
    def url(self) -> str:
        """The Web API base URL for `WebClient(base_url=...)`: ends with `/`."""
        return self.root + "api/"

    # -- what the test controls ----------------------------------------------------------

    def fail(
        self,
        status: int = 429,
        *,
        retry_after: int | None = 1,
        times: int = 1,
        methods: Collection[str] | None = None,
    ) -> None:
        """Answer the next `times` calls (of `methods`, default all, `response_url`
        included) with `status`; a 429 carries `Retry-After: retry_after`."""
        with self._lock:
            self._failures.append(_Failure(status, retry_after, times, methods))

    def outage(
        self, seconds: float, *, status: int = 500, methods: Collection[str] | None = None
    ) -> None:
        """Answer every call with `status` until `clock()` is `seconds` later than now."""
        with self._lock:
            self._outage = (self.clock() + seconds, status, methods)

    def heal(self) -> None:
        """End every injected failure and outage now."""
        with self._lock:
            self._failures.clear()
            self._outage = None

    def set_group(self, group_id: str, users: Collection[str], handle: str | None = None) -> None:
        with self._lock:
            self._groups[group_id] = list(users)
            if handle:
                self._handles[group_id] = handle

    def response_url(
        self, channel: str | None = None, message_ts: str | None = None, user: str | None = None
    ) -> str:
        """A new response URL, bound (as Slack's are) to the message it may replace and the
        user its ephemeral answers go to."""
        with self._lock:
            rid = f"R{next(self._seq):06d}"
            self._response_urls[rid] = _ResponseUrl(channel, message_ts, user)
        return f"{self.root}response/{rid}"

    # -- what the test reads -------------------------------------------------------------

    @property
    def calls(self) -> list[Call]:
        with self._lock:
            return list(self._calls)

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def wait_for(self, method: str, count: int = 1, timeout: float = 5.0) -> list[Call]:
        """The first `count` calls to `method`, waiting (real time) up to `timeout`."""
        with self._lock:
            done = self._lock.wait_for(
                lambda: sum(c.method == method for c in self._calls) >= count, timeout
            )
            calls = [c for c in self._calls if c.method == method]
        if not done:
            raise AssertionError(f"{len(calls)} call(s) to {method} in {timeout}s, not {count}")
        return calls[:count]

    def messages(self, channel: str | None = None) -> list[Json]:
        """Messages as stored now (updates applied), in the order they were posted."""
        with self._lock:
            chosen = [self._messages.get(channel, [])] if channel else self._messages.values()
            return [copy.deepcopy(m) for ms in chosen for m in ms]

    def message(self, channel: str, ts: str) -> Json:
        with self._lock:
            return copy.deepcopy(self._find(channel, ts))

    def history(self, channel: str, ts: str) -> list[Json]:
        """Every version of one message: as posted, then after each update."""
        with self._lock:
            return copy.deepcopy(self._history.get((channel, ts), []))

    def replies(self, channel: str, thread_ts: str) -> list[Json]:
        return [
            m
            for m in self.messages(channel)
            if m.get("thread_ts") == thread_ts and m["ts"] != thread_ts
        ]

    @property
    def ephemerals(self) -> list[Json]:
        with self._lock:
            return copy.deepcopy(self._ephemerals)

    def response_posts(self, url: str) -> list[Json]:
        rid = url.rstrip("/").rsplit("/", 1)[-1]
        with self._lock:
            return copy.deepcopy(self._response_urls[rid].posts)

    # -- payloads as Slack sends them to the app ----------------------------------------

    def block_actions(
        self,
        channel: str,
        ts: str,
        user_id: str,
        action_id: str,
        value: str | None = None,
        *,
        user_name: str | None = None,
        as_seen: Json | None = None,
    ) -> Json:
        """The `block_actions` payload of `user_id` clicking the `action_id` button (the one
        with `value`, if several) of the stored message, with a fresh response URL bound to
        that message. A `value` no button has is sent as given: that is what a tampered
        click looks like. `as_seen`: the message as a client that has not redrawn it since
        an update still shows it (Slack sends that copy with the click)."""
        message = as_seen if as_seen is not None else self.message(channel, ts)
        buttons = [
            (block.get("block_id"), element)
            for block in message.get("blocks", [])
            if block.get("type") == "actions"
            for element in block.get("elements", [])
            if element.get("action_id") == action_id
        ]
        if not buttons:
            raise LookupError(f"no {action_id} button in message {channel}/{ts}")
        block_id, button = next(
            ((b, e) for b, e in buttons if value is None or e.get("value") == value), buttons[0]
        )
        action = {
            "action_id": action_id,
            "block_id": block_id,
            "text": button.get("text"),
            "value": button.get("value") if value is None else value,
            "type": button.get("type", "button"),
            "action_ts": f"{self.clock():.6f}",
        }
        if "style" in button:
            action["style"] = button["style"]
        return block_actions_payload(
            actions=[action],
            user_id=user_id,
            user_name=user_name,
            channel_id=channel,
            channel_name=self._channel_name(channel),
            message=message,
            response_url=self.response_url(channel, ts, user_id),
            team_id=self.team_id,
            team_domain=self.team_domain,
            api_app_id=self.app_id,
            trigger_id=self._trigger_id(),
        )

    def slash_command(
        self, text: str, user_id: str, channel_id: str, *, command: str = "/gpubot"
    ) -> dict[str, str]:
        """The form fields of `/gpubot text` typed by `user_id` in `channel_id`."""
        return slash_command_fields(
            command=command,
            text=text,
            user_id=user_id,
            channel_id=channel_id,
            channel_name=self._channel_name(channel_id),
            response_url=self.response_url(channel_id, None, user_id),
            trigger_id=self._trigger_id(),
            team_id=self.team_id,
            team_domain=self.team_domain,
            api_app_id=self.app_id,
        )

    # -- the server side -------------------------------------------------------------------

    def _channel_name(self, channel: str) -> str:
        return (self._channels or {}).get(channel, "gpubot-test")

    def _trigger_id(self) -> str:
        n = next(self._seq)
        return f"{n}.{self.team_id}.{hashlib.sha256(str(n).encode()).hexdigest()[:32]}"

    def _ts(self) -> str:
        return f"{int(self.clock())}.{next(self._seq) % 1_000_000:06d}"

    def _find(self, channel: str, ts: str) -> Json:
        for message in self._messages.get(channel, []):
            if message["ts"] == ts:
                return message
        raise _Reply("message_not_found")

    def _injected(self, method: str) -> tuple[int, Json, dict[str, str]] | None:
        if self._outage is not None:
            until, status, methods = self._outage
            if self.clock() >= until:
                self._outage = None
            elif methods is None or method in methods:
                return status, {"ok": False, "error": _server_error(status)}, {}
        for failure in self._failures:
            if failure.methods is not None and method not in failure.methods:
                continue
            failure.times -= 1
            if failure.times <= 0:
                self._failures.remove(failure)
            if failure.status == 429:
                headers = {}
                if failure.retry_after is not None:
                    headers["Retry-After"] = str(failure.retry_after)
                return 429, {"ok": False, "error": "ratelimited"}, headers
            return failure.status, {"ok": False, "error": _server_error(failure.status)}, {}
        return None

    def handle(
        self, http_method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, Json, dict[str, str]]:
        """Answer one request (the HTTP handler calls this), and record it."""
        parts = urlsplit(path)
        if parts.path.startswith("/api/"):
            method = parts.path[len("/api/") :]
        elif parts.path.startswith("/response/"):
            method = "response_url"
        else:
            method = parts.path
        params: Json = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        with self._lock:
            try:
                params.update(_body_params(headers, body))
                injected = self._injected(method)
                if injected is not None:
                    status, answer, extra = injected
                elif method == "response_url":
                    status, answer, extra = 200, self._respond(parts.path, params), {}
                else:
                    status, answer, extra = 200, self._api(method, params, headers), {}
                    if method == "auth.test":
                        extra = {"x-oauth-scopes": "chat:write,commands,usergroups:read"}
            except _Reply as reply:
                status, answer, extra = reply.status, reply.body, {}
            self._calls.append(
                Call(
                    method=method,
                    http_method=http_method,
                    path=path,
                    params=params,
                    headers=headers,
                    body=body,
                    status=status,
                    answer=answer,
                    at=self.clock(),
                )
            )
            self._lock.notify_all()
        return status, answer, extra

    def _api(self, method: str, params: Json, headers: dict[str, str]) -> Json:
        handler = _METHODS.get(method)
        if handler is None:
            raise _Reply("unknown_method", status=404, req_method=method)
        auth = headers.get("authorization", "")
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else params.get("token")
        if not token:
            raise _Reply("not_authed")
        if token != self.token:
            raise _Reply("invalid_auth")
        return handler(self, params)

    def _channel(self, params: Json) -> str:
        channel = params.get("channel")
        if not isinstance(channel, str) or not channel:
            raise _Reply("channel_not_found")
        if self._channels is not None and channel not in self._channels:
            raise _Reply("channel_not_found")
        return channel

    def _content(self, params: Json) -> Json:
        """`text`, `blocks`, `attachments` of a message, checked as Slack checks them."""
        content: Json = {}
        text = params.get("text")
        if isinstance(text, str) and text:
            if len(text) > MAX_TEXT:
                raise _Reply("msg_too_long")
            content["text"] = text
        for key in ("blocks", "attachments"):
            if key not in params:
                continue
            value = params[key]
            if isinstance(value, str):
                try:
                    value = json.loads(value) if value else []
                except json.JSONDecodeError as error:
                    raise _Reply(f"invalid_{key}_format") from error
            if not isinstance(value, list):
                raise _Reply(f"invalid_{key}_format")
            if key == "blocks":
                problem = blocks_problem(value)
                if problem:
                    raise _Reply("invalid_blocks", errors=[problem])
            content[key] = value
        if not (content.get("text") or content.get("blocks") or content.get("attachments")):
            raise _Reply("no_text")
        return content

    def _post(self, channel: str, content: Json, thread_ts: str | None) -> Json:
        ts = self._ts()
        message: Json = {
            "type": "message",
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "app_id": self.app_id,
            "team": self.team_id,
            "text": content.get("text", ""),
            "ts": ts,
            **{k: v for k, v in content.items() if k != "text"},
        }
        if thread_ts:
            message["thread_ts"] = thread_ts
            for parent in self._messages.get(channel, []):
                if parent["ts"] == thread_ts:
                    parent["thread_ts"] = thread_ts
                    parent["reply_count"] = parent.get("reply_count", 0) + 1
                    parent["latest_reply"] = ts
        self._messages.setdefault(channel, []).append(message)
        self._history[(channel, ts)] = [copy.deepcopy(message)]
        return message

    def _update(self, channel: str, ts: str, content: Json) -> Json:
        message = self._find(channel, ts)
        for key in ("text", "blocks", "attachments"):
            if key in content:
                message[key] = content[key]
        message["edited"] = {"user": self.bot_user_id, "ts": self._ts()}
        self._history[(channel, ts)].append(copy.deepcopy(message))
        return message

    def _respond(self, path: str, params: Json) -> Json:
        rid = path.rstrip("/").rsplit("/", 1)[-1]
        hook = self._response_urls.get(rid)
        if hook is None:
            raise _Reply("expired_url", status=404)
        if hook.uses >= RESPONSE_URL_USES:
            raise _Reply("used_url", status=404)
        hook.uses += 1
        hook.posts.append(copy.deepcopy(params))
        if params.get("delete_original") in (True, "true"):
            if hook.channel is None or hook.message_ts is None:
                raise _Reply("message_not_found", status=404)
            messages = self._messages.get(hook.channel, [])
            messages.remove(self._find(hook.channel, hook.message_ts))
            return {"ok": True}
        try:
            content = self._content(params)
        except _Reply as reply:
            reply.status = 400
            raise
        if params.get("replace_original") in (True, "true"):
            if hook.channel is None or hook.message_ts is None:
                raise _Reply("message_not_found", status=404)
            self._update(hook.channel, hook.message_ts, content)
        elif params.get("response_type") == "in_channel":
            if hook.channel is None:
                raise _Reply("channel_not_found", status=404)
            thread_ts = params.get("thread_ts")
            self._post(hook.channel, content, thread_ts if isinstance(thread_ts, str) else None)
        else:
            self._ephemerals.append(
                {"channel": hook.channel, "user": hook.user, "message_ts": self._ts(), **content}
            )
        return {"ok": True}


# -- Web API methods ----------------------------------------------------------------------


def _auth_test(double: SlackDouble, params: Json) -> Json:
    return {
        "ok": True,
        "url": f"https://{double.team_domain}.slack.com/",
        "team": "gpubot test",
        "user": "gpubot",
        "team_id": double.team_id,
        "user_id": double.bot_user_id,
        "bot_id": double.bot_id,
        "is_enterprise_install": False,
    }


def _post_message(double: SlackDouble, params: Json) -> Json:
    channel = double._channel(params)
    content = double._content(params)
    thread_ts = params.get("thread_ts")
    message = double._post(channel, content, thread_ts if isinstance(thread_ts, str) else None)
    return {"ok": True, "channel": channel, "ts": message["ts"], "message": copy.deepcopy(message)}


def _update(double: SlackDouble, params: Json) -> Json:
    channel = double._channel(params)
    ts = params.get("ts")
    if not isinstance(ts, str):
        raise _Reply("message_not_found")
    message = double._update(channel, ts, double._content(params))
    return {
        "ok": True,
        "channel": channel,
        "ts": ts,
        "text": message["text"],
        "message": copy.deepcopy(message),
    }


def _post_ephemeral(double: SlackDouble, params: Json) -> Json:
    channel = double._channel(params)
    user = params.get("user")
    if not isinstance(user, str) or not user:
        raise _Reply("user_not_found")
    if channel in double._members and user not in double._members[channel]:
        raise _Reply("user_not_in_channel")
    content = double._content(params)
    ts = double._ts()
    thread_ts = params.get("thread_ts")
    double._ephemerals.append(
        {"channel": channel, "user": user, "message_ts": ts, "thread_ts": thread_ts, **content}
    )
    return {"ok": True, "message_ts": ts}


def _usergroup_users(double: SlackDouble, params: Json) -> Json:
    group = params.get("usergroup")
    if not isinstance(group, str) or group not in double._groups:
        raise _Reply("no_such_subteam")
    return {"ok": True, "users": list(double._groups[group])}


def _usergroups(double: SlackDouble, params: Json) -> Json:
    with_users = str(params.get("include_users", "")).lower() in ("1", "true")
    groups = []
    for group_id, users in double._groups.items():
        handle = double._handles.get(group_id, group_id.lower())
        group: Json = {
            "id": group_id,
            "team_id": double.team_id,
            "is_usergroup": True,
            "name": handle,
            "handle": handle,
            "user_count": str(len(users)),
        }
        if with_users:
            group["users"] = list(users)
        groups.append(group)
    return {"ok": True, "usergroups": groups}


def _replies(double: SlackDouble, params: Json) -> Json:
    channel = double._channel(params)
    ts = params.get("ts")
    if not isinstance(ts, str):
        raise _Reply("thread_not_found")
    try:
        parent = double._find(channel, ts)
    except _Reply as error:
        raise _Reply("thread_not_found") from error
    replies = [m for m in double._messages[channel] if m.get("thread_ts") == ts and m["ts"] != ts]
    return {"ok": True, "messages": copy.deepcopy([parent, *replies]), "has_more": False}


_METHODS: dict[str, Callable[[SlackDouble, Json], Json]] = {
    "auth.test": _auth_test,
    "chat.postMessage": _post_message,
    "chat.update": _update,
    "chat.postEphemeral": _post_ephemeral,
    "usergroups.users.list": _usergroup_users,
    "usergroups.list": _usergroups,
    "conversations.replies": _replies,
}


def _server_error(status: int) -> str:
    return {500: "fatal_error", 503: "service_unavailable"}.get(status, "internal_error")


def _body_params(headers: dict[str, str], body: bytes) -> Json:
    if not body:
        return {}
    content_type = headers.get("content-type", "")
    if content_type.startswith("application/json"):
        try:
            parsed = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise _Reply("invalid_json") from error
        if not isinstance(parsed, dict):
            raise _Reply("invalid_json")
        return parsed
    if content_type.startswith("application/x-www-form-urlencoded"):
        fields = parse_qs(body.decode(), keep_blank_values=True)
        return {k: v[0] for k, v in fields.items()}
    raise _Reply("invalid_form_data")


def blocks_problem(blocks: list[Any]) -> str | None:
    """Why Slack would answer `invalid_blocks`, or None: slack_sdk's validators, and what
    they leave out (the 50-block limit, unique block ids, unique action ids per block)."""
    if len(blocks) > MAX_BLOCKS:
        return f"no more than {MAX_BLOCKS} items allowed [json-pointer:/blocks]"
    block_ids: set[str] = set()
    for n, raw in enumerate(blocks):
        if not isinstance(raw, dict) or "type" not in raw:
            return f"must be a block object [json-pointer:/blocks/{n}]"
        parsed = Block.parse(raw)
        if parsed is None:
            return f"unknown block type {raw.get('type')!r} [json-pointer:/blocks/{n}]"
        try:
            parsed.to_dict()
        except SlackObjectFormationError as error:
            return f"{error} [json-pointer:/blocks/{n}]"
        block_id = raw.get("block_id")
        if isinstance(block_id, str):
            if block_id in block_ids:
                return f"duplicate block_id {block_id!r} [json-pointer:/blocks/{n}]"
            block_ids.add(block_id)
        action_ids = [e.get("action_id") for e in raw.get("elements", []) if isinstance(e, dict)]
        named = [a for a in action_ids if a]
        if len(named) != len(set(named)):
            return f"duplicate action_id [json-pointer:/blocks/{n}/elements]"
    return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    double: SlackDouble


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        status, answer, extra = self.server.double.handle(self.command, self.path, headers, body)
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for key, value in extra.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = _serve
    do_POST = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass


# -- what Slack sends to the app ----------------------------------------------------------


def signature(body: str | bytes, secret: str, timestamp: str) -> str:
    """Slack's request signature: `v0=` + hex HMAC-SHA256 of `v0:{timestamp}:{body}`.

    Written out here rather than taken from slack_sdk, so that the test that
    `SignatureVerifier` accepts it checks two implementations against each other."""
    raw = body.encode() if isinstance(body, str) else body
    base = b"v0:" + timestamp.encode() + b":" + raw
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def sign(
    body: str | bytes,
    secret: str = SIGNING_SECRET,
    timestamp: float | None = None,
    *,
    content_type: str = "application/x-www-form-urlencoded",
) -> dict[str, str]:
    """The headers Slack sends with a request to the app: timestamp (now, unless given:
    pass an old one for a stale request) and signature."""
    ts = str(int(time.time() if timestamp is None else timestamp))
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature(body, secret, ts),
    }


def interaction_body(payload: Json) -> str:
    """An interaction as Slack posts it: url-encoded `payload=<json>`."""
    return urlencode({"payload": json.dumps(payload)})


def form_body(fields: Mapping[str, str]) -> str:
    """A slash command as Slack posts it: url-encoded form fields."""
    return urlencode(dict(fields))


def block_actions_payload(
    *,
    actions: list[Json],
    user_id: str,
    channel_id: str,
    message: Json | None,
    response_url: str,
    user_name: str | None = None,
    channel_name: str = "gpubot-test",
    team_id: str = "T0GPUBOT",
    team_domain: str = "gpubot-test",
    api_app_id: str = "A0GPUBOT",
    trigger_id: str = "1.T0GPUBOT.trigger",
) -> Json:
    """A `block_actions` payload shaped like Slack's documented one (button in a message)."""
    name = user_name or user_id.lower()
    return {
        "type": "block_actions",
        "user": {"id": user_id, "username": name, "name": name, "team_id": team_id},
        "api_app_id": api_app_id,
        "token": "verification-token-deprecated",
        "container": {
            "type": "message",
            "message_ts": (message or {}).get("ts"),
            "channel_id": channel_id,
            "is_ephemeral": False,
        },
        "trigger_id": trigger_id,
        "team": {"id": team_id, "domain": team_domain},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel_id, "name": channel_name},
        "message": message,
        "state": {"values": {}},
        "response_url": response_url,
        "actions": actions,
    }


def slash_command_fields(
    *,
    command: str,
    text: str,
    user_id: str,
    channel_id: str,
    response_url: str,
    trigger_id: str = "1.T0GPUBOT.trigger",
    user_name: str | None = None,
    channel_name: str = "gpubot-test",
    team_id: str = "T0GPUBOT",
    team_domain: str = "gpubot-test",
    api_app_id: str = "A0GPUBOT",
) -> dict[str, str]:
    """The form fields of a slash command, as Slack documents them."""
    return {
        "token": "verification-token-deprecated",
        "team_id": team_id,
        "team_domain": team_domain,
        "channel_id": channel_id,
        "channel_name": channel_name,
        "user_id": user_id,
        "user_name": user_name or user_id.lower(),
        "command": command,
        "text": text,
        "api_app_id": api_app_id,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id,
    }


def post_signed(
    url: str,
    body: str,
    secret: str = SIGNING_SECRET,
    *,
    timestamp: float | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> tuple[int, dict[str, str], bytes]:
    """POST `body` to the app as Slack would, signed; returns status, headers and body
    (4xx and 5xx too, never raising for them)."""
    all_headers = {**sign(body, secret, timestamp), **(headers or {})}
    request = urllib.request.Request(url, data=body.encode(), headers=all_headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers.items()), error.read()
