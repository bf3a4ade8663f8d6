"""Xids read from real kernel logs (tests/data/kernel-logs, each from a public thread) and from
the bug reports of the must-gather fixtures: code, PCI address, node and time, one signal per
(PCI address, Xid), and nothing but an InputError for input that is not a kernel log."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.errors import InputError
from bot.facts.kernel import (
    gpu_indexes,
    gunzip_members,
    kernel_signals,
    read_log_file,
    report_time,
)
from bot.facts.nodes import xids_of
from bot.model import Signal
from tests.helpers.paths import REPO

LOGS = REPO / "tests" / "data" / "kernel-logs"
BUNDLES = REPO / "tests" / "data" / "must-gather"
XID79_REPORT = BUNDLES / "xid79-device-plugin-crashloop" / "nvidia-bug-report_gpu-node-2.log.gz"


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# (file, node) -> [(xid, pci, first time or None, further lines)], in the order first seen; the
# Xids are the ones tests/data/kernel-logs/README.md lists for each file.
EXPECTED: dict[str, list[tuple[int, str, datetime | None, int]]] = {
    "akash244-node4-xid43-31-94.dmesg": [
        (43, "0000:00:05", _at("2024-07-31 23:14:18"), 1),
        (31, "0000:00:07", _at("2024-08-05 03:54:13"), 0),
        (94, "0000:00:08", _at("2024-08-09 13:32:56"), 0),
    ],
    "gpud46-xid13-109.dmesg": [
        (13, "0000:cb:00", _at("2024-08-30 11:43:09"), 2),
        (109, "0000:cb:00", _at("2024-08-30 11:43:14"), 0),
    ],
    # The three-line "fallen off the bus" message at driver load (GPU 0000:b3:00.0) has no Xid.
    "nvsentinel155-xid79-fallen-off-bus.dmesg": [(79, "0000:44:00", None, 0)],
    "ogkm1150-nvlink5-xid145-149.journal": [
        (45, "0000:dc:00", None, 1),
        (45, "0000:ed:00", None, 1),
        (45, "0000:ba:00", None, 1),
        (45, "0000:97:00", None, 0),
    ],
    "gpud1160-1174-nvlink-xid144-149.kmsg": [
        (144, "0000:01:00", None, 0),
        (149, "0000:00:00", None, 1),
        (149, "0019:01:00", None, 0),
        (145, "0018:01:00", None, 0),
        (94, "0000:9b:00", None, 0),
    ],
    "vllm40652-xid119-gsp-timeout.dmesg": [
        (119, "0001:6c:00", _at("2026-04-26 23:12:26"), 0),
        (119, "0001:96:00", _at("2026-04-26 23:13:11"), 0),
    ],
}


def _read(name: str, node: str = "node4") -> list[Signal]:
    return kernel_signals(read_log_file(LOGS / name).text, node, name)


def test_every_real_log_has_an_expectation() -> None:
    assert sorted(p.name for p in LOGS.iterdir() if p.suffix != ".md") == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_real_log_gives_the_xids_its_readme_lists(name: str) -> None:
    signals = _read(name)
    got = [
        (int(s.labels["xid"]), s.labels["pci_bus_id"], s.starts_at, int(s.annotations["repeats"]))
        for s in signals
    ]
    assert got == EXPECTED[name]
    for signal in signals:
        assert (signal.source, signal.name, signal.status) == ("kernel", "GPUXidError", "firing")
        assert signal.node == "node4"
        assert signal.gpu is None  # no input here says which GPU index a PCI address is
        assert "NVRM: Xid (PCI:" in signal.annotations["message"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_message_is_the_first_line_of_that_xid_as_written(name: str) -> None:
    lines = (LOGS / name).read_text().splitlines()
    for signal in _read(name):
        pci, code = signal.labels["pci_bus_id"], signal.labels["xid"]
        first = next(line for line in lines if f"(PCI:{pci}): {code}," in line)
        assert signal.annotations["message"] == first.strip()


def test_the_node_facts_read_them_as_kernel_xids() -> None:
    xids = xids_of(_read("akash244-node4-xid43-31-94.dmesg"))
    assert [(x.code, x.gpu, x.source) for x in xids] == [
        (43, None, "kernel log"),
        (31, None, "kernel log"),
        (94, None, "kernel log"),
    ]


def test_pid_and_process_are_kept_when_known_and_left_out_when_unknown() -> None:
    xid43, _, xid94 = _read("akash244-node4-xid43-31-94.dmesg")
    assert (xid43.annotations["pid"], xid43.annotations["process"]) == ("1045242", "pt_main_thread")
    assert xid43.annotations["detail"] == "Ch 00000008"
    assert "pid" not in xid94.annotations and "process" not in xid94.annotations  # '<unknown>'
    assert xid94.annotations["detail"] == "Contained: SM (0x1). RST: No, D-RST: No"
    assert xid94.annotations["time"] == "Fri Aug  9 13:32:56 2024"


def test_an_xid_45_names_the_xid_that_caused_it() -> None:
    signals = _read("ogkm1150-nvlink5-xid145-149.journal")
    assert [s.labels["caused_by_xid"] for s in signals] == ["149", "145", "145", "145"]


def test_nvlink5_xids_without_pid_keep_their_whole_text() -> None:
    signal = _read("gpud1160-1174-nvlink-xid144-149.kmsg")[2]
    assert signal.annotations["detail"] == (
        "NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 0x00000000 0x00000000 "
        "0x00000000)"
    )
    assert "pid" not in signal.annotations


def test_the_same_xid_on_the_same_gpu_is_one_signal_with_a_stable_fingerprint() -> None:
    first = _read("gpud46-xid13-109.dmesg")
    again = _read("gpud46-xid13-109.dmesg")
    other_node = _read("gpud46-xid13-109.dmesg", node="node5")
    assert [s.fingerprint for s in first] == [s.fingerprint for s in again]
    assert len({s.fingerprint for s in first}) == 2  # 13 and 109 on one GPU: two facts
    assert not {s.fingerprint for s in first} & {s.fingerprint for s in other_node}
    assert first[0].annotations["where"] == "gpud46-xid13-109.dmesg:2"


def test_continuation_lines_inherit_nothing_and_are_not_xids() -> None:
    # The driver-load message is three lines, the last two indented under the first.
    (signal,) = _read("nvsentinel155-xid79-fallen-off-bus.dmesg")
    assert signal.labels["pci_bus_id"] == "0000:44:00"
    assert signal.annotations["message"] == (
        "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"
    )
    assert "uptime_s" not in signal.annotations  # that line has no stamp of its own


def test_indented_lines_continue_the_record_above_them() -> None:
    # Real lines rearranged: nvsentinel155's indented NVRM lines under akash244's Xid 94, and
    # the Xid 79 line of nvsentinel155 indented under that file's first stamped line.
    akash = (LOGS / "akash244-node4-xid43-31-94.dmesg").read_text().splitlines()
    nvsentinel = (LOGS / "nvsentinel155-xid79-fallen-off-bus.dmesg").read_text().splitlines()
    text = "\n".join([akash[-1], *nvsentinel[1:3], nvsentinel[0], " " * 15 + nvsentinel[-1]])
    xid94, xid79 = kernel_signals(text, "node4", "log")
    assert xid94.annotations["continuation"] == (
        "NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        "NVRM: fallen off the bus and is not responding to commands."
    )
    assert xid79.annotations["uptime_s"] == "1843.308145"
    assert "continuation" not in xid79.annotations


# --- the same real lines in the other forms a kernel log comes in ----------------------------

XID79_LINE = "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"


@pytest.mark.parametrize(
    ("prefix", "starts_at", "uptime"),
    [
        # journalctl -k -o short-iso, short-iso-precise, short-full; dmesg --time-format iso
        ("2025-06-02T13:13:04+0000 node4 kernel: ", _at("2025-06-02 13:13:04"), None),
        ("2025-06-02T15:13:04.123456+02:00 node4 kernel: ", _at("2025-06-02 13:13:04"), None),
        ("Mon 2025-06-02 13:13:04 UTC node4 kernel: ", _at("2025-06-02 13:13:04"), None),
        ("2025-06-02T13:13:04,123456+00:00 ", _at("2025-06-02 13:13:04"), None),
        # a zone only named, not UTC: no guess
        ("Mon 2025-06-02 13:13:04 CEST node4 kernel: ", None, None),
        # journalctl -k (short): no year, and no bug report to give one
        ("Jun 02 13:13:04 node4 kernel: ", None, None),
        # dmesg with uptime, dmesg -x, /dev/kmsg records
        ("[ 1843.439669] ", None, "1843.439669"),
        ("kern  :err   : [ 1843.439669] ", None, "1843.439669"),
        ("3,1234,1843439669,-;", None, "1843.439669"),
        ("kernel: ", None, None),
    ],
)
def test_every_kernel_log_form_gives_the_xid_and_its_time(
    prefix: str, starts_at: datetime | None, uptime: str | None
) -> None:
    (signal,) = kernel_signals(prefix + XID79_LINE, "node4", "log")
    assert (signal.labels["xid"], signal.labels["pci_bus_id"]) == ("79", "0000:44:00")
    assert signal.starts_at == starts_at
    assert signal.annotations.get("uptime_s") == uptime


def test_pci_addresses_are_read_in_any_case_and_with_a_function() -> None:
    line = XID79_LINE.replace("PCI:0000:44:00", "PCI:0000:4E:00.0")
    (signal,) = kernel_signals(line, "node4", "log")
    assert signal.labels["pci_bus_id"] == "0000:4e:00"


# --- bug reports ------------------------------------------------------------------------------


def test_a_bug_report_gives_its_xids_once_with_the_journal_time_and_the_reports_year() -> None:
    log = read_log_file(XID79_REPORT)
    assert log.problem is None and log.members == 8
    xid79, xid154 = kernel_signals(log.text, "gpu-node-2", XID79_REPORT.name)
    assert (xid79.labels["xid"], xid79.labels["pci_bus_id"]) == ("79", "0000:3b:00")
    # journalctl prints no year: the report's `Date: Thu Mar 14 03:08:12 UTC 2024` gives it.
    assert xid79.starts_at == _at("2024-03-14 02:46:03")
    # twice in the journal section, twice again in the dmesg section
    assert xid79.annotations["repeats"] == "3"
    assert xid79.annotations["detail"] == "GPU has fallen off the bus."
    assert xid154.labels["xid"] == "154"
    assert xid154.starts_at == _at("2024-03-14 02:47:01")
    assert report_time(log.text) == _at("2024-03-14 03:08:12")


def test_a_report_without_xids_gives_none() -> None:
    report = BUNDLES / "xid79-device-plugin-crashloop" / "nvidia-bug-report_gpu-node-1.log.gz"
    assert kernel_signals(read_log_file(report).text, "gpu-node-1", report.name) == []


def test_a_truncated_bug_report_keeps_the_members_before_the_cut() -> None:
    report = BUNDLES / "partial-driver-crashloop-unreadable" / "nvidia-bug-report_gpu-node-4.log.gz"
    log = read_log_file(report)
    assert log.members == 4
    assert log.problem is not None and log.problem.startswith("truncated gzip: member 5")
    assert "/usr/bin/lspci" in log.text and "Scanning kernel log files" in log.text
    assert not log.text.endswith("Mar 01 00:06")  # the cut line is dropped
    assert kernel_signals(log.text, "gpu-node-4", report.name) == []


@pytest.mark.parametrize("cut", [1, 10, 100, 500, 1000, 1500, 2000, 2263])
def test_a_bug_report_cut_anywhere_reads_what_came_before(cut: int) -> None:
    data = XID79_REPORT.read_bytes()[:cut]
    log = gunzip_members(data)
    assert log.problem is not None
    signals = kernel_signals(log.text, "gpu-node-2", "cut")
    assert {s.labels["xid"] for s in signals} <= {"79", "154"}


def test_a_plain_text_bug_report_is_read_too() -> None:
    text = gzip.decompress(XID79_REPORT.read_bytes()).decode()
    assert [s.labels["xid"] for s in kernel_signals(text, "gpu-node-2", "plain")] == ["79", "154"]


# --- GPU indexes: only when the input says which ------------------------------------------------


def test_no_fixture_states_a_gpu_index_so_none_is_guessed() -> None:
    for usage in BUNDLES.glob("*/gpu_device_usage_*.log"):
        assert gpu_indexes(usage.read_text()) == {}


def test_an_nvidia_smi_table_row_maps_its_bus_id_to_its_index() -> None:
    # The header of the fixture's nvidia-smi output and a GPU row laid out as nvidia-smi prints
    # it (as quoted in akash-network/provider-configs#12).
    usage = (
        BUNDLES / "xid79-device-plugin-crashloop" / "gpu_device_usage_gpu-node-1.log"
    ).read_text()
    row = (
        "|   3  NVIDIA A100-SXM4-80GB          On  | 00000000:3B:00.0 Off |                    0 |"
    )
    assert gpu_indexes(usage + row + "\n") == {"0000:3b:00": "3"}
    text = read_log_file(XID79_REPORT).text + row + "\n"
    assert [s.gpu for s in kernel_signals(text, "gpu-node-2", "r")] == ["3", "3"]


def test_indexes_given_by_another_part_are_used_unless_they_disagree() -> None:
    text = read_log_file(XID79_REPORT).text
    given_ = kernel_signals(text, "gpu-node-2", "r", gpus={"0000:3b:00": "3"})
    assert [s.gpu for s in given_] == ["3", "3"]
    row = (
        "|   2  NVIDIA A100-SXM4-80GB          On  | 00000000:3B:00.0 Off |                    0 |"
    )
    disagree = kernel_signals(text + row + "\n", "gpu-node-2", "r", gpus={"0000:3b:00": "3"})
    assert [s.gpu for s in disagree] == [None, None]


# --- malformed input -----------------------------------------------------------------------------


def test_text_without_xids_gives_nothing() -> None:
    readme = (LOGS / "README.md").read_text()
    assert kernel_signals(readme.replace("NVRM: Xid", "NVRM Xid"), "node4", "README.md") == []
    assert kernel_signals("", "node4", "empty") == []


def test_bytes_that_are_not_utf8_are_replaced(tmp_path: Path) -> None:
    raw = (LOGS / "gpud46-xid13-109.dmesg").read_bytes()
    path = tmp_path / "log"
    path.write_bytes(b"\xff\xfe\x00garbage\x80\n" + raw)
    signals = kernel_signals(read_log_file(path).text, "node4", "log")
    assert [s.labels["xid"] for s in signals] == ["13", "109"]


def test_a_log_needs_its_node_and_a_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        kernel_signals(XID79_LINE, "", "log")
    with pytest.raises(InputError):
        read_log_file(tmp_path / "absent.log")


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("NVRM: Xid(PCI:0123456789abcdef),.[] \n\tpid=name'<>")))
)
def test_arbitrary_text_never_raises(text: str) -> None:
    for signal in kernel_signals(text, "node4", "fuzz"):
        assert signal.labels["xid"].isdigit()


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    gunzip_members(b"\x1f\x8b" + data)
    gunzip_members(data)
