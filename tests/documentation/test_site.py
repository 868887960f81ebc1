"""
The documentation site (``make docs``) works opened from disk: every page is a file
(``getting_started.html``), and every link of every page, the menu's included, opens a file, not
a folder (a folder opened from disk is a directory listing; only a web server turns it into its
``index.html``). Built with the docs environment (``make docs`` makes ``.venv-docs``; another
one is named by ``DOCS_VENV``), skipped where there is none.
"""
import os
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import List
from urllib.parse import unquote, urlsplit

import pytest

from tests.helpers import REPO_ROOT

DOCS_VENV = Path(os.environ.get("DOCS_VENV", REPO_ROOT / ".venv-docs"))
MKDOCS = DOCS_VENV / "bin" / "mkdocs"


def test_the_site_has_page_urls():
    config = (REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^use_directory_urls: false$", config, flags=re.M)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: List[str] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.links.append(value)


@pytest.mark.skipif(not MKDOCS.exists(), reason=f"no docs environment at {DOCS_VENV} (make docs)")
def test_every_link_of_the_built_site_opens_a_file(tmp_path):
    site = tmp_path / "site"
    result = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # 404.html is a web server's page (absolute links, by design).
    pages = sorted(page for page in site.rglob("*.html") if page.name != "404.html")
    assert site / "getting_started.html" in pages and site / "api" / "modules.html" in pages
    broken = []
    for page in pages:
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        for link in parser.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or not parts.path:
                continue  # another site, or an anchor of the same page
            target = (page.parent / unquote(parts.path)).resolve()
            if not target.is_file():
                broken.append(f"{page.relative_to(site)}: {link}")
    assert broken == []
