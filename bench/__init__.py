"""Benchmarks: scripts that print throughputs and ratios (each prints its targets)."""
