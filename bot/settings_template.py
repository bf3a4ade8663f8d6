"""What `gpubot init` writes: a commented settings file a first user can run with at once.

Why a template and not a dump of `Settings`: a dump has every one of the hundred settings
and no word on why; a first user needs the five that decide whether anything happens
(who approves, where the store is, the webhook's token, where messages go, the language),
each said in both languages. Every other setting keeps its embedded default
(`bot/config.py` documents them all).

Why its Chinese is here and not in `bot.texts`: the catalogue says a sentence in one language,
the reader's; this file says every comment in both at once, whatever `lang` is, each beside
the setting it explains, and a person reads and edits it as one file. What it must never do:
write a setting that is not valid as written, or a comment in one language only.
"""

from __future__ import annotations

import json
from pathlib import Path

from bot.model import Lang


def _quoted(text: str) -> str:
    """A YAML scalar that stays a string whatever it holds (JSON strings are YAML)."""
    return json.dumps(text, ensure_ascii=False)


def render(approvers: list[str], store_url: str, token_file: Path, lang: Lang) -> str:
    people = "[" + ", ".join(_quoted(a) for a in approvers) + "]"
    return f"""\
# gpubot settings, written by `gpubot init`. Every command reads this file when no --config
# and no GPUBOT_CONFIG names another; GPUBOT_* environment variables override it.
# gpubot 设置，由 `gpubot init` 生成。未指定 --config 或 GPUBOT_CONFIG 时，所有命令都读取此文件；
# GPUBOT_* 环境变量优先于它。

# Language of every message: en or zh. / 所有消息的语言：en 或 zh。
lang: {lang.value}

# Where incidents, approvals and the webhook's deliveries are kept. Every command must use
# the same store as `gpubot serve` (an absolute path, so it does not depend on the folder).
# PostgreSQL for several replicas: postgresql://user@host/gpubot
# 事件、审批和 webhook 投递保存的位置。所有命令必须与 `gpubot serve` 使用同一个存储（绝对路径，
# 与当前目录无关）。多副本请用 PostgreSQL：postgresql://user@host/gpubot
store_url: {_quoted(store_url)}

remediation:
  # Who may approve each action, by chat user id (in the console and for `gpubot approve
  # --as ID`, any name you choose; in Slack, U0123...). Slack user groups go under `groups:`.
  # A drain moves running jobs: with two on-call people, set `two_person: true`.
  # 谁可以批准每个操作，按聊天用户 id（控制台和 `gpubot approve --as ID` 中可以是任意名字；
  # Slack 中是 U0123...）。Slack 用户组写在 `groups:` 下。排空会迁移正在运行的作业：
  # 有两位值班人员时请设置 `two_person: true`。
  approvals:
    cordon:   {{users: {people}}}
    drain:    {{users: {people}, two_person: false}}
    uncordon: {{users: {people}}}
  # Set true to rehearse: everything but the writes. / 设为 true 即演练：除写入外一切照常。
  dry_run: false

serve:
  # The Alertmanager webhook's bearer token (Alertmanager's `authorization.credentials_file`
  # must hold the same). / Alertmanager webhook 的 bearer token（Alertmanager 的
  # `authorization.credentials_file` 须保存同一个值）。
  bearer_token_file: {_quoted(str(token_file))}
  port: 8080

# Messages go to the console (this process's output) until Slack is configured: uncomment
# and fill in (README, "Slack in five steps"); secrets are better in GPUBOT_SLACK__* variables.
# 在配置 Slack 之前，消息输出到控制台（本进程的输出）。取消注释并填写即可使用 Slack
# （见 README「Slack in five steps」）；密钥最好放在 GPUBOT_SLACK__* 环境变量中。
# slack:
#   channel: C0123456789
#   mode: http            # or socket / 或 socket
#   bot_token: xoxb-...
#   signing_secret: ...
"""
