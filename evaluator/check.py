"""``gpu-health-evaluator check``: one node's GPU health as a Nagios-style check (docs/slurm.md).

Made for Slurm's ``HealthCheckProgram``, job prolog/epilog and NHC: it asks the evaluator's API
for the node's cards (``capabilities``: recommended action, stalled collection) and its open
predictions (``predictions?status=pending``), prints one summary line and one line per problem,
and exits with the Nagios code:

- 0 OK: the evaluator knows the node and reports no problem;
- 1 WARNING: a card's collection stalled, or its action is ``restart_workload``;
- 2 CRITICAL: an open fault prediction, or an action ``replace_candidate``, ``reboot_node`` or
  ``reset_gpu``;
- 3 UNKNOWN: the evaluator is unreachable, slow, refuses the token, does not know the node, or
  answers something unreadable; the check's own usage errors too.

Unreachable is UNKNOWN, never OK: a health check that passes when it cannot ask is worse than
none. Every request shares one deadline (``--timeout``, 8 s by default, under Slurm's 60 s kill),
and an answer larger than :data:`MAX_BODY` is refused. :func:`assess` is pure.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlencode

import aiohttp

from gpu_health.evaluator.outbound import ClientOptions, client_session

OK, WARNING, CRITICAL, UNKNOWN = 0, 1, 2, 3
STATE_NAMES: Final = ("OK", "WARNING", "CRITICAL", "UNKNOWN")
CRITICAL_ACTIONS: Final = frozenset(("replace_candidate", "reboot_node", "reset_gpu"))
WARNING_ACTIONS: Final = frozenset(("restart_workload",))
MAX_BODY: Final = 4 * 1024 * 1024
MAX_TOKEN_FILE: Final = 4096
DEFAULT_TIMEOUT_S: Final = 8.0
API: Final = "/api/v1/gpu-health"


@dataclass(frozen=True, slots=True)
class Report:
    """The check's answer: exit code, summary line and one line per problem."""

    code: int
    summary: str
    details: tuple[str, ...] = ()

    def text(self) -> str:
        head = f"GPU-HEALTH {STATE_NAMES[self.code]} - {self.summary}"
        return "\n".join((head, *self.details)) + "\n"


def unknown(why: str) -> Report:
    return Report(UNKNOWN, why)


def assess(node: str, cards: Mapping[str, Any], predictions: Mapping[str, Any]) -> Report:
    """The report for one node from the two API answers (pure)."""
    items, open_items = cards.get("items"), predictions.get("items")
    if not isinstance(items, list) or not isinstance(open_items, list):
        return unknown(f"node {node}: the evaluator's answer has no item list")
    items = [i for i in items if isinstance(i, dict)]
    open_items = [i for i in open_items if isinstance(i, dict)]
    total = predictions.get("total")
    open_count = total if isinstance(total, int) and total >= len(open_items) else len(open_items)
    problems: list[tuple[int, str]] = []
    for item in open_items:
        problems.append((CRITICAL, f"GPU {item.get('gpu_index')}: fault predicted by "
                                   f"{item.get('rule_version')} ({item.get('signal')}), window "
                                   f"until {item.get('window_end')}"))
    for card in items:
        gpu = card.get("gpu_index")
        action = card.get("action") or {}
        name = action.get("action") if isinstance(action, dict) else None
        if name in CRITICAL_ACTIONS or name in WARNING_ACTIONS:
            level = CRITICAL if name in CRITICAL_ACTIONS else WARNING
            problems.append((level, f"GPU {gpu}: {name}: {action.get('reason')} (recommended by "
                                    f"{action.get('policy')}, not a diagnosis)"))
        if card.get("collection_stalled") is True:
            problems.append((WARNING, f"GPU {gpu}: collection stalled (last sample "
                                      f"{card.get('last_sample_at')})"))
    code = max((level for level, _ in problems), default=OK)
    summary = (f"node {node}: {len(items)} cards, {open_count} open predictions, "
               f"{len(problems)} problems")
    return Report(code, summary, tuple(line for _, line in sorted(problems, key=_worst_first)))


def _worst_first(problem: tuple[int, str]) -> int:
    return -problem[0]


def read_token(path: Path | None) -> str | None:
    """The bearer token from its file (first line, bounded); ValueError on a bad file."""
    if path is None:
        return None
    with path.open("rb") as handle:
        raw = handle.read(MAX_TOKEN_FILE + 1)
    if len(raw) > MAX_TOKEN_FILE:
        raise ValueError(f"{path}: more than {MAX_TOKEN_FILE} bytes, not a token file")
    token = raw.decode("utf-8", "replace").strip().splitlines()
    if not token or not token[0].strip():
        raise ValueError(f"{path}: empty")
    return token[0].strip()


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with session.get(url, allow_redirects=False) as response:
        body = await response.content.read(MAX_BODY + 1)
        if len(body) > MAX_BODY:
            raise ValueError(f"answer larger than {MAX_BODY} bytes")
        try:
            return response.status, json.loads(body)
        except ValueError:
            return response.status, None


def _failure(node: str, status: int, body: Any) -> Report | None:
    """An UNKNOWN report for a non-200 answer, else None."""
    if status == 200 and isinstance(body, dict):
        return None
    if status == 404:
        return unknown(f"node {node} is not known to the evaluator (or not visible to this "
                       "token)")
    if status in (401, 403):
        return unknown(f"the evaluator refused the token (HTTP {status})")
    error = body.get("error") if isinstance(body, dict) else None
    return unknown(f"the evaluator answered HTTP {status}" + (f": {error}" if error else ""))


async def check(base_url: str, node: str, *, token: str | None, timeout_s: float,
                ca_file: Path | None = None) -> Report:
    """Ask the evaluator about ``node`` within ``timeout_s``; never raises."""
    base = base_url.rstrip("/") + API
    urls = (f"{base}/capabilities?{urlencode({'node_id': node})}",
            f"{base}/predictions?{urlencode({'node_id': node, 'status': 'pending', 'limit': 500})}")
    options = ClientOptions(connect_timeout=timeout_s, bearer_token=token, ca_file=ca_file)
    try:
        async with asyncio.timeout(timeout_s):
            async with client_session(options) as session:
                answers = await asyncio.gather(*(_get(session, url) for url in urls))
    except TimeoutError:
        return unknown(f"no answer from the evaluator within {timeout_s:g} s")
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        return unknown(f"cannot ask the evaluator: {type(exc).__name__}: {exc}"[:300])
    for status, body in answers:
        failed = _failure(node, status, body)
        if failed is not None:
            return failed
    (_, cards), (_, predictions) = answers
    return assess(node, cards, predictions)


def check_main(args: Any, out: Any) -> int:
    """Run the check from parsed arguments; print the report; return its Nagios code."""
    node = args.node or socket.gethostname()
    try:
        token = read_token(args.token_file)
    except (OSError, ValueError) as exc:
        report = unknown(f"cannot read the token file: {exc}")
    else:
        report = asyncio.run(check(args.evaluator, node, token=token, timeout_s=args.timeout,
                                   ca_file=args.ca_file))
    out.write(report.text())
    out.flush()
    return report.code


def parse_timeout(text: str) -> float:
    """``--timeout``: seconds, 0.1 to 55 (Slurm kills a health check after 60 s)."""
    value = float(text)
    if not 0.1 <= value <= 55:
        raise ValueError("must be between 0.1 and 55 seconds")
    return value


__all__: Sequence[str] = ("Report", "assess", "check", "check_main", "read_token")
