"""
AllenNLP's jsonnet evaluation given the plugin's native functions
(`elmo_plugin.training.config_functions`); a config that calls none reads exactly as before.
"""
import functools
from typing import Any, Callable

from elmo_plugin.training.config_functions import native_callbacks

MARKER = "_elmo_plugin_natives"


def _with_natives(evaluate: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(evaluate)
    def evaluate_with_natives(*args: Any, **kwargs: Any) -> str:
        callbacks = dict(native_callbacks())
        callbacks.update(kwargs.pop("native_callbacks", None) or {})
        return evaluate(*args, native_callbacks=callbacks, **kwargs)

    setattr(evaluate_with_natives, MARKER, True)
    return evaluate_with_natives


def install() -> None:
    """Wraps ``allennlp.common.params``' two jsonnet functions (once); nothing without ``_jsonnet``."""
    from allennlp.common import params

    try:
        import _jsonnet  # noqa: F401  (without it AllenNLP reads plain JSON: nothing to add)
    except ImportError:
        return
    for name in ("evaluate_file", "evaluate_snippet"):
        evaluate = getattr(params, name)
        if not getattr(evaluate, MARKER, False):
            setattr(params, name, _with_natives(evaluate))
