"""gpubot's own errors, converted once at the edge (CLI exit code, HTTP status), each saying
whether a retry can help.

GpubotError
├── InputError          bad input from a person or a peer: a retry with the same input fails
│                       the same way; the CLI exits 2, HTTP answers 4xx
├── RuleError           one rule is broken (schema, CEL, evaluation); the other rules go on
├── StoreSchemaError    the database's schema is not this gpubot's: the message names the
│                       command to run (`gpubot db upgrade`); the CLI exits 2
├── IllegalTransition   (bot.incidents.lifecycle) a move the incident state machine forbids:
│                       a bug upstream, never retried
├── TemporaryError      a peer failed in a way a retry may cure (`retry_after` when it said)
│   ├── EvictionBlocked     429 from pods/eviction: a PodDisruptionBudget says not now
│   ├── WatchExpired        410 on a list or watch: the version is gone, list again
│   ├── Conflict            409 on an update: someone wrote in between; read and try again
│   ├── StoreUnavailable    the database is down, locked or timed out; nothing was written
│   └── StateChanged        another writer moved the incident between our read and write
└── PermanentError      a peer refused for good (4xx other than 409 on update and 429):
    │                   retrying the same request is pointless
    ├── NotFound            404: the object does not exist (any more)
    └── AlreadyExists       409 on create: the name is taken (by someone else's object)
"""

from __future__ import annotations


class GpubotError(Exception):
    pass


class InputError(GpubotError):
    """Malformed file, payload or argument; `where` is `file:line` or a field path."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


class RuleError(GpubotError):
    def __init__(self, where: str, message: str, rule_id: str | None = None) -> None:
        prefix = f"{where}: " if where else ""
        rule = f"rule {rule_id}: " if rule_id else ""
        super().__init__(f"{prefix}{rule}{message}")
        self.where = where
        self.message = message
        self.rule_id = rule_id


class TemporaryError(GpubotError):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class EvictionBlocked(TemporaryError):
    """The API server refused an eviction with 429; the message says which budget."""


class WatchExpired(TemporaryError):
    """The watch's resourceVersion is older than the server's history: relist."""


class Conflict(TemporaryError):
    """409 on an update: another writer got there first; read again and retry."""


class PermanentError(GpubotError):
    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class NotFound(PermanentError):
    pass


class AlreadyExists(PermanentError):
    """409 on create: the name is taken; creating it again will not help."""


class StoreUnavailable(TemporaryError):
    """The database is down, locked or timed out: nothing was written; try again."""


class StoreSchemaError(GpubotError):
    """The database's schema is not the one this gpubot runs on; the message names the
    command to run."""


class StateChanged(TemporaryError):
    """Another writer moved the incident between our read and our write: read it again."""
