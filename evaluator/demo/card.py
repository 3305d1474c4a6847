"""The demo's live card: the fake nvidia-smi's state file, advanced over time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

FAULT_AFTER_ADVANCES: Final = 18  # the live card's uncorrectable error, ~3 minutes in


class FakeCard:
    """The fake tool's state file: a card whose correctable count grows faster and faster (the
    v2 trend signal warns within about a minute, given its seeded past days) and which, after
    ``FAULT_AFTER_ADVANCES`` advances, logs one uncorrectable error (the strong signal)."""

    def __init__(self, path: Path, corrected: int = 40) -> None:
        self.path = path
        self.corrected = corrected
        self.uncorrected = 0
        self.step = 1

    def write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"cards": {"0": {
            "ecc.errors.corrected.aggregate.total": self.corrected,
            "ecc.errors.uncorrected.aggregate.total": self.uncorrected}}}))
        tmp.replace(self.path)  # atomic: the fake re-reads it on every call

    def advance(self) -> None:
        self.corrected += self.step
        self.step += 1
        if self.step > FAULT_AFTER_ADVANCES:
            self.uncorrected = 1
        self.write()
