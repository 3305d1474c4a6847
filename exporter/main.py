"""``gpu-health-exporter`` entry point (placeholder until the exporter issue lands)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print("gpu-health-exporter: not built yet", file=sys.stderr)
    return 2
