"""What the API handlers need from the running evaluator, and how responses are rendered.

``ApiContext`` is built once by the application (evaluator/app.py) and passed to
``gpu_health.evaluator.http.api.routes.add_api_routes``; handlers never reach for globals, the clock
or the environment themselves, so tests build one with an injected clock and a tmp_path database.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from gpu_health.clock import Clock, rfc3339
from gpu_health.errors import ApiError
from gpu_health.evaluator.http.api.auth import TokenSet
from gpu_health.evaluator.http.api.gate import ApiGate
from gpu_health.evaluator.store.db import Database

if TYPE_CHECKING:
    from gpu_health.evaluator.rules.actions import ActionPolicy
    from gpu_health.evaluator.rules.ruleset import RuleSet


# The store, or a callable returning it: the application opens its Database on start-up (after
# the routes are mounted) and drops it on shutdown, so it may hand over ``lambda: app.db``.
DatabaseSource = Database | Callable[[], Database | None]


@dataclass(frozen=True)
class ApiContext:
    """Dependencies of the read API. ``tokens`` None: no tokens file (see auth.authenticate).
    ``ruleset``: the active rule set, whose stats thresholds (minimum matured predictions and
    observed days) prediction-stats applies; None uses the statistics module's defaults."""

    db: DatabaseSource
    clock: Clock
    current_rule_version: str
    tokens: TokenSet | None
    listen_host: str
    registry: CollectorRegistry
    stall_minutes: int = 60
    retention_days: int = 180
    ruleset: RuleSet | None = None
    action_policy: ActionPolicy | None = None  # recommended actions (docs/actions.md)
    shadows: tuple[RuleSet, ...] = ()  # rules.shadow: versions run beside the active one
    basic_auth: bool = False  # --web.config.file's users gate every route (docs/security.md)
    gate: ApiGate | None = None  # load shedding (api.max_concurrency, ...); None: unbounded

    def ruleset_for(self, version: str | None) -> RuleSet | None:
        """The rule set whose gates and fault definition a version's statistics use: that
        version's own when it is the active or a shadow one, else the active one."""
        known = {rs.version: rs for rs in (*self.shadows, *([self.ruleset] if self.ruleset
                                                              else []))}
        return known.get(version or "", self.ruleset)

    def database(self) -> Database:
        """The open store, or ApiError(503) while there is none (start-up, shutdown)."""
        db = self.db if isinstance(self.db, Database) else self.db()
        if db is None:
            raise ApiError(503, "the store is not open (the evaluator is starting or stopping)")
        return db


def _default(value: object) -> Any:
    if isinstance(value, datetime):
        return rfc3339(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


# allow_nan=False: NaN is not JSON; a NaN ratio must fail loudly (500) rather than reach a client
# as a bare NaN token that half the JSON parsers reject and the other half read as a number.
dumps = partial(json.dumps, default=_default, allow_nan=False, ensure_ascii=False)
