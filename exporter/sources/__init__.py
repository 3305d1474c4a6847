"""The vendor registry. Adding a vendor = one parser module, one source class, one line here."""

from __future__ import annotations

from .ascend import AscendSource
from .base import VendorSource
from .cambricon import CambriconSource
from .enflame import EnflameSource
from .hygon import HygonSource
from .iluvatar import IluvatarSource
from .kunlunxin import KunlunxinSource
from .metax import MetaxSource
from .mthreads import MooreThreadsSource
from .nvidia import NvidiaSource

SOURCE_CLASSES: tuple[type[VendorSource], ...] = (
    NvidiaSource,
    KunlunxinSource,
    CambriconSource,
    AscendSource,
    MetaxSource,
    IluvatarSource,
    EnflameSource,
    HygonSource,
    MooreThreadsSource,
)

__all__ = ["SOURCE_CLASSES", "VendorSource"]
