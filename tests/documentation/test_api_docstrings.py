"""
The public API (``elmo_plugin.__all__``), which the site's API reference is generated from:
every class and function has a docstring, and every parameter of its signature is described in
it (AllenNLP's ``# Parameters`` style), so that the generated reference reads complete.
"""
import inspect

import pytest

import elmo_plugin

# Parameters a class takes from its AllenNLP base and passes on unchanged: documented there.
INHERITED = {
    ("KeepFreedMemoryCallback", "serialization_dir"): "AllenNLP's TrainerCallback",
    ("ReduceOnPlateauLearningRateScheduler", "optimizer"): "AllenNLP's LearningRateScheduler",
}


def _documented_parameters(name: str, obj) -> list:
    if inspect.isclass(obj):
        signature = inspect.signature(obj.__init__)
        text = (inspect.getdoc(obj) or "") + (obj.__init__.__doc__ or "")
    else:
        signature = inspect.signature(obj)
        text = inspect.getdoc(obj) or ""
    missing = []
    for parameter in signature.parameters.values():
        if parameter.name == "self" or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if (name, parameter.name) in INHERITED:
            continue
        if parameter.name not in text:
            missing.append(parameter.name)
    return missing


@pytest.mark.parametrize("name", elmo_plugin.__all__)
def test_every_public_name_has_a_docstring_that_describes_its_parameters(name):
    obj = getattr(elmo_plugin, name)
    assert len(inspect.getdoc(obj) or "") > 60, f"{name}: no docstring to speak of"
    assert _documented_parameters(name, obj) == [], f"{name}: parameters not described"


def test_the_check_can_fail():
    def undocumented(alpha, beta=1):
        """Does something with alpha, and more words to pass the length check of this test."""

    assert _documented_parameters("undocumented", undocumented) == ["beta"]
