"""
``allennlp train`` as the plugin's (`elmo_plugin.commands.train_command`), with a rendezvous that
gives up with one line (`elmo_plugin.commands.train_distributed.BoundedRendezvous`).
"""
from elmo_plugin.commands import train_command
from elmo_plugin.commands.train_distributed import BoundedRendezvous


def install() -> None:
    """Replaces ``train_model_from_file``, ``train_model_from_args`` and ``dist`` there (once)."""
    from allennlp.commands import train

    train.train_model_from_file = train_command.train_model_from_file
    train.train_model_from_args = train_command.train_model_from_args
    if not isinstance(train.dist, BoundedRendezvous):
        train.dist = BoundedRendezvous()
