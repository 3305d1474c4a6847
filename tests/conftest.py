"""Top-level pytest configuration shared by tests/exporter, tests/evaluator and tests/e2e."""

from __future__ import annotations

import logging

logging.getLogger("asyncio").setLevel(logging.WARNING)
