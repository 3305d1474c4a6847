"""``gpu-health-evaluator`` entry point (placeholder until the evaluator issues land)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print("gpu-health-evaluator: not built yet", file=sys.stderr)
    return 2
