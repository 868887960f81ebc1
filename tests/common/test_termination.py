"""
A SIGTERM swallowed by the work (by an ``except Exception`` that the signal's exception happened
to land in) still stops a command: no output takes its final name, and the command reports the
interruption with status 143.
"""
import os
import signal
import sys

import pytest
from allennlp.common.util import SigTermReceived, install_sigterm_handler

from elmo_plugin.commands.common import EXIT_TERMINATED, run_reporting_errors
from elmo_plugin.common.atomic_output import atomic_output
from elmo_plugin.common.termination import raise_if_terminated, watch_sigterm


@pytest.fixture
def allennlp_sigterm_handler():
    previous = signal.getsignal(signal.SIGTERM)
    install_sigterm_handler()  # what `allennlp` does before any command runs
    yield
    signal.signal(signal.SIGTERM, previous)


def swallowed_sigterm() -> None:
    """A SIGTERM arriving where a library catches every exception."""
    try:
        os.kill(os.getpid(), signal.SIGTERM)  # the handler raises right after the call
    except Exception:  # noqa: BLE001 (the library's, not ours)
        pass


def test_a_swallowed_sigterm_leaves_no_output_and_ends_the_command_with_143(
    tmp_path, allennlp_sigterm_handler, capsys
):
    output = tmp_path / "out.txt"
    reached_the_end = []

    def work() -> None:
        with atomic_output(str(output)) as temporary:
            with open(temporary, "w") as handle:
                handle.write("complete-looking output\n")
            swallowed_sigterm()
            reached_the_end.append(True)  # the work itself went on

    with pytest.raises(SystemExit) as exit_info:
        run_reporting_errors("elmo", work, interrupted=f"interrupted; {output} was not written.")
    assert reached_the_end == [True]
    assert exit_info.value.code == EXIT_TERMINATED
    assert capsys.readouterr().err == f"allennlp elmo: error: interrupted; {output} was not written.\n"
    assert os.listdir(tmp_path) == []
    assert signal.getsignal(signal.SIGTERM).__name__ == "_handle_sigterm"  # AllenNLP's, restored


class SignalledWhileFinalized:
    """An object whose finalizer is where the SIGTERM lands: Python cannot raise there."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs inside __del__


def test_a_sigterm_landing_in_a_finalizer_prints_no_traceback_and_still_stops(
    allennlp_sigterm_handler, capsys, monkeypatch
):
    printed = []  # what Python's hook would print ("Exception ignored in ...", a traceback)
    monkeypatch.setattr(sys, "unraisablehook", printed.append)

    def work() -> None:
        SignalledWhileFinalized()  # finalized at once: the signal's exception is unraisable
        raise_if_terminated()

    with pytest.raises(SystemExit) as exit_info:
        run_reporting_errors("elmo", work, interrupted="interrupted.")
    assert [type(unraisable.exc_value) for unraisable in printed] == []
    assert exit_info.value.code == EXIT_TERMINATED
    assert capsys.readouterr().err == "allennlp elmo: error: interrupted.\n"
    assert sys.unraisablehook == printed.append  # restored: other unraisable exceptions print


def test_without_a_sigterm_or_outside_a_command_nothing_is_raised(
    tmp_path, allennlp_sigterm_handler
):
    with watch_sigterm():
        raise_if_terminated()
        with atomic_output(str(tmp_path / "out.txt")) as temporary:
            open(temporary, "w").close()
    assert os.listdir(tmp_path) == ["out.txt"]
    # Outside watch_sigterm a SIGTERM is AllenNLP's exception, raised where it lands, and not
    # remembered afterwards.
    with pytest.raises(SigTermReceived):
        os.kill(os.getpid(), signal.SIGTERM)
    raise_if_terminated()
