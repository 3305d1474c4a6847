"""``gpu-health-evaluator backtest``: replay history users already have through the live rules.

The thresholds of the rule sets are uncalibrated; months of GPU error counters often already sit
in Prometheus, and public error datasets exist. A backtest turns them into evidence with the
SAME code the live evaluator runs (write rule, feature extraction, signals, backfill, statistics),
inside its own DuckDB file (never the live store):

- ``prometheus`` + ``metricsets``: range queries for our metric names, dcgm-exporter's or
  nvidia_gpu_exporter's, chunked under Prometheus's 11,000-points-per-series limit;
- ``events``: a CSV of error events (the Calchas HBM dataset has a preset) turned into cumulative
  counters per card;
- ``history``: readings or counter histories -> stored rows through the live write rule;
- ``rulesets``: rule files x ``--sweep`` combinations -> effective versions;
- ``activity`` + ``replay``: the worker's ticks (backfill, then predict) across the period,
  skipping the ticks and the cards that provably change nothing;
- ``report``, ``plot``: per version the live statistics plus base rates, as JSON, text and PNG;
  ``inputs``: where the history came from and what its rows assume;
- ``store``: the backtest file (refusing the live database); its SQL is in
  :mod:`gpu_health.evaluator.store.history.backtest` and
  :mod:`gpu_health.evaluator.store.history.backtest_queries`;
- ``pipeline``: the whole run; ``cli``: the subcommand's arguments.

See docs/backtest.md.
"""
