"""The project's single exception hierarchy.

Every error the code raises on purpose derives from :class:`GpuHealthError`. Loops and request
handlers have exactly one catch-all each; it logs the error and counts it in a self-metric under
``reason`` (a short, low-cardinality label value), so nothing is swallowed silently.
"""

from __future__ import annotations


class GpuHealthError(Exception):
    """Base class. ``reason`` is a short label value for error-counting self-metrics."""

    reason: str = "error"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class ConfigError(GpuHealthError):
    """Invalid configuration or arguments. Carries every problem found, not just the first."""

    reason = "config"

    def __init__(self, problems: list[str] | tuple[str, ...] | str) -> None:
        items = (problems,) if isinstance(problems, str) else tuple(problems)
        self.problems: tuple[str, ...] = items
        lines = "\n".join(f"  - {p}" for p in items)
        super().__init__(f"invalid configuration ({len(items)} problem(s)):\n{lines}")


class CollectError(GpuHealthError):
    """A vendor tool could not be run or its output could not be used (exporter side)."""

    reason = "collect"


class ParseError(GpuHealthError):
    """Text that does not have the shape a parser expects."""

    reason = "parse"


class ScrapeError(GpuHealthError):
    """A scrape target failed: connection, timeout, HTTP status, size cap or bad exposition."""

    reason = "scrape"


class StoreError(GpuHealthError):
    """The database refused or failed an operation."""

    reason = "store"


class RuleError(GpuHealthError):
    """A rule set is invalid or conflicts with the frozen history in the store."""

    reason = "rule"


class ApiError(GpuHealthError):
    """A request the API refuses: carries the HTTP status and the offending parameter."""

    reason = "api"

    def __init__(self, status: int, message: str, *, param: str | None = None,
                 challenge: str | None = None, retry_after: int | None = None) -> None:
        super().__init__(message, reason=f"http_{status}")
        self.status = status
        self.param = param
        self.challenge = challenge  # a 401's WWW-Authenticate, when not the bearer one
        self.retry_after = retry_after  # seconds, sent as Retry-After (a shed 503)


class ToolNotFound(CollectError):
    """A vendor tool's binary is not installed (or not executable) where the config points.

    The exporter treats this as "vendor absent on this node" until the tool has been seen once;
    after that, a vanished tool is a collection failure (the tool was uninstalled under us).
    """

    reason = "not_found"


class DiscoveryError(GpuHealthError):
    """A target discovery source (file_sd file, http_sd endpoint) could not be used."""

    reason = "discovery"


class BacktestError(GpuHealthError):
    """A backtest cannot go on: its history source (a Prometheus server, an events file) gave
    an answer it cannot use, or its database is not a backtest database."""

    reason = "backtest"


class ListenError(GpuHealthError):
    """A server cannot listen on its configured address (taken, not ours, not resolvable)."""

    reason = "listen"


class SourceError(GpuHealthError):
    """A history source (a Prometheus-compatible server) failed or answered something unusable.
    ``reason`` names the failure (``unreachable``, ``http_error``, ``bad_response``, ``timeout``,
    ``too_large``, ``too_many_series``)."""

    reason = "source"


class OutputError(GpuHealthError):
    """A file the program writes (a report, a rule file) could not be written. Nothing
    half-written is left behind, and nothing outside the named folder is touched."""

    reason = "output"
