"""gpu-health evaluator: scrape exporters, store change-only samples, predict, prove, alert."""
