"""Conformance for the ``nvidia-smi -q`` reports in ../shared/fixtures/nvidia/q-*.txt: the PCIe
replay counters of every card, as each report prints them (drivers 535 to 610, Linux and
Windows, one and eight cards, MIG on and off).

The eight H100s of 535.161.08 show replays between 43 and 82 on idle cards: a replay count
alone is no fault, which is why the evaluator reads its growth, not its value.
"""

from __future__ import annotations

from gpu_health.exporter.parsers import nvidia_q
from gpu_health.exporter.parsers.cells import CellReader

from .conformance_support import Case, Check
from .support import FakeClock

# name -> (first card's address, replays since reset per card); every rollover count is 0.
Q_REPORTS: dict[str, tuple[str, tuple[int, ...]]] = {
    "q-a10-535.129.03-remap-pending.txt": ("00000000:07:00.0", (0,)),
    "q-a100x8-535.129.03-a.txt": ("00000000:2F:00.0", (0,) * 8),
    "q-h100-590.48.01.txt": ("00000000:00:09.0", (9,)),
    "q-h100-mig-590.48.01.txt": ("00000000:00:09.0", (9,)),  # MIG devices listed first
    "q-h100x8-535.161.08.txt": ("00000000:19:00.0", (67, 63, 52, 43, 49, 53, 82, 67)),
    "q-h200-590.48.01.txt": ("00000000:83:00.0", (0,)),
    "q-l40s-595.80.txt": ("00000000:01:00.0", (0,)),
    "q-rtx2080s-591.86-windows.txt": ("00000000:0C:00.0", (0,)),
    "q-rtx2080s-610.57.04-linux.txt": ("00000000:0C:00.0", (0,)),
    "q-rtx4080s-595.71.05.txt": ("00000000:01:00.0", (0,)),
    "q-rtx4090x8-535.154.05.txt": ("00000000:01:00.0", (0,) * 8),
    "q-titanv-560.35.03.txt": ("00000000:01:00.0", (0,)),
}


def check_q_report(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    (path,) = case.paths
    first, replays = Q_REPORTS[path.name]
    reader = CellReader()
    cards = nvidia_q.parse_replays(path.read_text(), reader)
    assert reader.anomalies == []
    assert cards[0].pci_bus_id == first
    assert tuple(card.replays for card in cards) == replays
    assert {card.rollovers for card in cards} == {0}
    assert all((card.uuid or "").startswith("GPU-") for card in cards)
    assert len({card.uuid for card in cards}) == len(cards)


Q_CHECKS: dict[str, Check] = dict.fromkeys(Q_REPORTS, check_q_report)


def matching_report(csv_name: str) -> str | None:
    """The ``-q`` report of the machine a full ``--query-gpu`` capture came from, if any
    (``query-h100-590.48.01-full.csv`` and ``q-h100-590.48.01.txt``: one UO capture file)."""
    name = "q-" + csv_name.removeprefix("query-").removesuffix("-full.csv") + ".txt"
    return name if name in Q_REPORTS else None
