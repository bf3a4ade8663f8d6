"""Xids read from a kernel log: `journalctl -k` (short, short-iso, short-full, with or without
the syslog `host kernel:` prefix), `dmesg` (`[uptime]`, `-T` / `--ctime` dates, `--time-format
iso`), `/dev/kmsg` records, bare `NVRM:` lines, and the kernel sections of an
`nvidia-bug-report.log.gz` (a multi-member gzip, read member by member).

Why it exists: when no dcgm-exporter alert reaches gpubot (the exporter crash-loops, the node
is cut off, a person hands over a log), the driver's own `NVRM: Xid` lines are the evidence.
Each (PCI address, Xid) becomes one `Signal(source="kernel", name="GPUXidError")`, the Xid fact
`bot.facts.nodes.xids_of` already reads.

What it must never do: judge an Xid (the catalog in `rules/xid.yaml` does), guess a GPU index
the input does not state, or guess a time: a stamp without a year takes it only from the bug
report's own `Date:` line, uptime stamps give no time at all. Stamps that name no time zone
(`dmesg -T`, `[Wed Jul 31 23:14:18 2024]`) are read as UTC, the zone servers keep; the stamp
as written stays in the `time` annotation.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bot.config import InputLimits
from bot.errors import InputError
from bot.input_files import Limit, read_within
from bot.model import Signal

XID_SIGNAL = "GPUXidError"

_HEX = "[0-9A-Fa-f]"
# The driver prints `NVRM: Xid (PCI:dddd:bb:dd): CODE, pid=..., name=..., MESSAGE`; NVLink5 and
# recovery Xids (144-150, 154) have no pid/name, drivers before ~340 had no `PCI:` prefix, and
# VMD domains have more than four hex digits.
_XID = re.compile(
    rf"NVRM: Xid \((?:PCI:)?(?P<domain>{_HEX}{{4,8}}):(?P<bus>{_HEX}{{2}}):(?P<dev>{_HEX}{{2}})"
    rf"(?:\.(?P<fn>[0-7]))?\):\s*(?P<code>\d+)\b(?P<rest>.*)$"
)
_PID = re.compile(r"pid=(?P<pid>'<unknown>'|<unknown>|'?\d+'?|[^,\s]*),\s*")
_NAME = re.compile(r"name=(?P<name>[^,]*?)(?:,\s*|$)")
_CAUSED_BY = re.compile(r"caused by previous Xid (\d+)")

_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    )
}
_UTC_NAMES = {"UTC", "GMT", "Z", "UCT"}

# `dmesg -T` / `--ctime`: `[Wed Jul 31 23:14:18 2024]`.
_CTIME = re.compile(
    r"\[\s*(?:[A-Z][a-z]{2}) (?P<mon>[A-Z][a-z]{2})\s+(?P<day>\d{1,2}) "
    r"(?P<h>\d{2}):(?P<m>\d{2}):(?P<s>\d{2}) (?P<year>\d{4})\]"
)
# journalctl short-iso(-precise), rsyslog RFC 3339, `dmesg --time-format iso`, journalctl
# short-full (`Thu 2024-03-14 02:46:03 UTC`).
_ISO = re.compile(
    r"(?P<year>\d{4})-(?P<mon>\d{2})-(?P<day>\d{2})[T ](?P<h>\d{2}):(?P<m>\d{2}):(?P<s>\d{2})"
    r"(?:[.,](?P<frac>\d{1,9}))?(?P<tz>Z|[+-]\d{2}:?\d{2})?(?:\s+(?P<tzname>[A-Z]{2,5})\b)?"
)
# journalctl short / syslog: `Mar 14 02:46:03 host kernel:` (no year).
_SYSLOG = re.compile(
    r"^(?P<mon>[A-Z][a-z]{2})\s+(?P<day>\d{1,2}) (?P<h>\d{2}):(?P<m>\d{2}):(?P<s>\d{2})"
    r"(?:\.\d+)?\s"
)
_UPTIME = re.compile(r"\[\s*(?P<up>\d+\.\d+)\]")
# /dev/kmsg: `priority,sequence,microseconds since boot,flags;message`.
_KMSG = re.compile(r"^\d+,\d+,(?P<usec>\d+),[^;]*;")
# kmsg dictionary lines (` SUBSYSTEM=pci`) follow a record; they are not part of its text.
_KMSG_DICT = re.compile(r"^\s+[A-Z_]+=")
# nvidia-bug-report.sh's header: `Date: Thu Mar 14 03:08:12 UTC 2024` (date(1)'s default).
_REPORT_DATE = re.compile(
    r"^Date:\s+[A-Z][a-z]{2} (?P<mon>[A-Z][a-z]{2})\s+(?P<day>\d{1,2}) "
    r"(?P<h>\d{2}):(?P<m>\d{2}):(?P<s>\d{2}) (?P<tz>\S+) (?P<year>\d{4})\s*$",
    re.MULTILINE,
)

# nvidia-smi's table names the index and the bus id of a GPU on one row:
# `|   0  NVIDIA A100-SXM4-80GB          On  | 00000000:07:00.0 Off |  ...`
_SMI_ROW = re.compile(
    rf"^\|\s+(?P<index>\d+)\s+[^|]*\|\s*(?P<domain>{_HEX}{{4,8}}):(?P<bus>{_HEX}{{2}}):"
    rf"(?P<dev>{_HEX}{{2}})\.[0-7]\s"
)
_BUS_ID = re.compile(
    rf"^(?P<domain>{_HEX}{{4,8}}):(?P<bus>{_HEX}{{2}}):(?P<dev>{_HEX}{{2}})\.[0-7]$"
)

PciKey = tuple[int, int, int]


def pci_text(key: PciKey) -> str:
    """`0000:3b:00`: the form the Xid line prints, lower case, domain at least 4 digits."""
    return f"{key[0]:04x}:{key[1]:02x}:{key[2]:02x}"


def gpu_indexes(text: str) -> dict[str, str]:
    """GPU index by PCI address (`pci_text`), only where the text states both together:
    rows of nvidia-smi's table, or `nvidia-smi --query-gpu=index,pci.bus_id --format=csv`.
    An address given two different indexes (indexes shift when a GPU drops out) is left out."""
    seen: dict[str, set[str]] = {}
    csv_columns: tuple[int, int] | None = None
    for line in text.splitlines():
        row = _SMI_ROW.match(line)
        if row:
            key = (int(row["domain"], 16), int(row["bus"], 16), int(row["dev"], 16))
            seen.setdefault(pci_text(key), set()).add(row["index"])
            continue
        cells = [c.strip() for c in line.split(",")]
        if "index" in cells and "pci.bus_id" in cells:
            csv_columns = (cells.index("index"), cells.index("pci.bus_id"))
            continue
        if csv_columns is not None:
            index_at, bus_at = csv_columns
            bus = _BUS_ID.match(cells[bus_at]) if len(cells) > max(csv_columns) else None
            if bus is None or not cells[index_at].isdigit():
                csv_columns = None
                continue
            key = (int(bus["domain"], 16), int(bus["bus"], 16), int(bus["dev"], 16))
            seen.setdefault(pci_text(key), set()).add(cells[index_at])
    return {pci: next(iter(indexes)) for pci, indexes in seen.items() if len(indexes) == 1}


@dataclass
class _Stamp:
    at: datetime | None = None
    text: str | None = None
    uptime_s: str | None = None


@dataclass
class _ReportDate:
    year: int
    month: int
    utc: bool


def _report_date(text: str) -> _ReportDate | None:
    match = _REPORT_DATE.search(text)
    if match is None or match["mon"] not in _MONTHS:
        return None
    return _ReportDate(int(match["year"]), _MONTHS[match["mon"]], match["tz"] in _UTC_NAMES)


def report_time(text: str) -> datetime | None:
    """When an nvidia-bug-report was written (its `Date:` line), if it says so in UTC."""
    match = _REPORT_DATE.search(text)
    if match is None or match["mon"] not in _MONTHS or match["tz"] not in _UTC_NAMES:
        return None
    return _at(
        int(match["year"]),
        _MONTHS[match["mon"]],
        int(match["day"]),
        match["h"],
        match["m"],
        match["s"],
    )


def _at(year: int, month: int, day: int, h: str, m: str, s: str) -> datetime | None:
    try:
        return datetime(year, month, day, int(h), int(m), int(s), tzinfo=UTC)
    except ValueError:
        return None


def _iso_stamp(match: re.Match[str]) -> datetime | None:
    tz = match["tz"]
    tzname = match["tzname"]
    if not tz and tzname and tzname not in _UTC_NAMES:
        return None  # a named zone other than UTC: abbreviations are ambiguous, no guess
    at = _at(
        int(match["year"]), int(match["mon"]), int(match["day"]), match["h"], match["m"], match["s"]
    )
    if at is None or not tz or tz == "Z":
        return at
    sign = 1 if tz[0] == "+" else -1
    digits = tz[1:].replace(":", "")
    offset_s = sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return datetime.fromtimestamp(at.timestamp() - offset_s, tz=UTC)


def _stamp(prefix: str, report: _ReportDate | None) -> _Stamp | None:
    """The time written before `NVRM:` on a line, if any."""
    ctime = _CTIME.search(prefix)
    if ctime:
        month = _MONTHS.get(ctime["mon"])
        at = None
        if month is not None:
            at = _at(
                int(ctime["year"]), month, int(ctime["day"]), ctime["h"], ctime["m"], ctime["s"]
            )
        return _Stamp(at, ctime.group(0).strip("[] "))
    iso = _ISO.search(prefix)
    if iso:
        return _Stamp(_iso_stamp(iso), iso.group(0).strip())
    syslog = _SYSLOG.match(prefix)
    if syslog:
        month = _MONTHS.get(syslog["mon"])
        at = None
        if month and report is not None and report.utc:
            # The journal prints no year: the bug report's Date line gives it (a later month
            # than the report's own is last year's).
            year = report.year - 1 if month > report.month else report.year
            at = _at(year, month, int(syslog["day"]), syslog["h"], syslog["m"], syslog["s"])
        return _Stamp(at, syslog.group(0).strip())
    uptime = _UPTIME.search(prefix)
    if uptime:
        return _Stamp(uptime_s=uptime["up"])
    kmsg = _KMSG.match(prefix)
    if kmsg:
        usec = int(kmsg["usec"])
        return _Stamp(uptime_s=f"{usec // 1_000_000}.{usec % 1_000_000:06d}")
    return None


@dataclass
class _Entry:
    key: tuple[PciKey, int]
    line: str
    where: str
    stamp: _Stamp
    detail: str
    pid: str | None
    process: str | None
    caused_by: list[str] = field(default_factory=list)
    continuation: list[str] = field(default_factory=list)
    repeats: int = 0


def _rest(rest: str) -> tuple[str | None, str | None, str]:
    """pid, process name and message of what follows the Xid code."""
    rest = rest.strip()
    rest = rest[1:].lstrip() if rest.startswith(",") else rest
    pid = process = None
    pid_match = _PID.match(rest)
    if pid_match:
        value = pid_match["pid"].strip("'")
        pid = value if value.isdigit() else None
        rest = rest[pid_match.end() :]
        name_match = _NAME.match(rest)
        if name_match:
            name = name_match["name"].strip()
            process = name if name and name != "<unknown>" else None
            rest = rest[name_match.end() :]
    return pid, process, rest.strip()


def fingerprint(node: str, pci: str, code: int) -> str:
    return hashlib.sha256(f"kernel|{node}|{pci}|{code}".encode()).hexdigest()[:16]


def kernel_signals(
    text: str, node: str, where: str, *, gpus: Mapping[str, str] | None = None
) -> list[Signal]:
    """One firing `GPUXidError` signal per (PCI address, Xid) in a kernel log, in the order
    first seen: the first line's time (or the first absolute time of its repeats), the rest
    counted in `repeats`. `gpus` (PCI address -> GPU index) adds what another part of the
    input states; the text's own nvidia-smi output is read too. No Xid line gives []."""
    if not node:
        raise InputError(where, "a kernel log needs the node it was read on")
    report = _report_date(text)
    indexes = gpu_indexes(text)
    for pci, index in (gpus or {}).items():
        if indexes.setdefault(pci, index) != index:
            del indexes[pci]  # two sources disagree: no index
    entries: dict[tuple[PciKey, int], _Entry] = {}
    head = ""  # the last line that began a record; an indented line continues it
    open_entry: _Entry | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        continued = line[:1].isspace()
        match = _XID.search(line)
        if match is None:
            if not continued:
                head, open_entry = line, None
            elif open_entry is not None and not _KMSG_DICT.match(line):
                open_entry.continuation.append(line.strip())
            continue
        stamp = _stamp(line[: match.start()], report)
        if stamp is None and continued:
            nvrm = head.find("NVRM:")
            stamp = _stamp(head[:nvrm] if nvrm >= 0 else head, report)
        if not continued:
            head = line
        stamp = stamp or _Stamp()
        address = (int(match["domain"], 16), int(match["bus"], 16), int(match["dev"], 16))
        code = int(match["code"])
        pid, process, detail = _rest(match["rest"])
        caused_by = _CAUSED_BY.findall(detail)
        entry = entries.get((address, code))
        if entry is None:
            entry = _Entry(
                (address, code), line.strip(), f"{where}:{number}", stamp, detail, pid, process
            )
            entries[(address, code)] = entry
            open_entry = entry
        else:
            entry.repeats += 1
            if entry.stamp.at is None and stamp.at is not None:
                entry.stamp = stamp
            open_entry = None
        entry.caused_by += [c for c in caused_by if c not in entry.caused_by]
    return [_signal(entry, node, indexes) for entry in entries.values()]


def _signal(entry: _Entry, node: str, indexes: Mapping[str, str]) -> Signal:
    pci_key, code = entry.key
    pci = pci_text(pci_key)
    labels = {"xid": str(code), "pci_bus_id": pci}
    if entry.caused_by:
        labels["caused_by_xid"] = ",".join(entry.caused_by)
    annotations = {"message": entry.line, "detail": entry.detail, "where": entry.where}
    annotations["repeats"] = str(entry.repeats)
    optional = {
        "pid": entry.pid,
        "process": entry.process,
        "time": entry.stamp.text,
        "uptime_s": entry.stamp.uptime_s,
        "continuation": "\n".join(entry.continuation) or None,
    }
    annotations.update({k: v for k, v in optional.items() if v})
    return Signal(
        source="kernel",
        name=XID_SIGNAL,
        node=node,
        gpu=indexes.get(pci),
        labels=labels,
        annotations=annotations,
        starts_at=entry.stamp.at,
        fingerprint=fingerprint(node, pci, code),
    )


@dataclass(frozen=True)
class LogText:
    """A log file's text; `problem` says why part of it could not be read (None: all of it)."""

    text: str
    problem: str | None = None
    members: int = 0
    """How many complete gzip members it held (0: not gzip)."""


_GZIP_MAGIC = b"\x1f\x8b"


def gunzip_members(data: bytes, where: str = "gzip", limit: Limit | None = None) -> LogText:
    """A multi-member gzip (nvidia-bug-report.sh appends one member per section) read member
    by member: a cut or corrupt member keeps every member before it, and of a cut one its
    whole lines (deflate decodes a prefix exactly; only the CRC at its end is unchecked).

    Unpacked only up to `limit` (the default kernel-log limit when None): a megabyte of
    gzip can stand for a gigabyte of zeros, so past the limit the whole file is refused
    (InputError naming `where`), never cut, as a log without its end misses the newest Xid."""
    limit = limit or InputLimits().kernel_log()
    chunks: list[bytes] = []
    members = 0
    problem = None
    rest = data
    left = limit.max_bytes
    while rest:
        if rest[:2] != _GZIP_MAGIC:
            if members == 0:
                problem = "not gzip data"
            elif rest.strip(b"\x00"):
                problem = f"{len(rest)} bytes after gzip member {members} are not gzip data"
            break
        inflater = zlib.decompressobj(wbits=31)
        try:
            # One byte past what is left: more than that is over the limit, however much.
            chunk = inflater.decompress(rest, left + 1)
        except zlib.error as exc:
            problem = f"gzip member {members + 1} is corrupt ({exc}); read members 1-{members}"
            break
        if len(chunk) > left:
            raise limit.refusal(where, None)
        left -= len(chunk)
        if not inflater.eof:
            chunks.append(chunk[: chunk.rfind(b"\n") + 1])
            problem = (
                f"truncated gzip: member {members + 1} ends before its end-of-stream marker; "
                f"read members 1-{members} and the whole lines of member {members + 1}"
            )
            break
        chunks.append(chunk)
        members += 1
        rest = inflater.unused_data
    return LogText(b"".join(chunks).decode("utf-8", errors="replace"), problem, members)


def read_log_file(path: Path, limit: Limit | None = None) -> LogText:
    """A kernel log or bug report as text, within `limit` (the default kernel-log limit when
    None) before and after gzip (multi-member) is undone, bytes that are not UTF-8 replaced.
    An unreadable file, or one over the limit, is an InputError."""
    limit = limit or InputLimits().kernel_log()
    data = read_within(path, limit)
    if data[:2] == _GZIP_MAGIC:
        return gunzip_members(data, str(path), limit)
    return LogText(data.decode("utf-8", errors="replace"))
