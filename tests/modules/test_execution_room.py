"""
The modules that define ELMo say what is computed, in plain PyTorch: how it runs on a device and
in a precision is decided in `elmo_plugin.modules.execution` (issue 34). This reads their source
for the questions that decide such a branch (autocast, gradients, the device's type, a dtype
compared) so that one cannot creep back in unnoticed; and for the private operators that the
project gave up (``torch.ops.*``), anywhere in the package.
"""
import ast
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
