"""``gpu-health-evaluator backtest``: replay history users already have through the live rules.

The thresholds of the rule sets are uncalibrated; months of GPU error counters often already sit
in Prometheus, and public error datasets exist. A backtest turns them into evidence with the
SAME code the live evaluator runs (write rule, feature extraction, signals, backfill, statistics),
inside its own DuckDB file (never the live store):

- ``prometheus``: range queries for our metric names, dcgm-exporter's or nvidia_gpu_exporter's
  (``ingest/prometheus/metricsets.py``), chunked under Prometheus's 11,000-points-per-series
  limit;
- ``events`` + ``card_history`` + ``events_import``: a CSV of error events (the Calchas HBM
  dataset has a preset) turned into cumulative counters per card, streamed into the file;
- ``history``: readings or counter histories -> stored rows through the live write rule;
- ``rulesets``: rule files x ``--sweep`` combinations -> effective versions;
- ``activity`` + ``replay``: the worker's ticks (backfill, then predict) across the period,
  skipping the ticks and the cards that provably change nothing; ``batch`` + ``feature_cache``:
  many versions replayed at once, sharing features and backfill;
- ``report``, ``plot``, ``compare``: per version the live statistics plus base rates, as JSON,
  text and PNG, and the comparison beyond chance; ``inputs``: where the history came from and
  what its rows assume;
- the backtest file (refusing the live database): its SQL is ``store/history/``;
- ``backtest_run``: the whole run; ``command``: from the parsed arguments (declared in
  ``evaluator/cli.py``, like every subcommand's) to validated options;
- ``bootstrap``: the live service's first-start history (``ingest.prometheus.history``), which
  runs this importer and replay.

See docs/backtest.md.
"""
