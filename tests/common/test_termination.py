"""
A Ctrl-C or a SIGTERM swallowed by the work (by an ``except`` that the signal's exception
happened to land in, or a finalizer, where Python cannot raise) still stops a command: no output
takes its final name, and the command reports the interruption with status 130 or 143.
"""
import os
import signal
import sys

import pytest
from allennlp.common.util import SigTermReceived, install_sigterm_handler

from elmo_plugin.commands.common import EXIT_INTERRUPTED, EXIT_TERMINATED, run_reporting_errors
from elmo_plugin.common.atomic_output import atomic_output
from elmo_plugin.common.termination import raise_if_interrupted, watch_interruptions

# The signal, and the status of a command it interrupts.
SIGNALS = pytest.mark.parametrize(
    "signum, status", [(signal.SIGINT, EXIT_INTERRUPTED), (signal.SIGTERM, EXIT_TERMINATED)]
)


@pytest.fixture
def allennlp_sigterm_handler():
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's, as in a terminal
    install_sigterm_handler()  # what `allennlp` does before any command runs
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def swallowed(signum: int) -> None:
    """The signal arriving where a library catches every exception."""
    try:
        os.kill(os.getpid(), signum)  # the handler raises right after the call
    except BaseException:  # noqa: BLE001, S110 (the library's, not ours)
        pass


@SIGNALS
def test_a_swallowed_signal_leaves_no_output_and_ends_the_command_with_its_status(
    signum, status, tmp_path, allennlp_sigterm_handler, capsys
):
    output = tmp_path / "out.txt"
    reached_the_end = []

    def work() -> None:
        with atomic_output(str(output)) as temporary:
            with open(temporary, "w") as handle:
                handle.write("complete-looking output\n")
            swallowed(signum)
            reached_the_end.append(True)  # the work itself went on

    with pytest.raises(SystemExit) as exit_info:
        run_reporting_errors("elmo", work, interrupted=f"interrupted; {output} was not written.")
    assert reached_the_end == [True]
    assert exit_info.value.code == status
    assert capsys.readouterr().err == f"allennlp elmo: error: interrupted; {output} was not written.\n"
    assert os.listdir(tmp_path) == []
    assert signal.getsignal(signal.SIGTERM).__name__ == "_handle_sigterm"  # AllenNLP's, restored
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


class SignalledWhileFinalized:
    """An object whose finalizer is where the signal lands: Python cannot raise there."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __del__(self):
        os.kill(os.getpid(), self.signum)  # the handler runs inside __del__


@SIGNALS
def test_a_signal_landing_in_a_finalizer_prints_no_traceback_and_still_stops(
    signum, status, allennlp_sigterm_handler, capsys, monkeypatch
):
    printed = []  # what Python's hook would print ("Exception ignored in ...", a traceback)
    monkeypatch.setattr(sys, "unraisablehook", printed.append)

    def work() -> None:
        SignalledWhileFinalized(signum)  # finalized at once: the signal's exception is unraisable
        raise_if_interrupted()

    with pytest.raises(SystemExit) as exit_info:
        run_reporting_errors("elmo", work, interrupted="interrupted.")
    assert [type(unraisable.exc_value) for unraisable in printed] == []
    assert exit_info.value.code == status
    assert capsys.readouterr().err == "allennlp elmo: error: interrupted.\n"
    assert sys.unraisablehook == printed.append  # restored: other unraisable exceptions print


def test_without_a_sigterm_or_outside_a_command_nothing_is_raised(
    tmp_path, allennlp_sigterm_handler
):
    with watch_interruptions():
        raise_if_interrupted()
        with atomic_output(str(tmp_path / "out.txt")) as temporary:
            open(temporary, "w").close()
    assert os.listdir(tmp_path) == ["out.txt"]
    # Outside watch_interruptions the signals' exceptions are raised where they land, and not
    # remembered afterwards.
    with pytest.raises(SigTermReceived):
        os.kill(os.getpid(), signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
    raise_if_interrupted()


def test_an_ignored_ctrl_c_stays_ignored(allennlp_sigterm_handler):
    # As under nohup: the command does not take Ctrl-C over.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with watch_interruptions():
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGINT)
        raise_if_interrupted()
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
