"""The quick test read off raw feature rows (the shared replay's entries, the live tick's
:func:`gpu_health.evaluator.store.predictions.features.row_could_fire`) is exactly
:func:`gpu_health.evaluator.rules.signals.could_fire`, and the rows become the same features."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_health.contract import SOURCE_REAL
from gpu_health.evaluator.backtest.feature_cache import entry
from gpu_health.evaluator.rules.evaluation import CardFeatures
from gpu_health.evaluator.rules.signals import could_fire
from gpu_health.evaluator.store.predictions.features import row_could_fire, row_to_features
from tests.evaluator.rules_support import PARAMS, features

counts = st.one_of(st.none(), st.integers(0, 10**6))


def as_row(f: CardFeatures) -> tuple[Any, ...]:
    """The layout of gpu_health.evaluator.store.predictions.features.feature_rows."""
    return (f.at, f.node_id, f.gpu_index, f.gpu_uuid, f.t0,
            f.baseline_samples, *f.corrected, f.corrected_baseline, f.uncorrected,
            f.remap_failure, f.remap_pending, f.remap_pending_before, f.retired_pages,
            f.retired_pages_before)


@settings(max_examples=300)
@given(k=st.integers(1, 4), values=st.lists(counts, min_size=12, max_size=12),
       min_increase=st.integers(1, 100))
def test_entry_is_could_fire(k: int, values: list[int | None], min_increase: int) -> None:
    params = replace(PARAMS, consecutive_windows=k, min_increase=min_increase)
    corrected = tuple(values[:k + 1])
    f = features(corrected, values[5], samples=values[6] or 0, uncorrected=values[7],
                 remap_failure=values[8], remap_pending=values[9],
                 remap_pending_before=values[10], retired_pages=values[11],
                 retired_pages_before=values[0])
    row = as_row(f)
    assert row_to_features(row, SOURCE_REAL, params) == f
    e = entry(row, k)
    quick = e.always or (e.increase is not None and e.increase >= min_increase)
    assert quick == could_fire(f, params) == row_could_fire(row, params)
    assert e.card == (f.node_id, f.gpu_index) and e.t0 == f.t0
