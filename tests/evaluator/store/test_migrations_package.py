"""The migrations package can grow: numbers run 1, 2, 3, ... in the order listed, and each
module is named after the first number it holds, so the next one has an obvious place."""

from __future__ import annotations

import importlib
import pkgutil
import re

from gpu_health.evaluator.store import migrations
from gpu_health.evaluator.store.migrations import MIGRATIONS


def test_numbers_run_from_one_without_gaps() -> None:
    assert [m[0] for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert all(m[1] and m[2] for m in MIGRATIONS)  # a title and at least one statement


def test_every_module_is_listed_and_named_after_its_first_number() -> None:
    listed = [m[0] for m in MIGRATIONS]
    held = []
    for info in pkgutil.iter_modules(migrations.__path__):
        if info.name == "common":
            continue
        match = re.fullmatch(r"m(\d{3})_[a-z0-9_]+", info.name)
        assert match, f"{info.name}: name a migration module mNNN_<what>"
        numbers = [m[0] for m in importlib.import_module(
            f"{migrations.__name__}.{info.name}").MIGRATIONS]
        assert numbers and numbers[0] == int(match.group(1)), info.name
        held += numbers
    assert sorted(held) == listed  # no module left out of MIGRATIONS, none listed twice
