"""
How the ranks of a sharded run notice, within seconds, that another rank stopped: each rank
rewrites a heartbeat file in the shards directory once a second and reads the others' (why and
how: docs/implementation.md, "Heartbeats of a sharded run").
"""
import contextlib
import json
import os
import socket
import sys
import threading
import time
from typing import Dict, Optional, Tuple

from allennlp.common.checks import ConfigurationError

DEFAULT_TIMEOUT_S = 20.0
# Tests and impatient users: ELMO_HEARTBEAT_TIMEOUT=5 allennlp elmo ...
TIMEOUT_VARIABLE = "ELMO_HEARTBEAT_TIMEOUT"

RUNNING, DONE, FAILED = "running", "done", "failed"


def heartbeat_path(directory: str, rank: int) -> str:
    return os.path.join(directory, f".rank-{rank:05d}.heartbeat")


class Heartbeats:
    """
    This rank's heartbeat and its watch over the others (see the module documentation).

    # Parameters

    directory, rank, world_size, token
        The shards directory, this rank, the number of ranks and the run's token.
    timeout_s : `float`, optional
        Seconds without a heartbeat after which a rank counts as stopped (``$ELMO_HEARTBEAT_TIMEOUT`` or 20).
    interval_s : `float`, optional (default = `1.0`)
        Seconds between beats.
    grace_s : `float`, optional (default = `3.0`)
        How long the main thread has to stop by itself once a problem is noted.
    """

    def __init__(
        self,
        directory: str,
        rank: int,
        world_size: int,
        token: str,
        timeout_s: Optional[float] = None,
        interval_s: float = 1.0,
        grace_s: float = 3.0,
    ) -> None:
        self.directory = directory
        self.rank = rank
        self.world_size = world_size
        self.token = token
        if timeout_s is None:
            timeout_s = float(os.environ.get(TIMEOUT_VARIABLE) or DEFAULT_TIMEOUT_S)
        self.timeout_s = timeout_s
        self.interval_s = interval_s
        self.grace_s = grace_s
        self._beat = 0
        self._state = RUNNING
        self._message = ""
        self._counts: Dict[str, int] = {"sentences": 0, "reused": 0}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._acknowledged = threading.Event()
        self.problem: Optional[str] = None
        # rank -> (last content seen, monotonic time it was first seen)
        self._seen: Dict[int, Tuple[str, float]] = {}
        self._others: Dict[int, dict] = {}
        self._thread = threading.Thread(target=self._run, name="elmo-heartbeats", daemon=True)

    def start(self) -> "Heartbeats":
        self._write()
        self._thread.start()
        return self

    # What this rank reports.
    def set_counts(self, sentences: int, reused: int) -> None:
        with self._lock:
            self._counts = {"sentences": sentences, "reused": reused}

    def mark_done(self) -> None:
        with self._lock:
            self._state = DONE
        self._write()

    def mark_failed(self, message: str) -> None:
        with self._lock:
            self._state, self._message = FAILED, message
        self._write()

    def stop(self) -> None:
        self._acknowledged.set()
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def remove_own_file(self) -> None:
        with contextlib.suppress(OSError):
            os.remove(heartbeat_path(self.directory, self.rank))

    # What the other ranks report.
    def others(self) -> Dict[int, dict]:
        with self._lock:
            return dict(self._others)

    def all_done(self) -> bool:
        others = self.others()
        return all(others.get(rank, {}).get("state") == DONE for rank in range(self.world_size) if rank != self.rank)

    def raise_if_problem(self) -> None:
        """Called by the main thread between steps: one `ConfigurationError` once another rank
        has stopped."""
        if self.problem is not None:
            self._acknowledged.set()
            raise ConfigurationError(self.problem)

    # The thread.
    def _write(self) -> None:
        with self._lock:
            self._beat += 1
            content = {
                "token": self.token,
                "beat": self._beat,
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "state": self._state,
                "message": self._message,
                **self._counts,
            }
        path = heartbeat_path(self.directory, self.rank)
        temporary = f"{path}.{os.getpid()}.tmp"
        # A full disk: the shard writer reports it; the others will notice silence.
        with contextlib.suppress(OSError):
            with open(temporary, "w", encoding="utf-8") as handle:
                json.dump(content, handle)
            os.replace(temporary, path)

    def _read(self, rank: int) -> Tuple[str, Optional[dict]]:
        """A rank's heartbeat of this run, as text and content; ``("", None)`` if there is none
        (or only an earlier run's)."""
        try:
            with open(heartbeat_path(self.directory, rank), encoding="utf-8") as handle:
                text = handle.read()
            content = json.loads(text)
        except (OSError, ValueError):
            return "", None
        return (text, content) if content.get("token") == self.token else ("", None)

    def _check(self) -> Optional[str]:
        """The problem with another rank, if there is one."""
        now = time.monotonic()
        for rank in range(self.world_size):
            if rank == self.rank:
                continue
            text, content = self._read(rank)
            if content is not None:
                with self._lock:
                    self._others[rank] = content
                if content["state"] == DONE:
                    continue
                if content["state"] == FAILED:
                    return f"rank {rank} (pid {content['pid']} on {content['host']}) failed: {content['message']}"
            last = self._seen.get(rank)
            if last is None or last[0] != text:
                self._seen[rank] = (text, now)
            elif now - last[1] > self.timeout_s:
                where = f" (pid {content['pid']} on {content['host']})" if content is not None else ""
                return (
                    f"rank {rank}{where} stopped: no heartbeat for {self.timeout_s:g} s (killed, "
                    "or its node was lost); rank "
                    f"{self.rank} stops too. The finished shards are kept: run the same command "
                    "again to resume"
                )
        return None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._lock:
                state = self._state
            if state == RUNNING:
                self._write()
            if self.problem is None:
                self._problem_time = time.monotonic()
                self.problem = self._check()
            elif not self._acknowledged.is_set() and (
                time.monotonic() - self._problem_time > self.grace_s
            ):
                # The main thread is blocked (a collective waiting for the dead rank): end the
                # process here, with the same one line.
                sys.stderr.write(f"allennlp elmo: error: {self.problem}\n")
                sys.stderr.flush()
                os._exit(1)
