"""Records written to a folder as a process makes them (``THUNDERLAB_RECORDS=DIR``, ``thunderlab.record_to``).

A training job leaves one ``*.thunderlab.json`` file per compile record for someone to open later
(``thunderlab.load``, ``thunderlab report DIR``). The compiled call only hands the record to a queue: the
payload is built and written on a background thread, so a step never waits for a file. The writer stops at
its limits (files, megabytes), says so once, and drops records it has no room for rather than block.
"""
from __future__ import annotations

import atexit
import os
import queue
import re
import sys
import threading
import time
from pathlib import Path

from thunderlab.inspect.document import SUFFIX, write_payload
from thunderlab.inspect.serialize import RecordPayload

from .compiled import RECORD_LISTENERS

ENV = "THUNDERLAB_RECORDS"
ENV_MAX_FILES = "THUNDERLAB_RECORDS_MAX_FILES"
ENV_MAX_MB = "THUNDERLAB_RECORDS_MAX_MB"
# the writer works at most this share of the time, so the training thread rarely waits for the interpreter
# lock: after building each step's part of a payload it sleeps as long as that took
DUTY = 0.5
QUEUE_SIZE = 256  # records waiting to be written; more are dropped (and counted), never waited for
EXIT_WAIT_S = 30.0  # how long the end of the process waits for records still being written


def _rank() -> int | None:
    """This process's rank once ``torch.distributed`` is initialised, else None."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return None


class RecordWriter:
    """Writes each record it is given to ``directory`` on its own thread, within ``max_files`` and ``max_mb``."""

    def __init__(self, directory, *, max_files: int = 1000, max_mb: float = 256.0):
        if not isinstance(max_files, int) or isinstance(max_files, bool) or max_files < 1:
            raise ValueError(f"record_to: max_files must be a whole number of at least 1, got {max_files!r}")
        if not isinstance(max_mb, (int, float)) or isinstance(max_mb, bool) or not max_mb > 0:
            raise ValueError(f"record_to: max_mb must be a positive number, got {max_mb!r}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_files, self.max_bytes = max_files, int(max_mb * 2**20)
        self.written: list[Path] = []
        self.bytes = 0
        self.dropped = 0  # records not written: the queue was full or a limit was reached
        self.errors: list[str] = []  # records whose writing failed, one line each
        self._seq = 0
        self._said_full = False
        self._queue: queue.Queue = queue.Queue(QUEUE_SIZE)
        self._thread = threading.Thread(target=self._run, name="thunderlab-records", daemon=True)
        self._thread.start()

    def __call__(self, record) -> None:
        """Take ``record`` to be written (a record listener: called as each record is made)."""
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every record taken so far is written (or ``timeout`` seconds); True if all are."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def _run(self) -> None:
        while True:
            record = self._queue.get()
            try:
                self._write(record)
            except Exception as e:  # a record that cannot be written must not stop the ones after it
                self.errors.append(f"{record.name}: {type(e).__name__}: {e}")
                if len(self.errors) == 1:
                    print(f"thunderlab: record {record.name!r} was not written to {self.directory}: "
                          f"{self.errors[0]}", file=sys.stderr)
            finally:
                self._queue.task_done()

    def _write(self, record) -> None:
        if len(self.written) >= self.max_files or self.bytes >= self.max_bytes:
            self._full()
            return
        self._seq += 1
        rank = _rank()
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", record.name)[:60] or "record"
        stem = f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(record.created))}-p{os.getpid()}"
        stem += f"-rank{rank}" if rank is not None else ""
        path = self.directory / f"{stem}-{self._seq:04d}-{name}{SUFFIX}"
        payload = RecordPayload(record)
        for i in range(len(record.steps)):  # step by step, pausing between (see DUTY)
            t0 = time.perf_counter()
            payload.step(i)
            time.sleep((time.perf_counter() - t0) * (1 - DUTY) / DUTY)
        write_payload(payload.to_dict(), path)
        size = path.stat().st_size
        if self.bytes + size > self.max_bytes:  # the size is known once written: this one goes over
            path.unlink()
            self._full()
            return
        self.bytes += size
        self.written.append(path)

    def _full(self) -> None:
        self.dropped += 1
        if not self._said_full:
            self._said_full = True
            print(f"thunderlab: {self.directory} holds {len(self.written)} records ({self.bytes / 2**20:.1f} MB), "
                  f"the limit ({self.max_files} files, {self.max_bytes / 2**20:g} MB); later records are not "
                  f"written (raise it with {ENV_MAX_FILES} / {ENV_MAX_MB} or thunderlab.record_to)", file=sys.stderr)

    def close(self) -> None:
        RECORD_LISTENERS.remove(self)

    def __repr__(self) -> str:
        return f"<RecordWriter {self.directory}: {len(self.written)} written, {self.dropped} dropped>"


_ACTIVE: list[RecordWriter] = []


def record_to(directory, *, max_files: int = 1000, max_mb: float = 256.0) -> RecordWriter | None:
    """Write every record made from now on to ``directory``; ``None`` stops (see ``RecordWriter``)."""
    for w in _ACTIVE:
        w.close()
        w.flush(EXIT_WAIT_S)
    _ACTIVE.clear()
    if directory is None:
        return None
    writer = RecordWriter(directory, max_files=max_files, max_mb=max_mb)
    RECORD_LISTENERS.add(writer)
    _ACTIVE.append(writer)
    return writer


def _env_number(name: str, kind, default):
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected a {'whole ' if kind is int else ''}number") from None


def from_environment() -> RecordWriter | None:
    """Start writing records to ``$THUNDERLAB_RECORDS`` when it is set (and not already writing there)."""
    directory = os.environ.get(ENV)
    if not directory or any(w.directory == Path(directory) for w in _ACTIVE):
        return None
    return record_to(directory, max_files=_env_number(ENV_MAX_FILES, int, 1000),
                     max_mb=_env_number(ENV_MAX_MB, float, 256.0))


@atexit.register
def _finish() -> None:  # records made just before the process ends are still written
    for w in _ACTIVE:
        if not w.flush(EXIT_WAIT_S):
            print(f"thunderlab: records still being written to {w.directory} after {EXIT_WAIT_S:g} s were not "
                  f"written", file=sys.stderr)
