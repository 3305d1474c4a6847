"""``gpu-health-evaluator check``: one node's GPU health as a Nagios-style check (docs/slurm.md).

Made for Slurm's ``HealthCheckProgram``, job prolog/epilog and NHC: it asks the evaluator's API
for the node's cards (``capabilities``: recommended action, stalled collection) and its open
predictions (``predictions?status=pending``), prints one summary line and one line per problem,
and exits with the Nagios code:

- 0 OK: the node's cards are really monitored (real readings, at least one known counter,
  every listed card sampled, none stalled) and the evaluator reports no problem;
- 1 WARNING: a card's collection stalled, a card has every counter unknown, the last scrape
  listed cards that have no reading, or a card's action is ``restart_workload``;
- 2 CRITICAL: an open fault prediction, or an action ``replace_candidate``, ``reboot_node`` or
  ``reset_gpu`` (CRITICAL wins over everything: a known fault drains even when another card of
  the node is unknown);
- 3 UNKNOWN: the node is not monitored (no card with real readings: all counters unknown, no
  card at all, or simulated data only), or the evaluator is unreachable, slow, refuses the
  token, does not know the node, or answers something unreadable; the check's own usage errors
  too.

Unmonitored or unreachable is UNKNOWN, never OK: a health check that passes when it cannot know
is worse than none.

``--format node-problem-detector`` speaks node-problem-detector's custom plugin protocol
instead (exit 0 no problem, 1 problem, 2 unknown; one line on stdout, its condition message):
OK -> 0; CRITICAL -> 1 with the worst problem as the message; WARNING -> 2 (a stalled
collection, unknown counters or a job to restart: the node cannot be vouched for, yet no
fault of it is known, so the condition goes Unknown, visible with its reason, and a taint rule
keyed on True does not act on it); UNKNOWN -> 2.

Every request and the token file share one deadline (``--timeout``, 8 s by default, under
Slurm's 60 s kill); a body is read whole, however many pieces it arrives in, and an answer
larger than :data:`MAX_BODY` is refused. :func:`assess` is pure.
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
from gpu_health.files import NotReadable, read_regular

OK, WARNING, CRITICAL, UNKNOWN = 0, 1, 2, 3
STATE_NAMES: Final = ("OK", "WARNING", "CRITICAL", "UNKNOWN")
CRITICAL_ACTIONS: Final = frozenset(("replace_candidate", "reboot_node", "reset_gpu"))
WARNING_ACTIONS: Final = frozenset(("restart_workload",))
MAX_BODY: Final = 4 * 1024 * 1024
MAX_TOKEN_FILE: Final = 4096
DEFAULT_TIMEOUT_S: Final = 8.0
API: Final = "/api/v1/gpu-health"
CHECK_FORMATS: Final = ("nagios", "node-problem-detector")
NPD_OK, NPD_PROBLEM, NPD_UNKNOWN = 0, 1, 2  # node-problem-detector's plugin status codes
NPD_CODES: Final = {OK: NPD_OK, WARNING: NPD_UNKNOWN, CRITICAL: NPD_PROBLEM, UNKNOWN: NPD_UNKNOWN}
NPD_MAX_OUTPUT: Final = 80  # node-problem-detector's max_output_length default


@dataclass(frozen=True, slots=True)
class Report:
    """The check's answer: exit code, summary line and one line per problem."""

    code: int
    summary: str
    details: tuple[str, ...] = ()
    headline: str | None = None  # the one line a plugin message leads with, when not a detail

    def text(self) -> str:
        head = f"GPU-HEALTH {STATE_NAMES[self.code]} - {self.summary}"
        return "\n".join((head, *self.details)) + "\n"

    def plugin(self, max_length: int = NPD_MAX_OUTPUT) -> tuple[int, str]:
        """node-problem-detector's exit code and message (one line, ``max_length`` at most)."""
        code = NPD_CODES[self.code]
        message = self.headline or (self.details[0] if self.details and self.code != OK
                                    else self.summary)
        if self.code != OK:
            message = f"{STATE_NAMES[self.code]}: {message}"
        line = " ".join(message.split())
        return code, (line if len(line) <= max_length else line[:max_length - 3] + "...")


def unknown(why: str) -> Report:
    return Report(UNKNOWN, why)


def _objects(answer: Mapping[str, Any], key: str) -> list[dict[str, Any]] | None:
    """``answer[key]`` when it is a list of objects, else None (an unreadable answer)."""
    items = answer.get(key)
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        return None
    return items


def _card_problems(card: Mapping[str, Any]) -> list[tuple[int, str]]:
    gpu, problems = card.get("gpu_index"), []
    action = card.get("action") or {}
    name = action.get("action") if isinstance(action, dict) else None
    if name in CRITICAL_ACTIONS or name in WARNING_ACTIONS:
        level = CRITICAL if name in CRITICAL_ACTIONS else WARNING
        problems.append((level, f"GPU {gpu}: {name}: {action.get('reason')} (recommended by "
                                f"{action.get('policy')}, not a diagnosis)"))
    if card.get("collection_stalled") is not False:
        problems.append((WARNING, f"GPU {gpu}: collection stalled (last sample "
                                  f"{card.get('last_sample_at')})"))
    if not _monitored(card):
        problems.append((WARNING, f"GPU {gpu}: every counter unknown"))
    return problems


def _monitored(card: Mapping[str, Any]) -> bool:
    """At least one counter of the card is read (the API's ``metrics``: collectable/unknown)."""
    metrics = card.get("metrics")
    return isinstance(metrics, dict) and "collectable" in metrics.values()


def _unsampled(node: str, nodes: list[dict[str, Any]]) -> int:
    """Cards the node's last scrape listed that have no reading (all counters unknown)."""
    counts = [n.get("unsampled_cards") for n in nodes if n.get("node_id") == node]
    return sum(c for c in counts if isinstance(c, int) and c > 0)


def assess(node: str, cards: Mapping[str, Any], predictions: Mapping[str, Any]) -> Report:
    """The report for one node from the two API answers (pure)."""
    items, open_items = _objects(cards, "items"), _objects(predictions, "items")
    nodes = _objects(cards, "nodes") if "nodes" in cards else []
    if items is None or open_items is None or nodes is None:
        return unknown(f"node {node}: the evaluator's answer has no readable item list")
    total = predictions.get("total")
    open_count = total if isinstance(total, int) and total >= len(open_items) else len(open_items)
    problems = [(CRITICAL, f"GPU {item.get('gpu_index')}: fault predicted by "
                           f"{item.get('rule_version')} ({item.get('signal')}), window "
                           f"until {item.get('window_end')}") for item in open_items]
    for card in items:
        problems += _card_problems(card)
    unsampled = _unsampled(node, nodes)
    if unsampled:
        problems.append((WARNING, f"{unsampled} more cards listed with every counter unknown"))
    summary = (f"node {node}: {len(items)} cards, {open_count} open predictions, "
               f"{len(problems)} problems")
    details = tuple(line for _, line in sorted(problems, key=_worst_first))
    code = max((level for level, _ in problems), default=OK)
    # Stalled cards keep their WARNING (a reason of their own); a node none of whose cards
    # ever read a counter is not monitored at all.
    if code < CRITICAL and not any(_monitored(c) for c in items):
        why = ("no card has real readings with a known counter: not monitored (its cards' "
               "counters are unknown, it has none, or only simulated data)")
        return Report(UNKNOWN, f"{summary}; {why}", details,
                      headline=f"node {node} is not monitored: no card has real readings")
    return Report(code, summary, details)


def _worst_first(problem: tuple[int, str]) -> int:
    return -problem[0]


def read_token(path: Path | None) -> str | None:
    """The bearer token from its file (first line, bounded); ValueError on a bad file. Opened
    without blocking and refused unless a regular file: a FIFO or a device in its place would
    hang the check past its deadline (Slurm then kills it, and nobody is told why)."""
    if path is None:
        return None
    try:
        raw = read_regular(path, MAX_TOKEN_FILE)
    except NotReadable as exc:
        raise ValueError(f"{exc}, not a token file") from None
    token = raw.decode("utf-8", "replace").strip().splitlines()
    if not token or not token[0].strip():
        raise ValueError(f"{path}: empty")
    return token[0].strip()


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with session.get(url, allow_redirects=False) as response:
        # The whole body, however many pieces it arrives in (content.read(n) returns what has
        # arrived so far), bounded while reading.
        body = bytearray()
        async for chunk in response.content.iter_any():
            body += chunk
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


def check_main(args: Any, out: Any, node_name: str | None = None) -> int:
    """Run the check from parsed arguments; print the report; return its exit code. The node
    is ``--node``, else ``node_name`` (``$NODE_NAME``: node-problem-detector's DaemonSet sets
    it from the downward API), else this host's name."""
    node = args.node or node_name or socket.gethostname()
    try:
        token = read_token(args.token_file)
    except (OSError, ValueError) as exc:
        report = unknown(f"cannot read the token file: {exc}")
    else:
        report = asyncio.run(check(args.evaluator, node, token=token, timeout_s=args.timeout,
                                   ca_file=args.ca_file))
    if getattr(args, "format", "nagios") == "node-problem-detector":
        code, message = report.plugin()
        out.write(message + "\n")
        out.flush()
        return code
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
