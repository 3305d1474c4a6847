"""Opt-in remediation: drain Slurm nodes for predicted faults (docs/slurm.md)."""
