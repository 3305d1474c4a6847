"""Rule parameters: names, types, valid ranges, cross-checks, and the frozen subset (pure).

Every key of a rule file is described once here (:data:`RULE_PARAMS`, a table declared like
the config file's sections, ``gpu_health.evaluator.setting_tables``); the loader, the environment
overrides and the docs all follow this table. Parameters in :data:`FROZEN_KEYS` decide *which*
predictions are made and with which window, so they are hashed into the rule version. The others
only steer the worker (``enabled``, ``scan_interval_minutes``) or the statistics gates
(``stats_min_*``) and can change without creating a new version: predictions made under either
value are the same predictions.

``fault_xids`` (which memory XIDs count as fault events, see
:mod:`gpu_health.evaluator.rules.faults`) and ``cap_busiest_hours`` (how many of each growth
window's busiest hours the growth gates cap at the next busiest) are frozen too, but left out of
the hashed parameters while they have their default (empty: ECC-only; 0: none), so every
version recorded before the parameter existed keeps its hash and its history. So are the weak
layer's ``weak_gate`` (``none``: its signals are not read; ``evidence``: they are listed beside a
prediction; ``require``: a trend prediction needs one of them too), ``weak_slowdown_minutes``
(the thermal slowdown time a growth window needs for the thermal-slowdown signal) and
``weak_pcie_replays`` (the PCIe replays a growth window needs for the replay signal) and
``weak_nvlink_errors`` (the same for the card's NVLink errors); 0, their default, switches the
signal off, so versions made before it keep their predictions.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any, Final

from gpu_health.evaluator.rules.faults import MEMORY_XIDS
from gpu_health.evaluator.setting_tables import Setting, Table

# How the weak layer takes part (weak_gate), see the module docstring.
# ("none", not "off": YAML reads a bare off as false.)
WEAK_GATES: Final = ("none", "evidence", "require")


@dataclass(frozen=True, slots=True)
class RuleParams:
    """The effective parameters of a rule set (file values plus accepted overrides)."""

    enabled: bool
    scan_interval_minutes: float
    window_days: int
    growth_window_hours: int
    baseline_days: int
    ratio: float
    min_increase: int
    consecutive_windows: int
    min_samples: int
    boundary_max_age_minutes: int
    stats_min_matured: int
    stats_min_observed_days: int
    fault_xids: tuple[int, ...] = ()
    cap_busiest_hours: int = 0
    weak_gate: str = "none"
    weak_slowdown_minutes: int = 60
    weak_pcie_replays: int = 0
    weak_nvlink_errors: int = 0

    @property
    def reads_weak(self) -> bool:
        """Whether the weak layer's signals are read (their features extracted)."""
        return self.weak_gate != "none"

    @property
    def growth_window(self) -> timedelta:
        return timedelta(hours=self.growth_window_hours)

    @property
    def baseline(self) -> timedelta:
        return timedelta(days=self.baseline_days)

    @property
    def boundary_max_age(self) -> timedelta:
        return timedelta(minutes=self.boundary_max_age_minutes)

    @property
    def scan_interval(self) -> timedelta:
        return timedelta(minutes=self.scan_interval_minutes)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def frozen_dict(self) -> dict[str, Any]:
        """The parameters hashed into the rule version (keys at their backward-compatible
        default left out, see the module docstring)."""
        values = self.as_dict()
        return {key: _json_value(values[key]) for key in FROZEN_KEYS
                if key not in HASH_DEFAULTS or values[key] != HASH_DEFAULTS[key]}


def _range(lo: float, hi: float | None = None) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if value < lo or (hi is not None and value > hi):
            bound = f">= {lo}" if hi is None else f"between {lo} and {hi}"
            return f"must be {bound}, got {value!r}"
        return None

    return check


def _one_of(*allowed: object) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if value not in allowed:
            return f"must be one of {', '.join(map(str, allowed))}, got {value!r}"
        return None

    return check


def _positive_finite(value: Any) -> str | None:
    if not math.isfinite(value) or value <= 0:
        return f"must be a finite number > 0, got {value!r}"
    return None


def _json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _memory_xids(value: Any) -> str | None:
    others = [x for x in value if x not in MEMORY_XIDS]
    if others:
        return (f"only memory-related XIDs ({', '.join(map(str, MEMORY_XIDS))}) can be fault "
                f"events, got {', '.join(map(str, others))}")
    return None


# Each key of a rule file, declared the way the config file's sections are (a Table of
# Settings): kind, the value a file may leave out (None: the file must give it), the check of
# the typed value, and what it means.
RULE_PARAMS: Final = Table("", (
    Setting("enabled", "bool", True,
            help="master switch; a missing key means enabled (fail-open)"),
    Setting("scan_interval_minutes", "float", None, check=_range(0.01, 1440),
            help="minutes between worker ticks (fractions allowed: 0.05 = 3 s, for tests)"),
    Setting("window_days", "int", None, check=_one_of(7, 30),
            help="hit window N: (t0, t0 + N days]"),
    Setting("growth_window_hours", "int", None, check=_range(1, 168), help="growth window g"),
    Setting("baseline_days", "int", None, check=_range(1, 90), help="baseline span B"),
    Setting("ratio", "float", None, check=_positive_finite,
            help="last window vs baseline mean per window"),
    Setting("min_increase", "int", None, check=_range(1),
            help="minimum correctable increase in the last window"),
    Setting("consecutive_windows", "int", None, check=_range(1, 24),
            help="k windows strictly increasing (1: no shape gate)"),
    Setting("min_samples", "int", None, check=_range(0),
            help="samples needed in the baseline span"),
    Setting("boundary_max_age_minutes", "int", None, check=_range(1, 1440),
            help="oldest sample usable as a boundary value (and freshness of t0)"),
    Setting("stats_min_matured", "int", None, check=_range(1),
            help="matured predictions before ratios show"),
    Setting("stats_min_observed_days", "int", None, check=_range(1),
            help="observed days before ratios show"),
    Setting("fault_xids", "int_list", (), check=_memory_xids,
            help="memory XIDs whose increase is a fault event next to uncorrectable ECC growth "
                 "(empty: ECC-only)"),
    Setting("cap_busiest_hours", "int", 0, check=_range(0, 24),
            help="per growth window, its n busiest hours count as its next busiest in the "
                 "growth gates (0: none; n >= 2: no burst confined to n - 1 hours can fire the "
                 "signal)"),
    Setting("weak_gate", "string", "none", check=_one_of(*WEAK_GATES),
            help="the weak layer: none (not read), evidence (listed beside a prediction), "
                 "require (a trend prediction needs a weak signal too; strong ones never do)"),
    Setting("weak_slowdown_minutes", "int", 60, check=_range(1, 1440),
            help="thermal slowdown time within the last growth window that fires the weak "
                 "thermal_slowdown signal"),
    Setting("weak_pcie_replays", "int", 0, check=_range(0, 10**9),
            help="PCIe replays within the last growth window that fire the weak "
                 "pcie_replays_rising signal (0: the signal is off)"),
    Setting("weak_nvlink_errors", "int", 0, check=_range(0, 10**9),
            help="NVLink errors (every counter of every link) within the last growth window "
                 "that fire the weak nvlink_errors_rising signal (0: the signal is off)"),
))
SPECS: Final[tuple[Setting, ...]] = RULE_PARAMS.settings
SPEC_BY_KEY: Final[dict[str, Setting]] = {spec.key: spec for spec in SPECS}
KEYS: Final[tuple[str, ...]] = RULE_PARAMS.keys
# Keys a rule file may leave out, with the value they then have.
OPTIONAL_KEYS: Final[dict[str, Any]] = {s.key: s.default for s in SPECS if s.default is not None}
FROZEN_KEYS: Final[tuple[str, ...]] = (
    "window_days",
    "growth_window_hours",
    "baseline_days",
    "ratio",
    "min_increase",
    "consecutive_windows",
    "min_samples",
    "boundary_max_age_minutes",
    "fault_xids",
    "cap_busiest_hours",
    "weak_gate",
    "weak_slowdown_minutes",
    "weak_pcie_replays",
    "weak_nvlink_errors",
)
# Frozen keys added after versions were recorded: at this value they are not hashed.
HASH_DEFAULTS: Final[dict[str, Any]] = {"fault_xids": (), "cap_busiest_hours": 0,
                                        "weak_gate": "none", "weak_slowdown_minutes": 60,
                                        "weak_pcie_replays": 0, "weak_nvlink_errors": 0}

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def coerce(key: str, value: Any) -> tuple[Any, str | None]:
    """A YAML or environment value -> (typed value, problem). Strings are parsed; bools are
    never numbers (YAML ``ratio: true`` is a mistake, not 1)."""
    spec = SPEC_BY_KEY[key]
    typed: Any
    if spec.kind == "int_list":
        return _coerce_list(key, value, spec)
    if spec.kind == "string":
        if isinstance(value, bool):  # YAML reads a bare off, no or false as false
            return None, f"{key}: must be text, got {value!r} (a bare off reads as false)"
        typed = str(value).strip()
        problem = None if spec.check is None else spec.check(typed)
        return (None, f"{key}: {problem}") if problem else (typed, None)
    if spec.kind == "bool":
        if isinstance(value, bool):
            return value, None
        text = str(value).strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE, None
        return None, f"{key}: must be true or false, got {value!r}"
    if isinstance(value, bool):
        return None, f"{key}: must be a number, got {value!r}"
    try:
        if spec.kind == "int":
            typed = value if isinstance(value, int) else int(str(value).strip())
        else:
            typed = float(value) if isinstance(value, int | float) else float(str(value).strip())
    except ValueError:
        return None, f"{key}: must be {'an integer' if spec.kind == 'int' else 'a number'}, " \
                     f"got {value!r}"
    problem = None if spec.check is None else spec.check(typed)
    return (None, f"{key}: {problem}") if problem else (typed, None)


def _coerce_list(key: str, value: Any, spec: Setting) -> tuple[Any, str | None]:
    """A YAML list of whole numbers, or a comma-separated string from the environment
    (``48,63`` or empty for none) -> a sorted tuple without duplicates."""
    items: list[Any]
    if isinstance(value, str):
        text = value.strip().removeprefix("[").removesuffix("]")
        parts = [part.strip() for part in text.split(",") if part.strip()]
        items = [int(p) if p.isascii() and p.isdigit() else p for p in parts]
    elif isinstance(value, list):
        items = value
    else:
        return None, f"{key}: must be a list of whole numbers, got {value!r}"
    bad = [item for item in items if not isinstance(item, int) or isinstance(item, bool)]
    if bad:
        return None, f"{key}: must be a list of whole numbers, got {bad[0]!r} in {value!r}"
    numbers = {int(item) for item in items}
    typed = tuple(sorted(numbers))
    problem = None if spec.check is None else spec.check(typed)
    return (None, f"{key}: {problem}") if problem else (typed, None)


def cross_problems(values: Mapping[str, Any]) -> list[tuple[str, tuple[str, ...]]]:
    """Checks across keys: (message, keys involved). The ratio is bounded by B / g (the last
    window can at most hold the whole baseline increase), so a larger ratio is a rule that can
    never fire: dead code the reference design warns about. The capped busiest hours must
    leave one hour of a growth window to cap them at."""
    problems: list[tuple[str, tuple[str, ...]]] = []
    g = values["growth_window_hours"]
    b_hours = values["baseline_days"] * 24
    if b_hours < g:
        problems.append((
            f"baseline_days ({values['baseline_days']} d) must cover at least one growth window "
            f"({g} h)", ("baseline_days", "growth_window_hours"),
        ))
    elif values["ratio"] > b_hours / g:
        problems.append((
            f"ratio {values['ratio']} can never be reached: the last {g} h window holds at most "
            f"{b_hours / g:g}x the baseline mean",
            ("ratio", "baseline_days", "growth_window_hours"),
        ))
    capped = values.get("cap_busiest_hours", 0)
    if capped >= g:
        problems.append((
            f"cap_busiest_hours ({capped}) must be below the growth window's {g} hours",
            ("cap_busiest_hours", "growth_window_hours"),
        ))
    return problems


def canonical_json(values: Mapping[str, Any]) -> str:
    """Stable JSON of the frozen parameters (sorted keys, no spaces) for hashing and storage."""
    return json.dumps(dict(values), sort_keys=True, separators=(",", ":"))


def params_hash(params: RuleParams) -> str:
    return hashlib.sha256(canonical_json(params.frozen_dict()).encode()).hexdigest()
