"""``gpu-health-evaluator check``: every Nagios exit code, from the real command (a process)
against a real evaluator API on 127.0.0.1, and the pure assessment on malformed answers."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from gpu_health.evaluator.check import CRITICAL, OK, UNKNOWN, WARNING, assess, read_token
from gpu_health.evaluator.config.rules import load_action_policy
from gpu_health.evaluator.model import Sample
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.evaluator.api_support import (
    NOW,
    TOKENS,
    add_node,
    add_prediction,
    add_samples,
    make_ctx,
    sample,
    serve,
    token_set,
)

COMMAND = str(Path(sys.executable).parent / "gpu-health-evaluator")
def card(node: str, at: datetime, *, pending: int = 0, failure: int = 0) -> Sample:
    """One card with row-remap state (policy v2 judges it) and a corrected count."""
    return sample(node, 0, at, ecc_corrected_total=1, remapped_rows_pending=pending,
                  remapped_rows_failure=failure)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    database = DuckDBDatabase(tmp_path_factory.mktemp("check") / "api.duckdb")
    for node in ("ok-1", "stalled-1", "predicted-1", "reset-1", "unknown-1", "empty-1", "sim-1",
                 "half-1", "ahead-1"):
        add_node(database, node, "a")
    # The last scrape listed cards: unknown-1's two have every counter unknown (no sample is
    # written for such a card), half-1 has one sampled card of two.
    for node, listed in (("unknown-1", 2), ("half-1", 2)):
        database.execute("UPDATE gpu_health_nodes SET listed_cards = $n, listed_source = 'real' "
                         "WHERE node_id = $node", {"n": listed, "node": node})
    recent = NOW - timedelta(minutes=2)
    add_samples(database, [
        card("ok-1", recent),
        card("stalled-1", NOW - timedelta(hours=3)),
        card("predicted-1", recent),
        card("reset-1", recent, pending=1),
        card("half-1", recent),
        sample("sim-1", 0, recent, source="simulated", ecc_corrected_total=1),
    ])
    add_prediction(database, "p1", "predicted-1", 0, NOW - timedelta(hours=1))
    # The evaluator's clock stepped back an hour: this prediction's t0 is "ahead" of it.
    add_samples(database, [card("ahead-1", NOW - timedelta(minutes=2))])
    add_prediction(database, "p2", "ahead-1", 0, NOW + timedelta(minutes=40))
    yield database
    database.close()


async def run_check(url: str, *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        COMMAND, "check", "--evaluator", url, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


@pytest.mark.parametrize("node,code,needle", [
    ("ok-1", OK, "GPU-HEALTH OK - node ok-1: 1 cards, 0 open predictions, 0 problems"),
    ("stalled-1", WARNING, "GPU 0: collection stalled"),
    ("predicted-1", CRITICAL, "GPU 0: fault predicted by v1-ecc-growth (corrected_growth)"),
    ("reset-1", CRITICAL, "GPU 0: reset_gpu: a row remap is pending"),
    ("nobody", UNKNOWN, "node nobody is not known to the evaluator"),
    # Cards listed, every counter unknown: not monitored, never OK.
    ("unknown-1", UNKNOWN, "2 more cards listed with every counter unknown"),
    ("empty-1", UNKNOWN, "0 cards, 0 open predictions, 0 problems; no card has real readings"),
    ("sim-1", UNKNOWN, "no card has real readings"),  # simulated data is not monitoring
    ("half-1", WARNING, "1 more cards listed with every counter unknown"),
    # a clock stepped back an hour turned CRITICAL into OK on every node for that hour
    ("ahead-1", CRITICAL, "GPU 0: fault predicted by v1-ecc-growth"),
])
async def test_each_state_against_a_real_evaluator(db: Database, node: str, code: int,
                                                   needle: str) -> None:
    ctx = replace(make_ctx(db), action_policy=load_action_policy())
    async with serve(ctx) as client:
        rc, out = await run_check(str(client.make_url("")), "--node", node)
    assert (rc, needle in out) == (code, True), out


@pytest.mark.parametrize("node,code,message", [
    ("ok-1", 0, "node ok-1: 1 cards, 0 open predictions, 0 problems"),
    ("predicted-1", 1, "CRITICAL: GPU 0: fault predicted by v1-ecc-growth (corrected_growth)"),
    ("reset-1", 1, "CRITICAL: GPU 0: reset_gpu: a row remap is pending"),
    ("stalled-1", 2, "WARNING: GPU 0: collection stalled"),
    ("sim-1", 2, "UNKNOWN: node sim-1 is not monitored: no card has real readings"),
    ("nobody", 2, "UNKNOWN: node nobody is not known to the evaluator"),
])
async def test_node_problem_detector_plugin_protocol(db: Database, node: str, code: int,
                                                    message: str) -> None:
    """node-problem-detector's custom plugin protocol: exit 0 no problem, 1 problem, 2 unknown,
    and one line of at most 80 characters (its default ``max_output_length``) as the message."""
    ctx = replace(make_ctx(db), action_policy=load_action_policy())
    async with serve(ctx) as client:
        rc, out = await run_check(str(client.make_url("")), "--node", node,
                                  "--format", "node-problem-detector")
    assert rc == code, out
    assert out.endswith("\n") and out.count("\n") == 1 and len(out) <= 81, out
    assert out.startswith(message[:77]), out


async def test_node_problem_detector_usage_errors_are_unknown() -> None:
    rc, _ = await run_check("http://127.0.0.1:1", "--format", "node-problem-detector",
                            "--timeout", "99")
    assert rc == 2  # its unknown, never 1 (a problem: a condition set True)
    rc, _ = await run_check("http://127.0.0.1:1", "--node", "n", "--format",
                            "node-problem-detector", "--timeout", "0.5")
    assert rc == 2


def test_a_long_problem_is_cut_to_the_plugin_output_length() -> None:
    report = assess("n", {"items": []}, {"items": [
        {"gpu_index": 0, "rule_version": "v" * 200, "signal": "s", "window_end": "w"}]})
    code, message = report.plugin()
    assert code == 1 and len(message) == 80 and message.endswith("...")
    assert message.startswith("CRITICAL: GPU 0: fault predicted by vvv")


async def test_the_token_file_is_sent_and_a_refused_token_is_unknown(
        db: Database, tmp_path: Path) -> None:
    ctx = replace(make_ctx(db, tokens=token_set(tmp_path)), action_policy=load_action_policy())
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_text(TOKENS["team-a"][0] + "\n")
    bad.write_text("not-a-token\n")
    async with serve(ctx) as client:
        url = str(client.make_url(""))
        assert (await run_check(url, "--node", "reset-1", "--token-file", str(good)))[0] \
            == CRITICAL
        rc, out = await run_check(url, "--node", "reset-1", "--token-file", str(bad))
    assert rc == UNKNOWN and "refused the token (HTTP 401)" in out
    assert "not-a-token" not in out


async def test_unreachable_and_silent_evaluators_are_unknown_never_ok() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    rc, out = await run_check(f"http://127.0.0.1:{port}", "--node", "n")
    assert rc == UNKNOWN and "cannot ask the evaluator" in out
    with socket.socket() as silent:  # accepts connections (backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        rc, out = await run_check(url, "--node", "n", "--timeout", "0.5")
    assert rc == UNKNOWN and "no answer from the evaluator within 0.5 s" in out


async def test_usage_errors_are_unknown_not_critical() -> None:
    rc, _ = await run_check("http://127.0.0.1:1", "--timeout", "99")  # above Slurm's budget
    assert rc == UNKNOWN


MONITORED = {"gpu_index": 0, "collection_stalled": False,
             "metrics": {"ecc_corrected_total": "collectable"}}


def test_assess_refuses_answers_without_items() -> None:
    assert assess("n", {}, {"items": []}).code == UNKNOWN
    assert assess("n", {"items": "x"}, {"items": []}).code == UNKNOWN
    # items that are not objects are an unreadable answer, never an empty (OK) one
    for cards, predictions in (({"items": [None, MONITORED]}, {"items": []}),
                               ({"items": [MONITORED]}, {"items": [7]}),
                               ({"items": [MONITORED], "nodes": ["x"]}, {"items": []})):
        report = assess("n", cards, predictions)
        assert report.code == UNKNOWN and "no readable item list" in report.summary
    assert assess("n", {"items": [MONITORED]}, {"items": []}).code == OK


def test_ok_needs_a_fresh_card_with_a_known_counter() -> None:
    unknown_card = {**MONITORED, "metrics": {"ecc_corrected_total": "unknown"}}
    stalled = {**MONITORED, "collection_stalled": True}
    for items in ([], [unknown_card], [{**unknown_card, "collection_stalled": True}]):
        assert assess("n", {"items": items}, {"items": []}).code == UNKNOWN, items
    assert assess("n", {"items": [stalled]}, {"items": []}).code == WARNING  # stale: WARNING
    report = assess("n", {"items": [MONITORED, {**unknown_card, "gpu_index": 1}]},
                    {"items": []})
    assert report.code == WARNING and report.details == ("GPU 1: every counter unknown",)
    # a known fault is CRITICAL even on a node whose other cards are unknown: it drains
    predicted = {"items": [{"gpu_index": 1, "rule_version": "v", "signal": "s"}], "total": 1}
    assert assess("n", {"items": [unknown_card]}, predicted).code == CRITICAL


def test_the_worst_problem_comes_first() -> None:
    cards = {"items": [{"gpu_index": 0, "collection_stalled": True},
                       {"gpu_index": 1, "action": {"action": "replace_candidate",
                                                   "reason": "r", "policy": "p"}}]}
    report = assess("n", cards, {"items": [], "total": 0})
    assert report.code == CRITICAL
    assert report.details[0].startswith("GPU 1: replace_candidate")
    assert report.text().splitlines()[0].startswith("GPU-HEALTH CRITICAL - node n: 2 cards")


async def test_a_body_in_two_pieces_is_read_whole(tmp_path: Path) -> None:
    """A CRITICAL answer whose body arrives in two TCP writes 200 ms apart used to be cut at
    the first piece (``content.read(n)`` returns what has arrived) and read as UNKNOWN, so the
    health-check script did not drain."""
    capabilities = json.dumps({"items": [MONITORED], "nodes": []}).encode()
    predictions = json.dumps({"items": [{"gpu_index": 0, "rule_version": "v2-ecc-xid",
                                         "signal": "uncorrectable", "window_end": "w"}],
                              "total": 1}).encode()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        body = capabilities if b"/capabilities" in request else predictions
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
                     + body[:10])
        await writer.drain()
        await asyncio.sleep(0.2)  # the second TCP piece, later
        writer.write(body[10:])
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        rc, out = await run_check(f"http://127.0.0.1:{port}", "--node", "n")
    assert rc == CRITICAL, out
    assert "GPU 0: fault predicted by v2-ecc-xid (uncorrectable)" in out


async def test_a_fifo_token_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    rc, out = await run_check("http://127.0.0.1:1", "--node", "n", "--token-file", str(fifo),
                              "--timeout", "1")
    assert rc == UNKNOWN and "not a regular file" in out


def test_token_files_are_bounded(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * 5000)
    with pytest.raises(ValueError, match="not a token file"):
        read_token(big)
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        read_token(tmp_path / "empty")
