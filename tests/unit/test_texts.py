"""The zh/en catalogue: every sentence in both languages, with the same blanks to fill."""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from string import Formatter
from typing import get_args

import pytest

from bot.incidents.lifecycle import supersession, withdrawal, withdrawal_text
from bot.model import IncidentState, Lang, Severity, Stage, TimelineKind
from bot.texts import KINDS, PARTS, SEVERITIES, STAGES, STATES, TEXTS, say


def _blanks(template: str) -> set[str]:
    return {name for _, name, _, _ in Formatter().parse(template) if name is not None}


def _words(template: str) -> str:
    """The template's own words: blanks, flags and quoted commands left out."""
    text = re.sub(r"\{[^}]*\}|`[^`]*`|--[\w-]+", "", template)
    return " ".join(re.findall(r"[A-Za-z]{3,}", text))


SAME_IN_BOTH: dict[str, str] = {
    "metrics.xid": "`GPU 3: Xid 79`: GPU and Xid are names, the same in Chinese; only the "
    "colon is Chinese",
}
"""Keys whose Chinese holds no Chinese word, and why that is no untranslated sentence."""


@pytest.mark.parametrize("key", sorted(TEXTS))
def test_every_sentence_is_in_both_languages_with_the_same_blanks(key: str) -> None:
    texts = TEXTS[key]
    assert set(texts) == set(Lang), f"{key} is not in every language"
    assert all(t.strip() for t in texts.values()), f"{key} has an empty text"
    assert _blanks(texts[Lang.EN]) == _blanks(texts[Lang.ZH]), f"{key}: different blanks"
    if key in SAME_IN_BOTH:
        assert texts[Lang.ZH] != texts[Lang.EN], f"{key}: untranslated zh"
    elif _words(texts[Lang.EN]):
        # Chinese that is the English sentence again is an untranslated sentence.
        assert re.search(r"[\u4e00-\u9fff]", texts[Lang.ZH]), f"{key}: untranslated zh"


def test_every_stage_state_and_timeline_kind_has_a_name_in_both_languages() -> None:
    for names, codes in (
        (STAGES, list(Stage)),
        (STATES, list(IncidentState)),
        (KINDS, list(get_args(TimelineKind))),
        (SEVERITIES, list(Severity)),
    ):
        assert set(names) == set(codes)
        for code in codes:
            assert set(names[code]) == set(Lang), code  # type: ignore[index]
            assert re.search(r"[\u4e00-\u9fff]", names[code][Lang.ZH]), code  # type: ignore[index]


def _keys_written(part: str) -> list[str]:
    """The keys of a part's `TEXTS` as its source writes them, repeats included: a dict
    literal keeps the last of two equal keys without a word."""
    tree = ast.parse(Path(str(sys.modules[part].__file__)).read_text())
    for node in tree.body:
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "TEXTS"
            and isinstance(node.value, ast.Dict)
        ):
            return [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
    raise AssertionError(f"{part} writes no TEXTS dict")


def test_every_key_is_written_once_in_one_part_of_the_catalogue() -> None:
    """Two parts (or one part twice) holding a key would say one of the sentences never."""
    written = [key for part in PARTS for key in _keys_written(part)]
    assert sorted(k for k, n in Counter(written).items() if n > 1) == []
    assert set(written) == set(TEXTS)
    assert sum(len(texts) for texts in PARTS.values()) == len(TEXTS)


def test_say_fills_the_sentence_in_the_language_asked() -> None:
    assert say(Lang.EN, "exec.gate.passed", node="gpu-a2") == "health gate passed for gpu-a2"
    assert say(Lang.ZH, "exec.gate.passed", node="gpu-a2") == "gpu-a2 的健康门禁通过"


# ---- English that bypasses the catalogue ------------------------------------------------------

SPEAKING = [
    "bot/chat",
    "bot/pipeline",
    "bot/approval",
    "bot/acting",
    "bot/gate",
    "bot/incidents",
    "bot/roots/serve.py",
    "bot/roots/demo.py",
    "bot/diagnose.py",
    "bot/facts/metric_lines.py",
]
"""The modules that put words before a person in the language of the settings or `--lang`
(chat, timeline, answers to votes, the demo, a diagnosis and its Prometheus evidence). The
CLI's own help and the developer commands (rules, sim, drill) take no language."""

NOT_FOR_PEOPLE: dict[str, tuple[str, set[str]]] = {
    "bot/chat/console.py": ("a rich style", {"bold red"}),
    "bot/chat/queued.py": ("the outbox's bookkeeping", {"{} is not a console message"}),
    "bot/chat/slack/_delivering.py": (
        "the outbox's bookkeeping",
        {"ratelimited: retry after {} s", "{} was never delivered", "waiting for {}"},
    ),
    "bot/chat/slack/_buttons.py": (
        "why a click is not ours: logged, never shown",
        {
            "expected one action",
            "unknown action {}",
            "unknown value for {}",
            "no such {} button on the message",
            "no user",
        },
    ),
    "bot/chat/slack/_receiving.py": (
        "answers to Slack's servers and their log lines",
        {
            "request too large",
            "request body too slow",
            "client disconnected",
            "a timestamp that is not Unix seconds",
            "a bad signature or a stale timestamp {}",
            "malformed body",
            "invalid request",
            "replayed request",
            "store unavailable",
        },
    ),
    "bot/pipeline/rule_errors.py": ("a log line's", {" (and {} more subject(s))"}),
    "bot/pipeline/worker.py": ("a log line's", {"goes on"}),
    "bot/roots/serve.py": ("a probe's name in the log", {"kubernetes api"}),
    "bot/roots/demo.py": (
        "new GPU errors as Prometheus shows them (docs/architecture.md, known gaps); where a "
        "payload came from, for its errors",
        {"GPU {}: Xid {}", "GPU {}: {} ECC double-bit errors", "simulated Alertmanager"},
    ),
    "bot/incidents/timeline.py": ("a command line", {"kubectl drain {}{}"}),
    "bot/incidents/progress.py": (
        "patterns read in the API server's refusals, never said",
        {r"disruption budget (\S+)", r"^(?:eviction of|delete) pod \S+: "},
    ),
    "bot/acting/performing.py": ("a node annotation", {"{} approved in gpubot"}),
    "bot/acting/executions.py": (
        "an exception's text",
        {"execution of {}: cannot go from {} to {} (from {} it may go to: {})", "no row"},
    ),
    "bot/acting/draining.py": (
        "kubectl drain's own words, kept as kubectl says them (docs/architecture.md, known gaps)",
        {
            "not evicted: this gpubot no longer owns the drain (another one took it over)",
            "Terminating, held by finalizers {}",
            "still Terminating (grace period {}s)",
            "still Terminating",
            "timed out",
        },
    ),
    "bot/gate/smoke_test.py": (
        "the smoke test's findings in a mix the catalogue has no sentence for, the pod's state "
        "as Kubernetes reports it (docs/architecture.md, known gaps)",
        {
            r"^GPU (\d+): (.*?) \(UUID: (GPU-[0-9A-Fa-f-]+)\)\s*$",
            "container {} waiting: {}",
            "log not read: {}",
            "nvidia-smi -L listed all {} GPUs",
            "nvidia-smi -L listed {} of {} GPUs, missing GPU {}",
            "exit code {}",
            "the smoke-test pod {}",
            "not started by the kubelet on {}",
        },
    ),
    "bot/facts/metric_lines.py": (
        "dcgm-exporter's counter groups and NVLink counters, named as DCGM's fields name them "
        "(NVLINK_CRC_FLIT_ERROR, ..._REMAPPED_ROWS), in either language",
        {"CRC flit", "CRC data", "remapped rows"},
    ),
    "bot/incidents/digest.py": ("a code matched in stored text", {"superseded by incident"}),
    "bot/incidents/lifecycle.py": (
        "an exception's text",
        {"incident {}: cannot go from {} to {} (from {} it may go to: {})"},
    ),
}
"""English literals in SPEAKING that are not said to a person in the chosen language, and why."""

_REPO = Path(__file__).resolve().parents[2]


def _says_zh(node: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Name) and n.id in ("zh", "ZH"))
        or (isinstance(n, ast.Attribute) and n.attr == "ZH")
        for n in ast.walk(node)
    )


def _prose(text: str) -> list[str]:
    """The English words of a literal: blanks, code, flags and identifiers left out."""
    text = re.sub(r"`[^`]*`|--[\w-]+|\{[^}]*\}|\b\w+[-_./]\w[\w./-]*", " ", text)
    return re.findall(r"\b[A-Za-z]{2,}\b", text)


def english_literals(source: str) -> set[str]:
    """String literals of `source` with English words in them, blanks as `{}`, except
    docstrings, log calls, exceptions raised, dicts keyed by language, and the branches a
    test for Chinese chose between (`if zh: … else …`, `if lang is Lang.ZH: return …`)."""
    tree = ast.parse(source)
    skip: set[int] = set()

    def drop(node: ast.AST) -> None:
        skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            drop(node)  # docstrings
        elif isinstance(node, ast.Raise):
            drop(node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("debug", "info", "warning", "error", "exception", "critical"):
                drop(node)
        elif isinstance(node, ast.Dict) and any(k is not None and _says_zh(k) for k in node.keys):
            drop(node)  # a language's texts
        elif isinstance(node, (ast.IfExp, ast.If)) and _says_zh(node.test):
            drop(node)  # both languages, chosen here
        for block in (getattr(node, "body", None), getattr(node, "orelse", None)):
            if not isinstance(block, list):
                continue
            for i, statement in enumerate(block):
                if (
                    isinstance(statement, ast.If)
                    and _says_zh(statement.test)
                    and isinstance(statement.body[-1], ast.Return)
                ):
                    for rest in block[i + 1 :]:  # the English of an early Chinese return
                        drop(rest)
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            skip.update(id(v) for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if " " in text.strip() and len(_prose(text)) >= 2:
            found.add(text)
    return found


def test_the_finder_sees_english_and_lets_the_catalogue_and_chinese_branches_be() -> None:
    found = english_literals(
        "def f(lang, node):\n"
        "    '''Docstrings are for developers.'''\n"
        "    log.info('a log line for operators')\n"
        "    if lang is Lang.ZH:\n"
        "        return f'{node} 已经退出服务'\n"
        "    return f'{node} is already out of service'\n"
        "def g(lang, node):\n"
        "    chat.post_notice(say(lang, 'budget.already_out', node=node))\n"
        "    chat.post_notice(f'{node} went away')\n"
    )
    assert found == {"{} went away"}


def _speaking() -> list[str]:
    files = []
    for root in map(_REPO.joinpath, SPEAKING):
        files += sorted(root.rglob("*.py")) if root.is_dir() else [root]
    return [str(f.relative_to(_REPO)) for f in files]


@pytest.mark.parametrize("path", _speaking())
def test_what_speaks_to_people_says_it_through_the_catalogue(path: str) -> None:
    """A sentence written in English where a person reads it in the chosen language is an
    untranslated sentence: it belongs in `bot.texts`, or in NOT_FOR_PEOPLE with why."""
    found = english_literals((_REPO / path).read_text())
    _why, allowed = NOT_FOR_PEOPLE.get(path, ("", set()))
    assert found - allowed == set(), f"{path}: English outside bot.texts"
    assert allowed - found == set(), f"{path}: NOT_FOR_PEOPLE names text that is gone"


# ---- sentences the store keeps in English ---------------------------------------------------


def test_a_stored_withdrawal_reads_as_before_in_english_and_in_chinese_under_zh() -> None:
    """The store's withdrawals are unchanged in English (what older rows hold, what an English
    reader sees); under zh the same stored text is said in Chinese."""
    at = datetime(2026, 12, 2, 3, 5, tzinfo=UTC)
    gone = withdrawal("7", at, "the symptom is gone")
    taken = supersession("7", at, "gpu-fell-off-bus", "GPU 3 (a) fell off the bus", "gpu-short")

    assert gone == "incident 7 was resolved at 2026-12-02 03:05:00 UTC: the symptom is gone"
    assert taken == (
        "incident 7 was superseded at 2026-12-02 03:05:00 UTC by a better diagnosis: "
        "gpu-fell-off-bus (GPU 3 (a) fell off the bus), replacing gpu-short"
    )
    assert withdrawal_text(gone, Lang.EN) == gone and withdrawal_text(taken, Lang.EN) == taken
    assert withdrawal_text(gone, Lang.ZH) == (
        "事件 7 已于 2026-12-02 03:05:00 UTC 解决：the symptom is gone"
    )
    assert withdrawal_text(taken, Lang.ZH) == (
        "事件 7 已于 2026-12-02 03:05:00 UTC 被更准确的诊断 gpu-fell-off-bus"
        "（GPU 3 (a) fell off the bus）取代，替换了 gpu-short"
    )
    assert withdrawal_text("a note of someone's own", Lang.ZH) == "a note of someone's own"
