"""
``allennlp train`` on several nodes without a silent hang (docs/pretraining.md, docs/errors.md).
AllenNLP 2.10 reads only ``primary_address`` and ``primary_port`` from the config's
``distributed`` block: `check_distributed` refuses ``master_address``/``master_port`` and several
nodes without ``primary_port``, both of which make every node wait forever. `BoundedRendezvous`
makes each training process give up after `rendezvous_timeout` seconds
(``ELMO_PLUGIN_RENDEZVOUS_TIMEOUT``, default 600) with one line, instead of torch's 30 minutes;
`elmo_plugin.patches.train_command` puts it in ``allennlp.commands.train``'s place of
``torch.distributed``.
"""
import os
import sys
import threading
from typing import Any, Dict, Optional

import torch.distributed
from allennlp.common.checks import ConfigurationError

RENDEZVOUS_TIMEOUT_VARIABLE = "ELMO_PLUGIN_RENDEZVOUS_TIMEOUT"
DEFAULT_RENDEZVOUS_TIMEOUT = 600.0
# What AllenNLP 2.10's train_model reads from the distributed block (the rest is ignored).
DISTRIBUTED_KEYS = ("cuda_devices", "num_nodes", "primary_address", "primary_port", "ddp_accelerator")
# The names other tools use for the primary's address and port.
LAUNCHER_KEYS = ("master_address", "master_addr", "master_port")
# The exit status of a process that gave up waiting (as the plugin's other errors).
EXIT_ERROR = 1


def check_distributed(config: Dict[str, Any]) -> None:
    """
    Raises a `ConfigurationError` for a ``distributed`` block that would make the nodes wait for
    each other forever (see the module documentation); nothing for a config without one.
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


def gave_up_message(seconds: float, rank: Optional[int], world_size: Optional[int],
                    init_method: Optional[str]) -> str:
    where = f" at {init_method.replace('tcp://', '')}" if init_method else ""
    process = f"process {rank} of {world_size}" if rank is not None else "a training process"
    return (
        f"allennlp train: error: {process} waited {seconds:g} s{where} for the other processes "
        "and gave up: start the same command on every node, each with its --node-rank, and give "
        "every node the same distributed.primary_address and primary_port "
        f"({RENDEZVOUS_TIMEOUT_VARIABLE} sets the wait)"
    )


class BoundedRendezvous:
    """
    ``torch.distributed`` as ``allennlp.commands.train`` sees it, with `init_process_group` given
    up after `rendezvous_timeout` seconds; every other name is torch's.
    """

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
