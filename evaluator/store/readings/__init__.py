"""What the ingest writes and the rules read back: change-only samples and XID samples, one
scrape cycle's transaction, the node registry and retention, and the per-card daily rollups the
statistics and the tick read instead of every raw row."""
