"""The Slack double, proven with the real clients: slack_sdk's `WebClient` and
`WebhookClient` talk to it over HTTP, and its signatures pass slack_sdk's `SignatureVerifier`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from urllib.parse import parse_qs

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import (
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)
from slack_sdk.http_retry.builtin_interval_calculators import FixedValueRetryIntervalCalculator
from slack_sdk.models.blocks import ActionsBlock, ButtonElement, SectionBlock
from slack_sdk.signature import SignatureVerifier
from slack_sdk.webhook import WebhookClient

from tests.helpers.clocks import FakeClock
from tests.helpers.paths import NOW
from tests.helpers.slack_double import (
    SIGNING_SECRET,
    SlackDouble,
    form_body,
    interaction_body,
    post_signed,
    sign,
    signature,
)

CHANNEL = "C0GPUALERTS"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def double(clock: FakeClock) -> Iterator[SlackDouble]:
    with SlackDouble(
        groups={"S0ONCALL": ["U0ALICE", "U0BOB"]},
        group_handles={"S0ONCALL": "gpu-oncall"},
        members={CHANNEL: {"U0ALICE", "U0BOB"}},
        clock=clock.time,
    ) as running:
        yield running


@pytest.fixture
def client(double: SlackDouble) -> WebClient:
    assert double.url.endswith("/api/")
    return WebClient(token=double.token, base_url=double.url, timeout=5)


def _message_blocks(text: str = "gpu-a2 has no GPUs") -> list[dict[str, object]]:
    return [
        SectionBlock(block_id="summary", text=text).to_dict(),
        ActionsBlock(
            block_id="gpubot.request.r1",
            elements=[
                ButtonElement(text="Approve cordon", action_id="gpubot.approve", value="r1"),
                ButtonElement(text="Deny", action_id="gpubot.deny", value="r1"),
            ],
        ).to_dict(),
    ]


def test_the_web_client_posts_threads_updates_and_reads_back(
    double: SlackDouble, client: WebClient
) -> None:
    me = client.auth_test()
    assert (me["user_id"], me["team_id"], me["bot_id"]) == ("U0GPUBOT", "T0GPUBOT", "B0GPUBOT")
    assert "chat:write" in me.headers["x-oauth-scopes"]

    posted = client.chat_postMessage(channel=CHANNEL, text="fallback", blocks=_message_blocks())
    assert posted["ok"] and posted["channel"] == CHANNEL
    ts = posted["ts"]
    assert posted["message"]["ts"] == ts and posted["message"]["bot_id"] == "B0GPUBOT"
    assert posted["message"]["blocks"] == _message_blocks()

    reply = client.chat_postMessage(channel=CHANNEL, text="evicted 37/110", thread_ts=ts)
    thread = client.conversations_replies(channel=CHANNEL, ts=ts)
    assert [m["ts"] for m in thread["messages"]] == [ts, reply["ts"]]
    assert thread["messages"][0]["reply_count"] == 1

    updated = client.chat_update(
        channel=CHANNEL, ts=ts, text="decided", blocks=_message_blocks("✅ approved")
    )
    assert (updated["ts"], updated["text"]) == (ts, "decided")
    assert double.message(CHANNEL, ts)["blocks"][0]["text"]["text"] == "✅ approved"
    assert [v["text"] for v in double.history(CHANNEL, ts)] == ["fallback", "decided"]

    ephemeral = client.chat_postEphemeral(channel=CHANNEL, user="U0ALICE", text="not allowed")
    assert ephemeral["message_ts"]
    assert double.ephemerals[0]["user"] == "U0ALICE"
    assert double.ephemerals[0]["text"] == "not allowed"

    assert client.usergroups_users_list(usergroup="S0ONCALL")["users"] == ["U0ALICE", "U0BOB"]
    groups = client.usergroups_list(include_users=True)["usergroups"]
    assert [(g["id"], g["handle"], g["users"]) for g in groups] == [
        ("S0ONCALL", "gpu-oncall", ["U0ALICE", "U0BOB"])
    ]
    with pytest.raises(SlackApiError) as unknown_group:
        client.usergroups_users_list(usergroup="S0NOBODY")
    assert unknown_group.value.response["error"] == "no_such_subteam"

    # every call recorded, as the client sent it
    assert [c.method for c in double.calls] == [
        "auth.test",
        "chat.postMessage",
        "chat.postMessage",
        "conversations.replies",
        "chat.update",
        "chat.postEphemeral",
        "usergroups.users.list",
        "usergroups.list",
        "usergroups.users.list",
    ]
    first_post = double.calls_to("chat.postMessage")[0]
    assert first_post.headers["authorization"] == f"Bearer {double.token}"
    assert first_post.headers["content-type"].startswith("application/json")
    assert first_post.params["blocks"] == _message_blocks()  # JSON body: types kept
    assert first_post.at == 1_796_180_400.0 and first_post.ok
    group_call = double.calls_to("usergroups.users.list")[0]
    assert group_call.params == {"usergroup": "S0ONCALL"}  # the query string


def test_a_wrong_or_missing_token_is_refused(double: SlackDouble) -> None:
    with pytest.raises(SlackApiError) as wrong:
        WebClient(token="xoxb-wrong", base_url=double.url).chat_postMessage(
            channel=CHANNEL, text="x"
        )
    assert wrong.value.response.status_code == 200
    assert wrong.value.response.data == {"ok": False, "error": "invalid_auth"}
    with pytest.raises(SlackApiError) as missing:
        WebClient(base_url=double.url).auth_test()
    assert missing.value.response["error"] == "not_authed"
    assert double.messages() == []


def test_429_with_retry_after_is_honoured_by_slack_sdks_retry_handler(
    double: SlackDouble,
) -> None:
    double.fail(status=429, retry_after=1, times=1)
    client = WebClient(
        token=double.token,
        base_url=double.url,
        retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=2)],
    )
    started = time.monotonic()
    posted = client.chat_postMessage(channel=CHANNEL, text="after the limit")
    assert time.monotonic() - started >= 1.0  # it waited Retry-After
    assert posted["ok"]
    attempts = double.calls_to("chat.postMessage")
    assert [(c.status, c.error) for c in attempts] == [(429, "ratelimited"), (200, None)]
    assert [m["text"] for m in double.messages(CHANNEL)] == ["after the limit"]


def test_429_without_a_retry_handler_is_an_error_carrying_retry_after(
    double: SlackDouble, client: WebClient
) -> None:
    double.fail(status=429, retry_after=3, times=2, methods={"chat.postMessage"})
    client.auth_test()  # not one of the failing methods
    for _ in range(2):
        with pytest.raises(SlackApiError) as limited:
            client.chat_postMessage(channel=CHANNEL, text="x")
        response = limited.value.response
        assert response.status_code == 429
        assert response.headers["Retry-After"] == "3"
        assert response["error"] == "ratelimited"
    assert double.messages() == []
    assert client.chat_postMessage(channel=CHANNEL, text="x")["ok"]


def test_an_outage_answers_500_until_the_clock_passes_it(
    double: SlackDouble, client: WebClient, clock: FakeClock
) -> None:
    double.outage(60)
    for _ in range(3):
        with pytest.raises(SlackApiError) as down:
            client.chat_postMessage(channel=CHANNEL, text="during")
        assert down.value.response.status_code == 500
    with pytest.raises(SlackApiError):
        client.auth_test()
    clock.advance(61)
    assert client.chat_postMessage(channel=CHANNEL, text="after")["ok"]
    assert [m["text"] for m in double.messages()] == ["after"]

    double.fail(status=503, times=1)
    retrying = WebClient(
        token=double.token,
        base_url=double.url,
        retry_handlers=[
            ServerErrorRetryHandler(
                max_retry_count=1, interval_calculator=FixedValueRetryIntervalCalculator(0.01)
            )
        ],
    )
    assert retrying.chat_postMessage(channel=CHANNEL, text="retried")["ok"]
    assert [c.status for c in double.calls_to("chat.postMessage")][-2:] == [503, 200]


def test_what_slack_refuses_the_double_refuses(double: SlackDouble, client: WebClient) -> None:
    section = SectionBlock(text="x").to_dict()
    too_long = {"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}
    duplicate = {
        "type": "actions",
        "elements": [
            {"type": "button", "text": {"type": "plain_text", "text": t}, "action_id": "same"}
            for t in ("a", "b")
        ],
    }
    refused = {
        "51 blocks": [section] * 51,
        "3001 characters": [too_long],
        "one action id twice": [duplicate],
        "one block id twice": [{**section, "block_id": "b"}, {**section, "block_id": "b"}],
        "no such block": [{"type": "sparkles"}],
    }
    for why, blocks in refused.items():
        with pytest.raises(SlackApiError) as error:
            client.chat_postMessage(channel=CHANNEL, text="x", blocks=blocks)
        assert error.value.response["error"] == "invalid_blocks", why
    missing_text = pytest.warns(UserWarning, match="`text` argument is missing")
    with missing_text, pytest.raises(SlackApiError) as empty:
        client.chat_postMessage(channel=CHANNEL)
    assert empty.value.response["error"] == "no_text"
    with pytest.raises(SlackApiError) as stranger:
        client.chat_postEphemeral(channel=CHANNEL, user="U0MALLORY", text="x")
    assert stranger.value.response["error"] == "user_not_in_channel"
    with pytest.raises(SlackApiError) as gone:
        client.chat_update(channel=CHANNEL, ts="1.000001", text="x")
    assert gone.value.response["error"] == "message_not_found"
    with pytest.raises(SlackApiError) as unknown:
        client.api_call("gpubot.nothing")
    assert unknown.value.response.status_code == 404
    assert unknown.value.response["error"] == "unknown_method"
    assert double.messages() == []

    with SlackDouble(channels={CHANNEL: "gpu-alerts"}) as strict:
        other = WebClient(token=strict.token, base_url=strict.url)
        with pytest.raises(SlackApiError) as nowhere:
            other.chat_postMessage(channel="C0ELSEWHERE", text="x")
        assert nowhere.value.response["error"] == "channel_not_found"


def test_a_click_payload_and_its_response_url_work_like_slacks(
    double: SlackDouble, client: WebClient
) -> None:
    ts = client.chat_postMessage(channel=CHANNEL, text="t", blocks=_message_blocks())["ts"]
    payload = double.block_actions(CHANNEL, ts, "U0ALICE", "gpubot.approve")
    assert payload["type"] == "block_actions"
    assert payload["user"]["id"] == "U0ALICE" and payload["team"]["id"] == "T0GPUBOT"
    assert payload["container"] == {
        "type": "message",
        "message_ts": ts,
        "channel_id": CHANNEL,
        "is_ephemeral": False,
    }
    assert payload["channel"]["id"] == CHANNEL
    assert payload["message"]["blocks"] == _message_blocks()
    [action] = payload["actions"]
    assert (action["action_id"], action["block_id"], action["value"], action["type"]) == (
        "gpubot.approve",
        "gpubot.request.r1",
        "r1",
        "button",
    )
    assert action["text"]["text"] == "Approve cordon"
    tampered = double.block_actions(CHANNEL, ts, "U0ALICE", "gpubot.approve", value="r999")
    assert tampered["actions"][0]["value"] == "r999"
    with pytest.raises(LookupError):
        double.block_actions(CHANNEL, ts, "U0ALICE", "gpubot.nothing")

    hook = WebhookClient(payload["response_url"])
    answer = hook.send(text="decided", blocks=_message_blocks("✅ approved"), replace_original=True)
    assert answer.status_code == 200 and json.loads(answer.body) == {"ok": True}
    assert double.message(CHANNEL, ts)["blocks"][0]["text"]["text"] == "✅ approved"
    assert hook.send(text="only you see this").status_code == 200
    assert double.ephemerals[-1]["user"] == "U0ALICE"
    assert hook.send(text="for all", response_type="in_channel").status_code == 200
    assert double.messages(CHANNEL)[-1]["text"] == "for all"
    assert [p["text"] for p in double.response_posts(payload["response_url"])] == [
        "decided",
        "only you see this",
        "for all",
    ]
    assert [c.method for c in double.calls][-3:] == ["response_url"] * 3
    for _ in range(2):
        assert hook.send(text="more").status_code == 200
    assert hook.send(text="a sixth use").status_code == 404
    assert WebhookClient(double.root + "response/R999999").send(text="x").status_code == 404


def test_interactions_and_slash_commands_are_form_encoded_as_slack_sends_them(
    double: SlackDouble, client: WebClient
) -> None:
    ts = client.chat_postMessage(channel=CHANNEL, text="t", blocks=_message_blocks())["ts"]
    payload = double.block_actions(CHANNEL, ts, "U0BOB", "gpubot.deny")
    body = interaction_body(payload)
    assert body.startswith("payload=")
    assert json.loads(parse_qs(body)["payload"][0]) == payload

    fields = double.slash_command("drain gpu-a2", "U0ALICE", CHANNEL)
    assert {
        "token",
        "team_id",
        "team_domain",
        "channel_id",
        "channel_name",
        "user_id",
        "user_name",
        "command",
        "text",
        "api_app_id",
        "is_enterprise_install",
        "response_url",
        "trigger_id",
    } == set(fields)
    assert (fields["command"], fields["text"], fields["user_id"]) == (
        "/gpubot",
        "drain gpu-a2",
        "U0ALICE",
    )
    assert {k: v[0] for k, v in parse_qs(form_body(fields)).items()} == fields
    WebhookClient(fields["response_url"]).send(text="drain gpu-a2 needs an approver")
    assert double.ephemerals[-1] == {
        "channel": CHANNEL,
        "user": "U0ALICE",
        "message_ts": double.ephemerals[-1]["message_ts"],
        "text": "drain gpu-a2 needs an approver",
    }


def test_signatures_verify_with_slack_sdk_and_tampering_or_age_does_not() -> None:
    body = interaction_body({"type": "block_actions", "actions": [{"value": "r1"}]})
    headers = sign(body)
    verifier = SignatureVerifier(SIGNING_SECRET)
    assert verifier.is_valid_request(body, headers)
    assert headers["X-Slack-Signature"] == verifier.generate_signature(
        timestamp=headers["X-Slack-Request-Timestamp"], body=body
    )
    assert not verifier.is_valid_request(body.replace("r1", "r2"), headers)
    assert not SignatureVerifier("another-secret").is_valid_request(body, headers)
    stale = sign(body, timestamp=time.time() - 6 * 60)
    assert not verifier.is_valid_request(body, stale)
    assert signature(body.encode(), SIGNING_SECRET, "1") == signature(body, SIGNING_SECRET, "1")


def test_post_signed_sends_slacks_headers_and_returns_4xx(double: SlackDouble) -> None:
    body = form_body({"command": "/gpubot", "text": "help"})
    status, _, answer = post_signed(double.root + "slack/events", body)
    assert status == 404 and json.loads(answer)["error"] == "unknown_method"
    [call] = double.calls
    assert call.body == body.encode()
    assert SignatureVerifier(SIGNING_SECRET).is_valid_request(call.body, call.headers)


def test_concurrent_posts_each_get_their_own_ts(double: SlackDouble, client: WebClient) -> None:
    def post(n: int) -> None:
        client.chat_postMessage(channel=CHANNEL, text=f"m{n}")

    threads = [threading.Thread(target=post, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    calls = double.wait_for("chat.postMessage", count=20)
    for thread in threads:
        thread.join()
    assert len({c.answer["ts"] for c in calls}) == 20
    assert sorted(m["text"] for m in double.messages(CHANNEL)) == sorted(f"m{n}" for n in range(20))
