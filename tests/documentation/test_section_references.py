"""
References of the form ``BENCHMARKS.md, "Section"`` (and ``benchmarks/log.md, "Section"``) in
the pages, the code, the configs and the Makefile name a heading that exists, so that moving or
renaming a section cannot leave readers pointed at nothing.
"""
import re
from pathlib import Path
from typing import List, Tuple

from tests.helpers import REPO_ROOT

TARGETS = {"BENCHMARKS.md": REPO_ROOT / "BENCHMARKS.md", "benchmarks/log.md": REPO_ROOT / "benchmarks" / "log.md"}
_REFERENCE = re.compile(r"(BENCHMARKS\.md|benchmarks/log\.md),?\s+\"([^\"]+)\"")


def _headings(path: Path) -> List[str]:
    return [line.lstrip("#").strip() for line in path.read_text(encoding="utf-8").splitlines()
            if line.startswith("#")]


def _sources() -> List[Path]:
    patterns = ["*.md", "docs/**/*.md", "elmo_plugin/**/*.py", "benchmarks/*.py", "scripts/*.py",
                "training_configs/**/*.*sonnet", "tests/**/*.py", "Makefile"]
    return sorted({path for pattern in patterns for path in REPO_ROOT.glob(pattern)
                   if path.resolve() not in {target.resolve() for target in TARGETS.values()}})


def dangling_references(sources: List[Path]) -> List[Tuple[str, str]]:
    headings = {name: _headings(path) for name, path in TARGETS.items()}
    dangling = []
    for source in sources:
        text = re.sub(r"\s+", " ", source.read_text(encoding="utf-8"))
        for target, section in _REFERENCE.findall(text):
            if not any(heading.startswith(section) or section in heading for heading in headings[target]):
                dangling.append((source.name, f'{target}, "{section}"'))
    return dangling


def test_every_section_reference_names_a_heading_that_exists():
    assert dangling_references([source for source in _sources() if "test_section_references" not in source.name]) == []


def test_the_check_can_fail(tmp_path):
    page = tmp_path / "page.md"
    page.write_text('see BENCHMARKS.md, "No such section" and BENCHMARKS.md,\n"Korean"', encoding="utf-8")
    assert dangling_references([page]) == [("page.md", 'BENCHMARKS.md, "No such section"')]
