"""Benchmarks: scripts that print throughputs and ratios (targets live in the issues)."""
