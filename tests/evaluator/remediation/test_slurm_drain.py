"""The opt-in Slurm drain against a real Slurm (slurmctld + three slurmd on 127.0.0.1, munge) and a
real DuckDB store: what Slurm shows after each tick (``sinfo``), what the audit holds, what is
counted. Alerts are opened by the store's own alert logic from stored predictions."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry

from gpu_health.evaluator.config.remediation import NodeNaming, SlurmRemediation
from gpu_health.evaluator.remediation.drain_loop import RemediationLoop
from gpu_health.evaluator.remediation.slurm import Slurm
from gpu_health.evaluator.rules.actions import Recommendation
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.operations.alerts import open_new_alerts, resolve_alert
from gpu_health.evaluator.store.operations.remediation import audit
from tests.conftest import NewDb
from tests.evaluator.api_support import NOW, add_node, add_prediction
from tests.postgres import PostgresServer
from tests.slurm_support import SlurmCluster, slurm_cluster_fixture

LIVE = SlurmRemediation(enabled=True, dry_run=False, max_drained_nodes=5,
                        max_drained_fraction=1.0)
RESET = Recommendation("reset_gpu", "a row remap is pending", "nvidia-memory-v2")


@pytest.fixture
def slurm() -> Iterator[SlurmCluster]:
    yield from slurm_cluster_fixture()


@pytest.fixture
def db(new_db: NewDb) -> Database:
    """The store on both engines: the audit's SQL runs on DuckDB and PostgreSQL alike."""
    return new_db()


def predict(db: Database, *nodes: str, source: str = "real") -> None:
    for node in nodes:
        add_node(db, node, None)
        add_prediction(db, f"p-{node}-{source}", node, 0, NOW - timedelta(hours=1),
                       source=source)
    open_new_alerts(db, NOW)


def make_loop(db: Database, slurm: SlurmCluster, config: SlurmRemediation = LIVE,
              actions: dict[tuple[str, int], Recommendation] | None = None,
              registry: CollectorRegistry | None = None) -> RemediationLoop:
    actions = actions if actions is not None else {
        (n, 0): RESET for n in ("gh-n1", "gh-n2", "gh-n3")}
    client = Slurm(sinfo="sinfo", scontrol="scontrol", timeout_s=20, env=slurm.env)
    return RemediationLoop(db, config, client, clock=lambda: NOW,
                           registry=registry or CollectorRegistry(), actions=lambda: actions,
                           actor="evaluator e1")


def results(db: Database) -> list[tuple[str, str, str]]:
    return [(e.step, e.result, e.node_id) for _, _, e in reversed(audit(db))]


async def test_a_predicted_reset_drains_the_node_with_our_reason(
        db: Database, slurm: SlurmCluster) -> None:
    predict(db, "gh-n1")
    registry = CollectorRegistry()
    await make_loop(db, slurm, registry=registry).tick()
    state, reason = slurm.states()["gh-n1"]
    assert state in ("drained", "draining")
    assert reason.startswith("gpu-health: v1-ecc-growth gpu0 reset_gpu")
    assert slurm.states()["gh-n2"][0] == "idle"
    assert results(db) == [("drain", "done", "gh-n1")]
    (when, actor, entry) = audit(db)[0]
    assert (when, actor, entry.slurm_reason) == (NOW, "evaluator e1", reason.split(" [")[0])
    assert registry.get_sample_value("gpu_health_evaluator_remediation_total",
                                     {"action": "drain", "result": "done"}) == 1
    await make_loop(db, slurm).tick()  # final: nothing again, no second row
    assert results(db) == [("drain", "done", "gh-n1")]


async def test_dry_run_drains_nothing_and_says_what_it_would_do(
        db: Database, slurm: SlurmCluster) -> None:
    predict(db, "gh-n1")
    await make_loop(db, slurm, replace(LIVE, dry_run=True)).tick()
    assert slurm.states()["gh-n1"] == ("idle", "none")
    [(_, _, entry)] = audit(db)
    assert entry.result == "dry_run" and "would drain" in entry.reason


@pytest.mark.parametrize("cap,why", [
    ({"max_drained_nodes": 1}, "1 nodes already drained by gpu-health (max_drained_nodes 1)"),
    # three nodes in the partition, fraction 0.5: floor(1.5) = 1 node at most
    ({"max_drained_fraction": 0.5}, "partition gpu: 1 of 3 nodes already drained by gpu-health "
                                    "(max_drained_fraction 0.5 allows 1)"),
])
async def test_the_cap_stops_the_second_node(db: Database, slurm: SlurmCluster,
                                             cap: dict[str, float], why: str) -> None:
    predict(db, "gh-n1", "gh-n2")
    await make_loop(db, slurm, replace(LIVE, **cap)).tick()  # type: ignore[arg-type]
    states = slurm.states()
    assert states["gh-n1"][0] == "drained" and states["gh-n2"][0] == "idle"
    assert results(db) == [("drain", "done", "gh-n1"), ("drain", "refused_cap", "gh-n2")]
    assert audit(db)[0][2].reason == why


async def test_a_node_drained_by_someone_else_is_left_alone_and_never_resumed(
        db: Database, slurm: SlurmCluster) -> None:
    slurm.drain("gh-n1", "admin: fan broken")
    predict(db, "gh-n1")
    loop = make_loop(db, slurm)
    await loop.tick()
    assert slurm.states()["gh-n1"] == ("drained", "admin: fan broken")
    assert results(db) == [("drain", "refused_foreign", "gh-n1")]
    resolve_alert(db, "gh-n1", actor="oncall", reason="replaced", now=NOW)
    await loop.tick()
    assert slurm.states()["gh-n1"] == ("drained", "admin: fan broken")  # not ours: not resumed


async def test_resolving_resumes_only_our_drain(db: Database, slurm: SlurmCluster) -> None:
    predict(db, "gh-n1", "gh-n2")
    loop = make_loop(db, slurm)
    await loop.tick()
    assert {n: s[0] for n, s in slurm.states().items()} == {
        "gh-n1": "drained", "gh-n2": "drained", "gh-n3": "idle"}
    slurm.drain("gh-n2", "admin: took it over")  # someone else now owns gh-n2's drain
    resolve_alert(db, "gh-n1", actor="oncall", reason="reset done", now=NOW)
    resolve_alert(db, "gh-n2", actor="oncall", reason="reset done", now=NOW)
    await loop.tick()
    states = slurm.states()
    assert states["gh-n1"][0].rstrip("*") == "idle"  # "idle*" until slurmd answers a ping
    assert states["gh-n2"] == ("drained", "admin: took it over")
    assert set(results(db)[-2:]) == {("resume", "done", "gh-n1"),
                                     ("resume", "refused_foreign", "gh-n2")}
    await loop.tick()  # final: no further command, no further row
    assert len(results(db)) == 4


async def test_an_action_outside_the_set_and_simulated_data_never_drain(
        db: Database, slurm: SlurmCluster) -> None:
    predict(db, "gh-n3", source="simulated")  # simulated predictions open no alert
    predict(db, "gh-n1")
    restart = {("gh-n1", 0): Recommendation("restart_workload", "Xid 94", "nvidia-memory-v2")}
    await make_loop(db, slurm, actions=restart).tick()
    assert all(s == "idle" for s, _ in slurm.states().values())
    assert results(db) == [("drain", "skipped_action", "gh-n1")]


async def test_node_names_are_mapped_and_an_unknown_node_is_not_guessed(
        db: Database, slurm: SlurmCluster) -> None:
    predict(db, "gh-n1.cluster.example", "other-host")
    naming = NodeNaming(r"([^.]+)\..*", r"\1")
    actions = {("gh-n1.cluster.example", 0): RESET, ("other-host", 0): RESET}
    await make_loop(db, slurm, replace(LIVE, naming=naming), actions=actions).tick()
    assert slurm.states()["gh-n1"][0] == "drained"
    assert results(db) == [("drain", "done", "gh-n1.cluster.example"),
                           ("drain", "unknown_node", "other-host")]


async def test_the_parser_reads_the_real_sinfo(slurm: SlurmCluster) -> None:
    slurm.drain("gh-n2", "admin: a reason | with a bar")
    client = Slurm(sinfo="sinfo", scontrol="scontrol", timeout_s=20, env=slurm.env)
    cluster = await client.cluster()
    assert set(cluster.nodes) == {"gh-n1", "gh-n2", "gh-n3"}
    assert cluster.nodes["gh-n2"].reason == "admin: a reason | with a bar"
    assert cluster.nodes["gh-n2"].base_state == "drained" and not cluster.nodes["gh-n2"].ours
    assert cluster.nodes["gh-n1"].schedulable and cluster.partition_size("gpu") == 3


async def test_the_slurm_node_label_of_the_target_names_the_node(
        db: Database, slurm: SlurmCluster) -> None:
    predict(db, "rack1-gpu7", "rack1-gpu8")
    actions = {("rack1-gpu7", 0): RESET, ("rack1-gpu8", 0): RESET}
    loop = make_loop(db, slurm, replace(LIVE, naming=NodeNaming(label=True)), actions=actions)
    loop.labels = lambda: {"rack1-gpu7": "gh-n3"}  # rack1-gpu8's target has no label
    await loop.tick()
    assert slurm.states()["gh-n3"][0] == "drained"
    assert results(db) == [("drain", "done", "rack1-gpu7"), ("drain", "unknown_node", "rack1-gpu8")]
    assert "has no slurm_node label" in audit(db)[0][2].reason


async def test_a_resolve_and_a_new_alert_in_one_tick_leave_the_node_drained(
        db: Database, slurm: SlurmCluster) -> None:
    """An operator resolved the alert and a new prediction opened one on the same node before
    the next tick: the new drain was recorded ``already_ours`` (final) and the same tick
    resumed the node, which then stayed idle with an open alert. Drains and resumes are now
    decided together: the node stays drained for the new alert, and its resolve resumes it."""
    predict(db, "gh-n1")
    loop = make_loop(db, slurm)
    await loop.tick()
    assert slurm.states()["gh-n1"][0] == "drained"
    resolve_alert(db, "gh-n1", actor="oncall", reason="reset done", now=NOW)
    add_prediction(db, "p-gh-n1-again", "gh-n1", 0, NOW + timedelta(minutes=1))
    open_new_alerts(db, NOW + timedelta(minutes=2))
    await loop.tick()
    assert slurm.states()["gh-n1"][0] == "drained"  # held for the new alert
    assert results(db)[-2:] == [("drain", "already_ours", "gh-n1"),
                                ("resume", "kept", "gh-n1")]
    resolve_alert(db, "gh-n1", actor="oncall", reason="replaced", now=NOW + timedelta(hours=1))
    await loop.tick()
    assert slurm.states()["gh-n1"][0].rstrip("*") == "idle"
    assert results(db)[-1] == ("resume", "done", "gh-n1")


async def test_a_drain_that_completes_after_its_resume_is_repaired_and_audited(
        db: Database, slurm: SlurmCluster) -> None:
    """HA: a leader's ``scontrol`` drain was still running when it lost its lease; the new
    leader drained, the operator resolved, the new leader resumed, then the stale call
    completed: the node stayed drained with our reason, no open alert, and an audit ending
    "resume done". The next tick now sees it and resumes it again (``repaired``)."""
    from gpu_health.evaluator.remediation.slurm import drain_reason

    predict(db, "gh-n1")
    loop = make_loop(db, slurm)
    await loop.tick()
    resolve_alert(db, "gh-n1", actor="oncall", reason="reset done", now=NOW)
    await loop.tick()
    assert slurm.states()["gh-n1"][0].rstrip("*") == "idle"
    slurm.drain("gh-n1", drain_reason("v2-ecc-xid", 0, "reset_gpu"))  # the late call lands
    await loop.tick()
    assert slurm.states()["gh-n1"][0].rstrip("*") == "idle"
    assert results(db)[-1] == ("resume", "repaired", "gh-n1")
    rows = len(results(db))
    await loop.tick()
    assert len(results(db)) == rows  # nothing more to say


async def test_postgresql_a_leader_deposed_after_deciding_does_not_call_scontrol(
        slurm: SlurmCluster, postgres: PostgresServer) -> None:
    """Fencing reaches Slurm: the tick decided a drain under its lease, then lost the lease to
    another evaluator before the call. The store check just before ``scontrol`` refuses
    (``fenced``): the node is not drained, and nothing is audited in the deposed leader's
    name."""
    from gpu_health.errors import StoreError
    from gpu_health.evaluator.store.engines.postgres import FENCE, PostgresDatabase
    from gpu_health.evaluator.store.operations.cluster import check_fence, sync

    url = postgres.url(postgres.new_database())
    mine, other = PostgresDatabase(url), PostgresDatabase(url)
    try:
        predict(mine, "gh-n1")
        token = sync(mine, "e1", None, timedelta(seconds=30)).lease.token
        assert token is not None
        actions = {("gh-n1", 0): RESET}

        def take_over() -> None:  # the other evaluator: outside this tick's fence
            other.execute("UPDATE gpu_health_leases SET expires_at = now() - "
                          "INTERVAL '1 second'")
            assert sync(other, "e2", None, timedelta(seconds=30)).lease.holder == "e2"

        def deposed_while_deciding() -> dict[tuple[str, int], Recommendation]:
            contextvars.Context().run(take_over)
            return actions

        loop = make_loop(mine, slurm)
        loop.actions = deposed_while_deciding
        reset = FENCE.set(lambda db: check_fence(db, "e1", token))
        try:
            with pytest.raises(StoreError) as refused:
                await loop.tick()
        finally:
            FENCE.reset(reset)
        assert refused.value.reason == "fenced"
        assert slurm.states()["gh-n1"][0].rstrip("*") == "idle", slurm.states()
        assert results(other) == []
    finally:
        mine.close()
        other.close()
