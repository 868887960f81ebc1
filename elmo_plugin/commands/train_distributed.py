"""
``allennlp train`` on several nodes without a silent hang (docs/pretraining.md, docs/errors.md):
`check_distributed` refuses a ``distributed`` block that makes every node wait forever, and
`BoundedRendezvous` makes each training process give up after `rendezvous_timeout` seconds with
one line, instead of torch's 30 minutes.
"""
import os
import sys
import threading
from typing import Any, Dict, Optional

import torch.distributed
from allennlp.common.checks import ConfigurationError

from elmo_plugin.commands.common import EXIT_ERROR

RENDEZVOUS_TIMEOUT_VARIABLE = "ELMO_PLUGIN_RENDEZVOUS_TIMEOUT"
DEFAULT_RENDEZVOUS_TIMEOUT = 600.0
# The names other tools use for the primary's address and port.
LAUNCHER_KEYS = ("master_address", "master_addr", "master_port")


def check_distributed(config: Dict[str, Any]) -> None:
    """
    Raises a `ConfigurationError` for a ``distributed`` block that would make the nodes wait for
    each other forever: ``master_*`` keys (AllenNLP 2.10 reads ``primary_address`` and
    ``primary_port`` only), or several nodes without ``primary_port``.
    """
    distributed = config.get("distributed")
    if not isinstance(distributed, dict):
        return
    launcher_keys = [key for key in LAUNCHER_KEYS if key in distributed]
    if launcher_keys:
        given = ", ".join(f"distributed.{key}" for key in launcher_keys)
        raise ConfigurationError(
            f"{given}: not read; AllenNLP 2.10 reads primary_address/primary_port (each node would "
            "wait for the others at 127.0.0.1 on a port of its own): rename them"
        )
    num_nodes = distributed.get("num_nodes", 1)
    if isinstance(num_nodes, int) and num_nodes > 1 and distributed.get("primary_port") is None:
        raise ConfigurationError(
            f"distributed.num_nodes is {num_nodes} but distributed.primary_port is missing: "
            "AllenNLP 2.10 reads primary_address/primary_port, and without a port each node picks "
            "its own and waits for the others forever; give both, the same on every node"
        )


def rendezvous_timeout() -> float:
    """``$ELMO_PLUGIN_RENDEZVOUS_TIMEOUT`` seconds (default 600)."""
    value = os.environ.get(RENDEZVOUS_TIMEOUT_VARIABLE, "").strip()
    if not value:
        return DEFAULT_RENDEZVOUS_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if seconds <= 0:
        raise ConfigurationError(
            f"{RENDEZVOUS_TIMEOUT_VARIABLE}={value}: must be a positive number of seconds"
        )
    return seconds


def gave_up_message(
    seconds: float, rank: Optional[int], world_size: Optional[int], init_method: Optional[str]
) -> str:
    where = f" at {init_method.replace('tcp://', '')}" if init_method else ""
    process = f"process {rank} of {world_size}" if rank is not None else "a training process"
    return (
        f"allennlp train: error: {process} waited {seconds:g} s{where} for the other processes "
        "and gave up: start the same command on every node, each with its --node-rank, and give "
        "every node the same distributed.primary_address and primary_port "
        f"({RENDEZVOUS_TIMEOUT_VARIABLE} sets the wait)"
    )


class BoundedRendezvous:
    """``torch.distributed`` for ``allennlp.commands.train``: `init_process_group` gives up after
    `rendezvous_timeout` seconds; every other name is torch's."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.distributed, name)

    def init_process_group(self, *args: Any, **kwargs: Any) -> None:
        seconds = rendezvous_timeout()

        def give_up() -> None:
            # The waiting call cannot be interrupted: say so and end the process.
            sys.stdout.flush()
            sys.stderr.write(gave_up_message(seconds, kwargs.get("rank"), kwargs.get("world_size"),
                                             kwargs.get("init_method")) + "\n")
            sys.stderr.flush()
            os._exit(EXIT_ERROR)

        watchdog = threading.Timer(seconds, give_up)
        watchdog.daemon = True
        watchdog.start()
        try:
            torch.distributed.init_process_group(*args, **kwargs)
        finally:
            watchdog.cancel()
