"""Static checks of the page's shipped files: no inline script or style, no HTML parsing of data,
no timers, no host but this one; and that they ship in the package. (The composed evaluator
serving them, headers and caching included, is tested in tests/evaluator/http/test_index_page.py.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpu_health.evaluator.http.ui.routes import load_bundle
from tests.evaluator.http.test_index_page import Tags

STATIC = Path(__file__).resolve().parents[4] / "evaluator" / "http" / "ui" / "static"


def test_no_inline_script_or_style_in_the_page() -> None:
    tags = Tags()
    tags.feed((STATIC / "index.html").read_text())
    for tag, attrs in tags.found:
        assert "style" not in attrs, tag
        assert not [a for a in attrs if a.startswith("on")], tag
        if tag == "script":
            assert attrs.get("src"), "inline script"
    assert "<style" not in (STATIC / "index.html").read_text()


@pytest.mark.parametrize("name", sorted(p.name for p in STATIC.glob("*.js")))
def test_scripts_insert_text_never_markup_and_never_refresh(name: str) -> None:
    source = (STATIC / name).read_text()
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("//"))
    for banned in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                   "new Function", "setInterval", "setTimeout", "requestAnimationFrame",
                   "localStorage", "document.cookie", "location.reload"):
        assert banned not in code, f"{name}: {banned}"
    hosts = set(re.findall(r"https?://[^\s\"'`]+", code)) - {"http://www.w3.org/2000/svg"}
    assert not hosts, f"{name} names another host: {hosts}"


def test_the_page_ships_in_the_package() -> None:
    import tomllib

    pyproject = tomllib.loads((STATIC.parents[3] / "pyproject.toml").read_text())
    package_data = pyproject["tool"]["setuptools"]["package-data"]
    assert package_data["gpu_health.evaluator.http.ui"] == ["static/*"]
    assert {"index.html", "app.js", "style.css"} <= set(load_bundle().assets) | {"index.html"}
