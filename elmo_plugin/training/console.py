"""
What ``allennlp train`` shows on the console while the plugin is imported (applied by
`elmo_plugin.patches.console`): the plugin's report (`REPORT_LOGGER`) and warnings that call for
action, progress bars only on a terminal; ``out.log`` keeps everything, and
``ELMO_PLUGIN_VERBOSE=1`` (or ``ALLENNLP_DEBUG``, ``ALLENNLP_LOG_LEVEL=DEBUG``) keeps AllenNLP's
console, an environment variable because AllenNLP parses ``train``'s flags before it imports plugins.
"""
import contextlib
import logging
import os
import re
import sys
import time
from typing import Any, Dict, Iterator, List, Optional

from allennlp.training.callbacks.callback import TrainerCallback

# The logger of the console report: its INFO records are shown.
REPORT_LOGGER = "elmo_plugin.report"
# One switch for the whole console: the training report and AllenNLP's plugin lines.
VERBOSE_VARIABLE = "ELMO_PLUGIN_VERBOSE"

report = logging.getLogger(REPORT_LOGGER)

# Warnings that describe a choice of the config and ask for nothing: kept in out.log only.
_NOT_ACTIONABLE = (
    re.compile(r"You provided a validation dataset but patience was set to None"),
)


def verbose() -> bool:
    """Whether the console is asked to show everything (see the module documentation)."""
    if os.environ.get(VERBOSE_VARIABLE, "").strip().lower() not in ("", "0", "false", "no"):
        return True
    return bool(os.environ.get("ALLENNLP_DEBUG")) or os.environ.get("ALLENNLP_LOG_LEVEL", "").upper() == "DEBUG"


class ConsoleFilter(logging.Filter):
    """Lets the plugin's report and actionable warnings through to a console handler."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == REPORT_LOGGER or record.name.startswith(REPORT_LOGGER + "."):
            return True
        if record.levelno < logging.WARNING:
            return False
        message = record.getMessage()
        return not any(pattern.search(message) for pattern in _NOT_ACTIONABLE)


class ConsoleFormatter(logging.Formatter):
    """The report as plain lines; everything else as AllenNLP formats it."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s - %(levelname)s - %(name)s - %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        if record.name == REPORT_LOGGER:
            return record.getMessage()
        return super().format(record)


def _is_console(handler: logging.Handler) -> bool:
    streams = (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)
    return type(handler) is logging.StreamHandler and getattr(handler, "stream", None) in streams


def quiet_console_handlers(logger: Optional[logging.Logger] = None) -> None:
    """Puts `ConsoleFilter` and `ConsoleFormatter` on ``logger``'s (root's) console handlers."""
    if verbose():
        return
    logger = logger or logging.getLogger()
    for handler in logger.handlers:
        if _is_console(handler) and not any(isinstance(f, ConsoleFilter) for f in handler.filters):
            handler.addFilter(ConsoleFilter())
            handler.setFormatter(ConsoleFormatter())


# Set while the trainer validates: its progress bar then leaves no line behind.
_validating = False


@contextlib.contextmanager
def validating() -> Iterator[None]:
    global _validating
    saved, _validating = _validating, True
    try:
        yield
    finally:
        _validating = saved


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def progress_bar_arguments(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """``Tqdm.tqdm``'s keyword arguments for the console of the module documentation."""
    from allennlp.common import logging as common_logging

    if not verbose():
        loading = str(kwargs.get("desc", "")).startswith("loading instances")
        # Redirected: no bar (a bar redraws itself with carriage returns); the epoch lines
        # report the progress, --file-friendly-logging a bar line every 10 s.
        if loading or (not common_logging.FILE_FRIENDLY_LOGGING and not _is_terminal(sys.stderr)):
            kwargs["disable"] = True
        elif _validating:
            kwargs.setdefault("leave", False)
    return kwargs


def format_number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return str(value)


def metrics_line(metrics: Dict[str, Any], prefix: str, names: List[str]) -> str:
    """``name value`` pairs of ``metrics[prefix + name]`` for the names present."""
    return ", ".join(f"{name} {format_number(metrics[prefix + name])}" for name in names if prefix + name in metrics)


def reported_metric_names(metrics: Dict[str, Any], tracked: List[str]) -> List[str]:
    """Perplexity and loss first, then the metrics the trainer selects the best epoch by."""
    names = [name for name in ("ppl", "loss") if any(k.endswith("_" + name) for k in metrics)]
    return names + [name for name in tracked if name not in names]


class EpochSummaryCallback(TrainerCallback):
    """
    One line per epoch on the console (`REPORT_LOGGER`): training and validation perplexity or loss
    and the metric that selects the best epoch, whether it is the best so far, the time it took.
    The plugin's ``gradient_descent`` trainer adds it to every run.
    """

    def on_start(self, trainer: Any, is_primary: bool = True, **kwargs: Any) -> None:
        self._started = time.monotonic()

    def on_epoch(self, trainer: Any, metrics: Dict[str, Any], epoch: int, is_primary: bool = True, **kwargs: Any):
        if not is_primary or epoch < 0:
            return
        now = time.monotonic()
        seconds, self._started = now - getattr(self, "_started", now), now
        tracker = getattr(trainer, "_metric_tracker", None)
        tracked = [name for _, name in getattr(tracker, "tracked_metrics", [])]
        names = reported_metric_names(metrics, tracked)
        training, validation = (metrics_line(metrics, prefix, names) for prefix in ("training_", "validation_"))
        parts = [f"epoch {epoch + 1}/{getattr(trainer, '_num_epochs', '?')}"]
        parts += [f"{kind} {text}" for kind, text in (("training", training), ("validation", validation)) if text]
        best = " (best so far)" if metrics.get("best_epoch") == epoch and validation else ""
        report.info("%s%s [%s]", " | ".join(parts), best, duration(seconds))


def duration(seconds: float) -> str:
    """``H:MM:SS``."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}"
