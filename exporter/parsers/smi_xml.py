"""Reading the nvidia-smi-style ``-q -x`` XML that Kunlunxin ``xpu-smi`` and Iluvatar ``ixsmi``
print: one root element, one child element per device, plain text leaves.

Both tools declare an external DTD (``<!DOCTYPE xpu_smi_log SYSTEM "xpusmi_device_v11.dtd">``);
the standard library's expat parser never fetches it, and it refuses entity-expansion bombs, so
the text a local root tool prints can be parsed as it is.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from gpu_health.errors import ParseError

from .cells import is_declared_unknown


def parse_document(text: str, root_tag: str, tool: str) -> ET.Element:
    """The root element, which must be ``root_tag``; ParseError for anything else."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ParseError(f"{tool} printed XML that does not parse: {exc}") from None
    if root.tag != root_tag:
        raise ParseError(f"{tool} printed <{root.tag}>, expected <{root_tag}>")
    return root


def looks_like(text: str, root_tag: str) -> bool:
    """True when ``text`` is (the start of) an XML document with ``root_tag`` as its root."""
    head = text.lstrip()[:512]
    return head.startswith("<?xml") or f"<{root_tag}>" in head


def text_at(element: ET.Element, path: str) -> str | None:
    """Stripped text of the first element at ``path``; None when it is absent."""
    found = element.find(path)
    if found is None:
        return None
    return (found.text or "").strip()


def identity_text(
    element: ET.Element, path: str, unknown_words: frozenset[str] = frozenset()
) -> str | None:
    """A label value (UUID, bus id): None when absent or a "no value" spelling."""
    text = text_at(element, path)
    if text is None or is_declared_unknown(text) or text in unknown_words:
        return None
    return text
