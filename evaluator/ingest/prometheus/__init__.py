"""The ``prometheus`` ingest source: readings from a Prometheus-compatible server's query API.

``metricsets`` (whose series hold the counters and the stored details, and whose card they are),
``assembly`` (one chunk's answers folded into per-card readings), ``query`` (bounded range
queries), ``window`` (which steps a cycle reads), ``changes`` (change points of long histories),
``xids`` (XID counts, derived from dcgm's last-value gauge), ``sxids`` (a node's NVSwitch SXid
counts), ``steps`` (one step's readings as
scrape results for the ingestor), ``source`` (the live cycle and its status),
``source_metrics`` (its self-metrics). See docs/prometheus-source.md.

The first-start history (``ingest.prometheus.history``) is imported and replayed by
``backtest/bootstrap.py``: it runs the backtest's importer and replay engine, which sit above
this layer; its settings are ``config/source.py``, its marker ``store/history/import_marker.py``.
"""
