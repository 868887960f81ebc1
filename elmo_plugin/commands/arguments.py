"""Argument types shared by the plugin's ``allennlp`` subcommands."""
import argparse


def positive_int(value: str) -> int:
    """An argparse ``type`` for counts that must be at least 1 (batch sizes, minimum counts)."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return number
