"""
The modules that define ELMo say what is computed, in plain PyTorch: how it runs on a device and
in a precision is decided in `elmo_plugin.modules.execution`. This reads their source for the
questions that decide such a branch (autocast, gradients, the device's type, a dtype compared)
so that one cannot creep back in unnoticed; and, anywhere in the package, for the private
operators that the project gave up (``torch.ops.*``) and for PyTorch's private modules imported
at module level (``import elmo_plugin`` must import none itself: a torch upgrade could break
users who never use them; the export imports PyTorch's prototype scan only when exporting).
"""
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

PACKAGE = REPO_ROOT / "elmo_plugin"
DEFINING_MODULES = [
    "modules/character_encoder.py",
    "modules/projected_lstm.py",
    "modules/elmo_lstm.py",
    "modules/bilm.py",
    "modules/scalar_mix.py",
    "modules/elmo.py",
    "modules/token_embedders/elmo_token_embedder.py",
]
# Calls that ask how to run rather than what to compute.
EXECUTION_QUESTIONS = {"is_autocast_enabled", "get_autocast_dtype", "is_grad_enabled", "autocast"}


def branch_questions(path: Path):
    """Each place in ``path`` that asks an execution question: (line, what)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in EXECUTION_QUESTIONS:
            found.append((node.lineno, node.attr))
        if isinstance(node, ast.Attribute) and node.attr == "type" and isinstance(
            node.value, ast.Attribute) and node.value.attr == "device":
            found.append((node.lineno, "device.type"))
        if isinstance(node, ast.Compare):
            names = [part for part in [node.left, *node.comparators]
                     if isinstance(part, ast.Attribute) and part.attr == "dtype"]
            constants = [part.value for part in [node.left, *node.comparators]
                         if isinstance(part, ast.Constant)]
            if names or {"cpu", "cuda"} & set(constants):
                found.append((node.lineno, "compares a dtype or device"))
    return found


@pytest.mark.parametrize("module", DEFINING_MODULES)
def test_the_modules_that_define_elmo_ask_no_execution_question(module):
    assert branch_questions(PACKAGE / module) == [], (
        f"{module} decides how it runs; that belongs in elmo_plugin/modules/execution/"
    )


def test_the_check_finds_such_a_branch(tmp_path):
    source = tmp_path / "branchy.py"
    source.write_text(
        "import torch\n"
        "def f(x, w):\n"
        "    if torch.is_autocast_enabled(x.device.type) or x.dtype == torch.bfloat16:\n"
        "        return x\n"
        "    return x @ w\n"
    )
    assert sorted(what for _, what in branch_questions(source)) == [
        "compares a dtype or device", "device.type", "is_autocast_enabled"
    ]


def test_no_private_pytorch_operator_in_the_package():
    uses = [
        f"{path.relative_to(REPO_ROOT)}:{node.lineno}"
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr == "ops"
        and isinstance(node.value, ast.Name) and node.value.id == "torch"
    ]
    assert uses == []


def module_level_imports(tree: ast.Module):
    """The imports a module runs when it is imported: top-level statements, and those under a
    top-level ``if``, ``try`` or ``with`` (not inside functions or classes)."""
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            pending.extend(ast.iter_child_nodes(node))
        elif isinstance(node, ast.ExceptHandler):
            pending.extend(node.body)


def private_torch_imports(source: str):
    found = []
    for node in module_level_imports(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = [module] if is_private_torch(module) else [f"{module}.{alias.name}" for alias in node.names]
        else:
            names = [alias.name for alias in node.names]
        found += [name for name in names if is_private_torch(name)]
    return found


def is_private_torch(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "torch" and any(part.startswith("_") for part in parts[1:])


def test_no_private_pytorch_module_is_imported_at_module_level():
    found = {
        str(path.relative_to(REPO_ROOT)): private_torch_imports(path.read_text(encoding="utf-8"))
        for path in PACKAGE.rglob("*.py")
    }
    assert {path: names for path, names in found.items() if names} == {}


def test_the_private_import_check_finds_one():
    assert sorted(private_torch_imports(
        "import torch._dynamo\n"
        "try:\n    from torch._higher_order_ops import scan\nexcept ImportError:\n    pass\n"
        "from torch.utils import _pytree as pytree, data\n"
        "def export():\n    from torch._higher_order_ops import while_loop\n"
    )) == ["torch._dynamo", "torch._higher_order_ops", "torch.utils._pytree"]


# Run in a fresh interpreter: every import statement that a module of the package runs while
# `import elmo_plugin` runs, and whether PyTorch's scan was loaded by then (torch itself may load
# it, as torch 2.13 does: then only the statements tell).
IMPORTS = """
import builtins, json, sys
import torch
scan = "torch._higher_order_ops.scan"
loaded_by_torch = scan in sys.modules
statements = []
real_import = builtins.__import__
def recording(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__") or ""
    if importer.startswith("elmo_plugin") and level == 0:
        statements.extend([name] + [name + "." + item for item in fromlist or ()])
    return real_import(name, globals, locals, fromlist, level)
builtins.__import__ = recording
import elmo_plugin
print(json.dumps({"loaded_by_torch": loaded_by_torch, "loaded": scan in sys.modules,
                  "private": sorted({s for s in statements if s.startswith("torch._")})}))
"""


def test_importing_the_package_imports_no_private_pytorch_module_itself():
    result = subprocess.run(
        [sys.executable, "-c", IMPORTS], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["private"] == []
    if not found["loaded_by_torch"]:
        assert found["loaded"] is False
