"""The vendor registry. Adding a vendor = one parser module, one source class, one line here."""

from __future__ import annotations

from .base import VendorSource
from .cambricon import CambriconSource
from .kunlunxin import KunlunxinSource
from .nvidia import NvidiaSource

SOURCE_CLASSES: tuple[type[VendorSource], ...] = (NvidiaSource, KunlunxinSource, CambriconSource)

__all__ = ["SOURCE_CLASSES", "VendorSource"]
