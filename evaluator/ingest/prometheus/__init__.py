"""The ``prometheus`` ingest source: readings from a Prometheus-compatible server's query API.

``metricsets`` (whose series hold the counters and whose card they are), ``query`` (bounded range
queries), ``window`` (which steps a cycle reads), ``xids`` (XID counts, derived from dcgm's
last-value gauge), ``steps`` (one step's readings as scrape results for the ingestor),
``source`` (the live cycle and its status), ``metrics`` (its self-metrics).
See docs/prometheus-source.md.
"""
