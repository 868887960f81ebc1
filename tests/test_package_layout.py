"""
The package's map in docs/architecture.md ("Where things are") against the tree, and its imports
against the order of the wings that page gives: a subpackage or file that is gone, one that the
map leaves out, and an import that runs upward all fail here.
"""
import ast
import fnmatch
import re
from pathlib import Path
from typing import Dict, List, Set, Tuple

from tests.helpers import REPO_ROOT

PACKAGE = REPO_ROOT / "elmo_plugin"

# Bottom to top: a module may import from its own level and the levels below it only.
LEVELS: List[Set[str]] = [
    {"common"},
    {"model_files"},
    {"data", "korean"},
    {"modules"},
    {"models", "training"},
    # What allennlp elmo-export writes: bilm-tf directories of training runs, ONNX graphs.
    {"export"},
    {"tasks"},
    # The embedding job and what it writes (layouts, readers, sharded runs) take the embedder as
    # a value: they never import it.
    {"embedding_output"},
    {"elmo_embedder"},
    {"commands"},
    {"legacy"},
    # What the plugin changes in AllenNLP, tensorboardX and the console: above everything it
    # wraps; only the package's __init__ (and the start-up hook's .pth line) applies it.
    {"patches"},
    {"__init__"},
]


def architecture_map() -> Dict[str, str]:
    """The map's entries under ``elmo_plugin/``: path (``data/token_indexers/``, ``elmo_embedder.py``)
    to the text that describes it (continuation lines included)."""
    page = (REPO_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = next(part for part in page.split("```") if part.startswith("\nelmo_plugin/"))
    entries: Dict[str, str] = {}
    current = None
    for line in block.splitlines():
        match = re.match(r"^  (\S+)\s*(.*)$", line)
        if match:  # "  name/  description": an entry of elmo_plugin/
            current = match.group(1)
            entries[current] = match.group(2)
        elif line.startswith("    ") and current is not None:
            entries[current] += " " + line.strip()
        else:  # a top-level line (training_configs/, tests/ ...) ends elmo_plugin's entries
            current = None
    return entries


def package_tree() -> Tuple[Set[str], Set[str]]:
    """Every folder under elmo_plugin/ (as ``data/token_indexers/``) and the top-level .py files."""
    folders = {
        str(path.relative_to(PACKAGE)) + "/"
        for path in PACKAGE.rglob("*")
        if path.is_dir() and path.name != "__pycache__"
    }
    top_files = {path.name for path in PACKAGE.glob("*.py")}
    return folders, top_files


def test_the_architecture_map_lists_every_subpackage_and_only_those():
    entries = architecture_map()
    folders, top_files = package_tree()
    listed_folders = {name for name in entries if name.endswith("/")}
    listed_files = {name for name in entries if not name.endswith("/")}
    assert listed_folders - folders == set(), "docs/architecture.md's map lists folders that are gone"
    assert folders - listed_folders == set(), "docs/architecture.md's map leaves out these folders"
    assert listed_files == top_files


def test_every_file_the_architecture_map_names_exists():
    for entry, text in architecture_map().items():
        if not entry.endswith("/"):
            continue
        present = [path.name for path in (PACKAGE / entry).iterdir()]
        for pattern in re.findall(r"(?<![/\w])[\w*]+\.py\b", text):
            assert fnmatch.filter(present, pattern), f"architecture map: {entry}{pattern} is gone"


def _level(module: str) -> int:
    """The level of ``elmo_plugin.X...`` (by its first component)."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    for index, names in enumerate(LEVELS):
        if top in names:
            return index
    raise AssertionError(f"{module}: not in docs/architecture.md's order of wings; add it to LEVELS and the map")


def test_imports_run_down_the_wings_only():
    upward = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(REPO_ROOT).with_suffix("")
        module = ".".join(relative.parts)
        if module.endswith(".__init__") and relative.parent == Path("elmo_plugin"):
            module = "elmo_plugin"
        elif module.endswith(".__init__"):
            module = module[: -len(".__init__")]
        own_level = _level(module)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                imported = [node.module or ""]
            elif isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            else:
                continue
            for name in imported:
                if name.startswith("elmo_plugin") and _level(name) > own_level:
                    upward.append(f"{module} imports {name}")
    assert upward == []


def import_graph(package: Path = PACKAGE) -> Dict[str, Set[str]]:
    """Every module of the package to the modules of the package it imports: every import counts,
    in a function, under ``TYPE_CHECKING`` or at the top; ``from P import name`` counts as an import
    of ``P.name`` where that is a module, else of ``P``."""
    modules = {_module_name(path, package.parent): path for path in package.rglob("*.py")}
    graph: Dict[str, Set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parent + ([node.module] if node.module else []))
                targets = [f"{base}.{alias.name}" for alias in node.names]
                targets = [target if target in modules else base for target in targets]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            for target in targets:
                while target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_circles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    circles: List[List[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def test_no_import_circles():
    assert import_circles(import_graph()) == []


def test_the_circle_check_finds_hidden_ones(tmp_path):
    # A circle closed only inside a function, one closed only under TYPE_CHECKING, one through a
    # relative import, and a module that only imports (no circle).
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from pkg.b import B\n",
        "b.py": "def f():\n    from pkg import a\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub.d import D\n",
        "sub/__init__.py": "",
        "sub/d.py": "from .. import c\n",
        "e.py": "import pkg.a\n",
    }
    for name, text in files.items():
        (package / name).write_text(text, encoding="utf-8")
    circles = import_circles(import_graph(package))
    assert circles == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.sub.d"]]


def test_help_texts_name_files_that_exist():
    # A help text or message that sends the user to a file of the package must name a real one.
    missing = []
    for path in PACKAGE.rglob("*.py"):
        for name in re.findall(r"elmo_plugin/[\w/]+\.py", path.read_text(encoding="utf-8")):
            if not (REPO_ROOT / name).is_file():
                missing.append(f"{path.relative_to(REPO_ROOT)}: {name}")
    assert missing == []


def test_the_readme_and_the_pages_name_files_that_exist():
    for page in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        named = re.findall(r"(?<![\w/.])((?:elmo_plugin|tests|benchmarks|scripts)/[\w/]+\.py)", text)
        missing = [name for name in named if not (REPO_ROOT / name).is_file()]
        assert missing == [], f"{page.relative_to(REPO_ROOT)} names files that do not exist"


def test_the_package_narrates_no_issue_numbers():
    # History (which issue, which session, how long it took) belongs in docs/implementation.md and
    # benchmarks/log.md; the code says what is done and why.
    narrated = [
        f"{path.relative_to(REPO_ROOT)}:{number}"
        for path in PACKAGE.rglob("*.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bissues?\s+#?\d+", line, re.IGNORECASE)
    ]
    assert narrated == []


def test_only_the_package_init_imports_the_patches():
    importers = sorted(module for module, imported in import_graph().items()
                       if any(name.startswith("elmo_plugin.patches") for name in imported)
                       and not module.startswith("elmo_plugin.patches"))
    assert importers == ["elmo_plugin"]


def test_the_patches_install_lists_every_module_of_the_folder():
    # Each patch module is applied by `install` (or is the start-up hook / the quiet import,
    # which run before it), so the folder's docstring and install() are the whole list.
    source = (PACKAGE / "patches" / "__init__.py").read_text(encoding="utf-8")
    for path in (PACKAGE / "patches").glob("*.py"):
        if path.stem in ("__init__", "startup_hook", "quiet_import"):
            assert f"`{path.stem}`" in source, path.stem
        else:
            assert f"{path.stem}.install()" in source, path.stem
