"""The Prometheus source's pure parts: step windows, label sets, sentinels, XID derivation and
per-step reshaping (no server: range-query answers written in the shape Prometheus gives)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_health.contract import MEMORY_XIDS
from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.ingest.prometheus.assembly import Assembly, add_series
from gpu_health.evaluator.ingest.prometheus.metricsets import (
    DCGM,
    NVIDIA_SMI,
    OURS,
    MetricSet,
    counter_value,
    index_map,
    unknown_reason,
)
from gpu_health.evaluator.ingest.prometheus.steps import node_targets, step_results
from gpu_health.evaluator.ingest.prometheus.window import aligned, floored, next_window
from gpu_health.evaluator.ingest.prometheus.xids import LastXidTracker, counter_readings
from gpu_health.evaluator.model import CardKey

STEP = timedelta(minutes=1)
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def series(labels: dict[str, str], points: list[tuple[int, str]]) -> dict[str, Any]:
    """One matrix entry: ``points`` are (minutes after T0, value text)."""
    return {"metric": labels,
            "values": [[(T0 + m * STEP).timestamp(), v] for m, v in points]}


# -- windows ------------------------------------------------------------------------------------

def test_the_grid_is_counted_from_the_epoch() -> None:
    at = datetime(2026, 3, 1, 12, 0, 30, tzinfo=UTC)
    assert floored(at, STEP) == datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert aligned(at, STEP) == datetime(2026, 3, 1, 12, 1, tzinfo=UTC)
    assert floored(at, timedelta(seconds=15)) == datetime(2026, 3, 1, 12, 0, 30, tzinfo=UTC)


def test_first_cycle_reads_one_step_lag_behind_now() -> None:
    now = T0 + timedelta(minutes=10, seconds=30)
    w = next_window(None, now, step=STEP, lag=timedelta(minutes=2), max_catchup=timedelta(hours=1))
    assert w is not None and w.start == w.end == T0 + timedelta(minutes=8) and w.steps == 1


def test_nothing_due_within_one_step() -> None:
    now = T0 + timedelta(minutes=10, seconds=59)
    assert next_window(T0 + timedelta(minutes=8), now, step=STEP, lag=timedelta(minutes=2),
                       max_catchup=timedelta(hours=1)) is None


def test_an_outage_longer_than_max_catchup_leaves_the_older_steps_a_gap() -> None:
    cursor = T0
    now = T0 + timedelta(hours=3, minutes=2)
    w = next_window(cursor, now, step=STEP, lag=timedelta(minutes=2),
                    max_catchup=timedelta(hours=1))
    assert w is not None and w.steps == 60 and w.end == T0 + timedelta(hours=3)
    assert w.skipped == (T0 + STEP, w.start - STEP)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=40),
       st.integers(min_value=0, max_value=59), st.integers(min_value=1, max_value=120))
def test_cycles_read_every_step_once_or_skip_it_explicitly(gaps: list[int], lag_s: int,
                                                           catchup_min: int) -> None:
    """Whatever the cycle times, the windows and skipped ranges tile the grid: no step is read
    twice, none is lost without being counted as skipped."""
    cursor, now = None, T0
    seen: list[datetime] = []
    for gap in gaps:
        now += timedelta(seconds=gap * 7)
        w = next_window(cursor, now, step=STEP, lag=timedelta(seconds=lag_s),
                        max_catchup=timedelta(minutes=catchup_min))
        if w is None:
            continue
        assert w.steps <= catchup_min
        if w.skipped:
            first, last = w.skipped
            seen += [first + k * STEP for k in range((last - first) // STEP + 1)]
        seen += [w.start + k * STEP for k in range(w.steps)]
        cursor = w.end
    assert seen == sorted(set(seen))
    assert all(b - a == STEP for a, b in itertools.pairwise(seen))


# -- metric sets --------------------------------------------------------------------------------

def test_dcgm_node_from_either_spelling_of_the_hostname_label() -> None:
    acc = Assembly()
    old = {"gpu": "0", "UUID": "GPU-a", "Hostname": "n1", "instance": "10.0.0.1:9400"}
    new = {"gpu": "1", "UUID": "GPU-b", "hostname": "n1", "instance": "10.0.0.1:9400"}
    add_series(acc, DCGM, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", [series(old, [(0, "1")]),
                                                             series(new, [(0, "2")])], None, {})
    assert set(acc.readings) == {CardKey("n1", 0), CardKey("n1", 1)}


def test_dcgm_no_data_sentinels_are_unknown_never_a_count() -> None:
    for text in ("9223372036854775794", "9.223372036854776e+18", "9223372036854775792"):
        assert counter_value(text) is None and unknown_reason(text) == "no_data_sentinel"
    assert counter_value("9223372036854774784") == 9223372036854774784  # below the sentinels
    assert unknown_reason("NaN") == "unknown_value"
    acc = Assembly()
    labels = {"gpu": "0", "UUID": "GPU-a", "Hostname": "n1"}
    add_series(acc, DCGM, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
               [series(labels, [(0, "9223372036854775794")])], None, {})
    assert acc.dropped["no_data_sentinel"] == 1
    assert acc.readings[CardKey("n1", 0)][T0][1]["DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"] is None


def test_nvidia_smi_uuid_gets_the_gpu_prefix_back_and_its_index_from_gpu_info() -> None:
    info = series({"uuid": "00000000-0000-0000-0000-000000000000", "index": "3",
                   "instance": "h1:10346"}, [(0, "1")])
    indexes = index_map(NVIDIA_SMI, [info], None)
    assert indexes == {("h1", "GPU-00000000-0000-0000-0000-000000000000"): 3}
    acc = Assembly()
    add_series(acc, NVIDIA_SMI, "nvidia_smi_ecc_errors_corrected_aggregate_total",
               [series({"uuid": "00000000-0000-0000-0000-000000000000", "instance": "h1:10346"},
                       [(0, "0")])], None, indexes)
    uuid, values = acc.readings[CardKey("h1", 3)][T0]
    assert uuid == "GPU-00000000-0000-0000-0000-000000000000"
    assert values == {"nvidia_smi_ecc_errors_corrected_aggregate_total": 0}


def test_configured_label_names_and_tenant() -> None:
    ms = DCGM.relabelled(node="kubernetes_node", index="gpu_id", uuid="gpu_uuid", tenant="team")
    acc = Assembly()
    add_series(acc, ms, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", [series(
        {"gpu_id": "2", "gpu_uuid": "GPU-z", "kubernetes_node": "k1", "Hostname": "pod-7",
         "team": "ml"}, [(0, "5")])], None, {})
    assert acc.readings[CardKey("k1", 2)][T0][0] == "GPU-z"
    assert acc.tenants == {"k1": "ml"}


def test_a_node_name_the_api_could_not_address_is_dropped_and_counted() -> None:
    """Before: a 10 KB node name was stored and alerted, and every request naming it was a
    400; now it never enters the store."""
    acc = Assembly()
    add_series(acc, DCGM, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", [
        series({"gpu": "0", "UUID": "GPU-a", "Hostname": "n" * 254}, [(0, "5")]),
        series({"gpu": "0", "UUID": "GPU-b", "Hostname": "n" * 253}, [(0, "5")])], None, {})
    assert list(acc.readings) == [CardKey("n" * 253, 0)]
    assert acc.dropped == {"node_name_too_long": 1}


# -- XIDs ---------------------------------------------------------------------------------------

def dcgm_xid(gpu: str, points: list[tuple[int, str]], **extra: str) -> dict[str, Any]:
    return series({"gpu": gpu, "UUID": f"GPU-{gpu}", "Hostname": "n1", **extra}, points)


def test_last_value_gauge_becomes_counts_with_memory_xids_precreated() -> None:
    tracker = LastXidTracker()
    acc = Assembly()
    out = tracker.readings(acc, DCGM, [dcgm_xid("0", [(0, "0"), (1, "0"), (2, "48"), (3, "48"),
                                                      (4, "79"), (5, "48")])], None, {})
    by_time = {at: counts for at, (_, counts) in out[CardKey("n1", 0)].items()}
    zero = dict.fromkeys(MEMORY_XIDS, 0)
    assert by_time[T0] == zero and by_time[T0 + STEP] == zero
    assert by_time[T0 + 2 * STEP] == {**zero, 48: 1}
    assert by_time[T0 + 3 * STEP] == {**zero, 48: 1}  # a repeat of 48 is invisible (documented)
    assert by_time[T0 + 4 * STEP] == {**zero, 48: 1, 79: 1}
    assert by_time[T0 + 5 * STEP] == {**zero, 48: 2, 79: 1}


def test_first_value_is_a_baseline_and_state_carries_across_cycles() -> None:
    tracker = LastXidTracker()
    first = tracker.readings(Assembly(), DCGM, [dcgm_xid("0", [(0, "48")])], None, {})
    assert first[CardKey("n1", 0)][T0][1][48] == 0  # 48 was there before we looked: no event
    later = tracker.readings(Assembly(), DCGM, [dcgm_xid("0", [(1, "48"), (2, "63")])], None, {})
    counts = later[CardKey("n1", 0)][T0 + 2 * STEP][1]
    assert counts[48] == 0 and counts[63] == 1


def test_mig_instances_changing_together_count_once() -> None:
    tracker = LastXidTracker()
    out = tracker.readings(Assembly(), DCGM, [
        dcgm_xid("0", [(0, "0"), (1, "94")], GPU_I_ID="3"),
        dcgm_xid("0", [(0, "0"), (1, "94")], GPU_I_ID="4"),
    ], None, {})
    assert out[CardKey("n1", 0)][T0 + STEP][1][94] == 1


def test_counter_xids_read_as_counts_and_a_disagreement_is_left_out() -> None:
    acc = Assembly()
    base = {"gpu": "0", "uuid": "GPU-a", "node": "n1"}
    out = counter_readings(acc, OURS, [
        series({**base, "xid": "48"}, [(0, "2")]),
        series({**base, "xid": "63", "instance": "a"}, [(0, "1")]),
        series({**base, "xid": "63", "instance": "b"}, [(0, "4")]),
        series({**base, "xid": "oops"}, [(0, "1")]),
    ], None, {})
    assert out[CardKey("n1", 0)][T0][1] == {48: 2}
    assert acc.dropped["xid_series_without_identity"] == 1


# -- steps --------------------------------------------------------------------------------------

def test_steps_group_cards_by_node_and_keep_xid_only_cards() -> None:
    acc = Assembly()
    add_series(acc, OURS, "gpu_health_ecc_corrected_total", [
        series({"gpu": "0", "uuid": "GPU-a", "node": "n1"}, [(0, "5"), (2, "6")]),
        series({"gpu": "0", "uuid": "GPU-c", "node": "n2"}, [(0, "1")]),
    ], None, {})
    xids = counter_readings(acc, OURS, [
        series({"gpu": "1", "uuid": "GPU-b", "node": "n1", "xid": "48"}, [(0, "1")])], None, {})
    target = node_targets("http://prom:9090/")
    out = step_results(acc, OURS, xids, target, {"n1": "team-a"})
    assert [at for at, _ in out] == [T0, T0 + 2 * STEP]  # minute 1: nothing, a gap
    first = {r.target.node_id: r for r in out[0][1]}
    assert first["n1"].target == Target("prom:9090", "n1", "team-a", "http", "#n1")
    assert first["n1"].target.url == "http://prom:9090#n1"
    cards = {c.gpu_index: c for c in first["n1"].extraction.cards}
    assert cards[0].counters.ecc_corrected_total == 5
    assert cards[0].counters.ecc_uncorrected_total is None
    assert cards[1].counters.all_unknown() and cards[1].xids == ((48, 1),)
    assert first["n2"].target.tenant is None



def test_a_step_carries_the_details_our_names_give() -> None:
    """The link width, the thermal slowdown (seconds -> whole microseconds) and the fabric
    state and status reach the step's card reading; the power-cap reason and a series with a reason
    nobody defined are read and left out; a duplicated detail that disagrees is unknown."""
    card = {"gpu": "0", "uuid": "GPU-a", "node": "n1"}
    acc = Assembly()
    add_series(acc, OURS, "gpu_health_ecc_corrected_total", [series(card, [(0, "5")])], None, {})
    add_series(acc, OURS, "gpu_health_pcie_link_width", [series(card, [(0, "8")])], None, {})
    add_series(acc, OURS, "gpu_health_clock_slowdown_seconds_total", [
        series({**card, "reason": "hw_thermal_slowdown"}, [(0, "61.5")]),
        series({**card, "reason": "sw_power_cap"}, [(0, "3.25")]),
        series({**card, "reason": "cosmic_rays"}, [(0, "1")]),
        series({**card, "reason": "sw_thermal_slowdown", "instance": "a"}, [(0, "1")]),
        series({**card, "reason": "sw_thermal_slowdown", "instance": "b"}, [(0, "2")]),
    ], None, {})
    add_series(acc, OURS, "gpu_health_fabric_status_success", [series(card, [(0, "1")])], None,
               {})
    add_series(acc, OURS, "gpu_health_fabric_state", [
        series({**card, "state": state}, [(0, "1" if state == "completed" else "0")])
        for state in ("not_supported", "not_started", "in_progress", "completed")], None, {})
    (_, results), = step_results(acc, OURS, {}, node_targets("http://prom:9090"), {})
    (reading,) = results[0].extraction.cards
    assert reading.details.pcie_link_width == 8 and reading.details.pcie_link_width_max is None
    assert reading.details.hw_thermal_slowdown_us == 61_500_000
    assert reading.details.sw_thermal_slowdown_us is None  # two series, two values: unknown
    assert reading.details.fabric_status_success == 1
    assert reading.details.fabric_state == 3  # completed, its index in FABRIC_STATES
    assert acc.dropped == {"duplicate_series": 1}


def test_dcgm_gives_the_pcie_replays_and_its_no_data_sentinel_is_unknown() -> None:
    """dcgm-exporter's default list holds DCGM_FI_DEV_PCIE_REPLAY_COUNTER (a counter, "Total
    number of PCIe retries"), the only one of the stored details it exports."""
    cards = [{"gpu": str(i), "UUID": f"GPU-{i}", "Hostname": "n1"} for i in range(2)]
    acc = Assembly()
    add_series(acc, DCGM, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
               [series(card, [(0, "0")]) for card in cards], None, {})
    add_series(acc, DCGM, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
               [series(cards[0], [(0, "67")]), series(cards[1], [(0, "9223372036854775794")])],
               None, {})
    (_, results), = step_results(acc, DCGM, {}, node_targets("http://prom:9090"), {})
    replays = {r.gpu_index: r.details.pcie_replays for r in results[0].extraction.cards}
    assert replays == {0: 67, 1: None}
    assert acc.dropped == {"no_data_sentinel": 1}


# -- change points ------------------------------------------------------------------------------

SERIES = st.tuples(st.sampled_from(["DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
                                    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"]),
                   st.sampled_from(["0", "1"]), st.sampled_from(["GPU-a", "GPU-b"]),
                   st.sampled_from(["x", "y"]))
# Our names with the details: the slowdown's series routed by reason (sw_power_cap: not kept)
OURS_SERIES = st.tuples(st.sampled_from([
    "gpu_health_ecc_corrected_total", "gpu_health_pcie_link_width",
    "gpu_health_clock_slowdown_seconds_total|hw_thermal_slowdown",
    "gpu_health_clock_slowdown_seconds_total|sw_power_cap",
    "gpu_health_fabric_state|completed", "gpu_health_fabric_state|in_progress"]),
    st.sampled_from(["0", "1"]), st.sampled_from(["GPU-a", "GPU-b"]), st.sampled_from(["x", "y"]))
VALUE = st.one_of(st.none(), st.sampled_from(["0", "1", "2", "NaN", "0.25"]))
GRID = st.integers(min_value=1, max_value=25).flatmap(
    lambda n: st.lists(st.lists(VALUE, min_size=n, max_size=n), min_size=5, max_size=5))
CUTS = st.lists(st.integers(min_value=1, max_value=24), max_size=3)


def _point(labels: dict[str, str], t: int, text: str) -> dict[str, Any]:
    return {"metric": labels, "values": [[(T0 + t * STEP).timestamp(), text]]}


def _differs(a: str, b: str) -> bool:
    return float(a) != float(b)  # PromQL's == on float values: NaN never equals


@settings(max_examples=300, deadline=None)
@given(st.lists(SERIES, min_size=1, max_size=5, unique=True), GRID, CUTS)
def test_change_points_rebuild_the_step_by_step_readings(
        series: list[tuple[str, str, str, str]], grid: list[list[str | None]],
        cuts: list[int]) -> None:
    """What the server's change-point answers give (``changes.py``) equals reading every step
    (``add_series``), for duplicate series, UUID changes, gaps and unknown values."""
    labels = [{"gpu": gpu, "UUID": uuid, "Hostname": "n1", "instance": inst}
              for _, gpu, uuid, inst in series]
    _rebuilt(DCGM, [m for m, *_ in series], labels, grid, cuts)


@settings(max_examples=300, deadline=None)
@given(st.lists(OURS_SERIES, min_size=1, max_size=5, unique=True), GRID, CUTS)
def test_change_points_rebuild_the_details_too(
        series: list[tuple[str, str, str, str]], grid: list[list[str | None]],
        cuts: list[int]) -> None:
    """The same with our names: the details (a slowdown reason in seconds, the link width, the
    fabric state set) come out of both paths alike, a reason the store does not keep out of
    neither."""
    metrics = [m.partition("|")[0] for m, *_ in series]
    labels = [{"gpu": gpu, "uuid": uuid, "node": "n1", "instance": inst,
               **({("state" if "fabric" in m else "reason"): m.partition("|")[2]}
                  if "|" in m else {})}
              for m, gpu, uuid, inst in series]
    _rebuilt(OURS, metrics, labels, grid, cuts)


def _rebuilt(ms: MetricSet, metrics: list[str], labels: list[dict[str, str]],
             grid: list[list[str | None]], cuts: list[int]) -> None:
    from gpu_health.evaluator.ingest.prometheus.assembly import readings
    from gpu_health.evaluator.ingest.prometheus.changes import GONE, ChangeTracker

    steps = len(grid[0])
    # Step by step: the oracle.
    expected: dict[tuple[CardKey, int], tuple[Any, ...]] = {}
    for t in range(steps):
        acc = Assembly()
        for i, metric in enumerate(metrics):
            text = grid[i][t]
            if text is not None:
                add_series(acc, ms, metric, [_point(labels[i], t, text)], None, {})
        for key, uuid, _, counters, details in readings(acc, ms):
            expected[(key, t)] = (uuid, counters, details)
    # Change points, folded chunk by chunk (the state crosses the chunk edges).
    tracker = ChangeTracker(ms)
    state: dict[CardKey, tuple[Any, ...] | None] = {}
    got: dict[tuple[CardKey, int], tuple[Any, ...]] = {}
    edges = sorted({0, *[c for c in cuts if c < steps], steps})
    for lo, hi in itertools.pairwise(edges):
        by_metric: dict[str, list[dict[str, Any]]] = {}
        for i, metric in enumerate(metrics):
            for t in range(lo, hi):
                now, before = grid[i][t], (grid[i][t - 1] if t else None)
                if now is not None and (t == 0 or before is None or _differs(now, before)):
                    by_metric.setdefault(metric, []).append(_point(labels[i], t, now))
                elif now is None and t and before is not None:
                    by_metric.setdefault(metric, []).append(
                        _point({**labels[i], GONE: "1"}, t, before))
        events = {(key, int((at - T0) / STEP)): reading
                  for key, at, reading in tracker.fold(by_metric, {})}
        for t in range(lo, hi):
            for (key, when), reading in events.items():
                if when == t:
                    state[key] = reading
            for key, reading in state.items():
                if reading is not None:
                    got[(key, t)] = reading
    assert got == expected
