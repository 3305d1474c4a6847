"""gpu-health exporter: vendor tools -> five health counters per card -> Prometheus metrics."""
