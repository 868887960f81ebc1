"""
Naming the ``make`` target that builds a missing biLM: the +ELMo task configs load the biLMs that
the Makefile's pretraining targets export into ``build/``, and `with_build_hint` adds the target
to the "options file not found" of a run started before them.
"""
import os
from typing import Optional

from allennlp.common.checks import ConfigurationError

# Export folder (relative to the repository) -> the make target that writes it.
BUILD_TARGETS = {
    "build/en_small/bilm": "make pretrain-small",
    "build/ko/bilm": "make pretrain-ko",
}


def build_target(path: Optional[str]) -> Optional[str]:
    """The make target that writes ``path``, if it lies in one of `BUILD_TARGETS`' folders."""
    if not path or "://" in path:
        return None
    normalized = "/" + os.path.normpath(path).replace(os.sep, "/")
    return next((target for folder, target in BUILD_TARGETS.items() if f"/{folder}/" in normalized + "/"), None)


def with_build_hint(error: ConfigurationError, *paths: Optional[str]) -> ConfigurationError:
    """``error`` with the make target of the first of ``paths`` that is missing and known."""
    for path in paths:
        target = build_target(path)
        if target and not os.path.exists(path):
            return ConfigurationError(
                f"{error} -- this is the biLM that `{target}` exports: run `{target}` in the "
                "repository first (docs/pretraining.md), or give the config's elmo "
                "argument another biLM"
            )
    return error
