"""
The start-up hook: for the three AllenNLP modules of `REPAIRS`, the finder that the wheel's
``elmo_plugin_startup_hook.pth`` puts first on ``sys.meta_path`` runs this file by its path and
repairs each module once AllenNLP's code has run (docs/implementation.md, "How `allennlp` finds
the plugin"). Standard library only; a failure here leaves AllenNLP's module as it was.
"""
import importlib
import importlib.util
import logging
import pkgutil
import re
import sys
from importlib import metadata
from typing import Any, Callable, Dict, Iterator, Optional, Set

PLUGIN = "elmo_plugin"
# The task models' own plugin line (they need allennlp-models).
TASKS = "elmo_plugin.tasks"

# The name of the finder class that the .pth line puts first on sys.meta_path.
FINDER_NAME = "ElmoPluginStartupHook"

# The marker on every function replaced here, so that nothing is replaced twice.
MARKER = "_elmo_plugin_startup_hook"

_PLUGIN_ERROR = re.compile(rf"^Plugin {PLUGIN}(?:\.tasks)? could not be loaded: No module named '([\w.]+)'")


def _marked(function: Callable) -> Callable:
    setattr(function, MARKER, True)
    return function


def _is_marked(function: Any) -> bool:
    return bool(getattr(function, MARKER, False))


# -- allennlp.common.util ------------------------------------------------------------------------


def submodule_importer(util: Any) -> Callable[..., None]:
    """AllenNLP 2.10.1's ``import_module_and_submodules`` (of ``util``) with ``pkgutil.iter_modules``
    in place of ``walk_packages``, so that no file of the current folder is imported."""

    def import_module_and_submodules(package_name: str, exclude: Optional[Set[str]] = None) -> None:
        exclude = exclude if exclude else set()
        try:
            import checklist  # noqa: F401
        except ImportError:
            exclude |= {"allennlp.confidence_checks.task_checklists"}
        if package_name in exclude:
            return
        importlib.invalidate_caches()
        with util.push_python_path("."):
            module = importlib.import_module(package_name)
            path = getattr(module, "__path__", [])
            path_string = "" if not path else path[0]
            for module_finder, name, _ in pkgutil.iter_modules(path):
                if (path_string and module_finder.path != path_string) or name.startswith(("_", "test")):
                    continue
                util.import_module_and_submodules(f"{package_name}.{name}", exclude=exclude)

    return _marked(import_module_and_submodules)


def repair_submodule_walk(util: Any) -> None:
    """Puts `submodule_importer` in ``allennlp.common.util`` (once)."""
    if not _is_marked(util.import_module_and_submodules):
        util.import_module_and_submodules = submodule_importer(util)


# -- allennlp.common.plugins ---------------------------------------------------------------------


def with_the_plugin(discover_plugins: Callable[[], Iterator[str]]) -> Callable[[], Iterator[str]]:
    """
    AllenNLP's ``discover_plugins``, then the plugin's lines that no plugins file named:
    ``elmo_plugin``, then ``elmo_plugin.tasks`` if ``elmo_plugin`` was imported (AllenNLP imports
    each name before it asks for the next) and allennlp-models can be found.
    """

    def discover_plugins_and_elmo_plugin() -> Iterator[str]:
        found = set()
        for name in discover_plugins():
            found.add(name)
            yield name
        if PLUGIN not in found:
            yield PLUGIN
        if TASKS not in found and PLUGIN in sys.modules and _can_find("allennlp_models"):
            yield TASKS

    return _marked(discover_plugins_and_elmo_plugin)


def _can_find(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def what_to_install(missing_module: str) -> str:
    """The installed plugin's pinned requirement for the module (``pip install --no-deps
    h5py==3.16.0``), else the repository's tested set."""
    top = missing_module.split(".")[0]
    try:
        requirements = metadata.requires(PLUGIN) or []
    except metadata.PackageNotFoundError:
        requirements = []
    for requirement in requirements:
        if ";" in requirement:  # an extra's requirement (the Korean tokenizers, allennlp-models)
            continue
        name = re.split(r"[=<>!~ \[]", requirement, maxsplit=1)[0]
        if name.lower().replace("-", "_") == top.lower():
            return f"pip install --no-deps {requirement.replace(' ', '')}"
    return "pip install --no-deps -r requirements/constraints.txt (in the repository)"


def with_what_to_install(record: logging.LogRecord) -> bool:
    """A filter for ``allennlp.common.plugins``: "Plugin elmo_plugin could not be loaded: No module
    named 'X'" also says what to install. Every record passes."""
    match = _PLUGIN_ERROR.match(str(record.msg))
    if match and record.args in ((), None) and "; add it to this environment" not in record.msg:
        record.msg = (
            f"{record.msg}; add it to this environment ({sys.prefix}): "
            f"{what_to_install(match.group(1))}, then run the command again"
        )
    return True


def repair_plugin_discovery(plugins: Any) -> None:
    """Puts `with_the_plugin` in ``allennlp.common.plugins`` and the filter on its logger (once)."""
    if not _is_marked(plugins.discover_plugins):
        plugins.discover_plugins = with_the_plugin(plugins.discover_plugins)
    util = sys.modules.get("allennlp.common.util")
    if util is not None and _is_marked(util.import_module_and_submodules):
        plugins.import_module_and_submodules = util.import_module_and_submodules
    logger = logging.getLogger(plugins.__name__)
    if not any(getattr(f, "__name__", "") == with_what_to_install.__name__ for f in logger.filters):
        logger.addFilter(with_what_to_install)


# -- allennlp.commands.train ---------------------------------------------------------------------


def late_bound(module: Any, name: str) -> Callable[..., Any]:
    """
    A function that calls ``module.name`` as it is when called (AllenNLP's own while the name
    still holds this function), for AllenNLP's parser to keep.
    """
    original = getattr(module, name)

    def call_the_current_function(*args: Any, **kwargs: Any) -> Any:
        current = getattr(module, name)
        return (original if current is call_the_current_function else current)(*args, **kwargs)

    call_the_current_function.__wrapped__ = original  # type: ignore[attr-defined]
    call_the_current_function.__name__ = name
    return _marked(call_the_current_function)


def repair_train_command(train: Any) -> None:
    """Makes ``allennlp.commands.train.train_model_from_args`` late-bound (once)."""
    if not _is_marked(train.train_model_from_args):
        train.train_model_from_args = late_bound(train, "train_model_from_args")


REPAIRS: Dict[str, Callable[[Any], None]] = {
    "allennlp.common.util": repair_submodule_walk,
    "allennlp.common.plugins": repair_plugin_discovery,
    "allennlp.commands.train": repair_train_command,
}
HOOKED_MODULES = tuple(REPAIRS)


def _others_spec(name: str, path: Any, target: Any) -> Any:
    """The module's spec from the finders after the hook's own (AllenNLP's files)."""
    for finder in sys.meta_path:
        if FINDER_NAME in (getattr(finder, "__name__", ""), getattr(type(finder), "__name__", "")):
            continue
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        spec = find(name, path, target)
        if spec is not None:
            return spec
    return None


def find_spec(name: str, path: Any = None, target: Any = None) -> Any:
    """For one of `HOOKED_MODULES`, AllenNLP's own spec whose loader then repairs the module; None
    for any other name and where anything goes wrong (the import goes on as without the hook)."""
    repair = REPAIRS.get(name)
    if repair is None:
        return None
    try:
        spec = _others_spec(name, path, target)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return None
        execute = loader.exec_module

        def exec_module_then_repair(module: Any) -> None:
            execute(module)
            try:
                repair(module)
            except Exception:  # the module stays AllenNLP's own
                pass

        loader.exec_module = exec_module_then_repair
        return spec
    except Exception:
        return None
