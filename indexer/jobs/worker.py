"""A worker: claims jobs, runs their handler while a heartbeat renews the lease, records the outcome.

Runs as a thread inside the API server (the default) or as the ``splitaudit worker``
process. Handlers report progress through a callback; the callback is also where a job
notices that it must stop (the worker is shutting down, or its lease was lost to another
worker), because a Python thread cannot be interrupted from outside.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import OperationalError

from splitaudit.indexer.errors import SplitauditError
from splitaudit.indexer.jobs.queue import (
    DEFAULT_LEASE_S,
    DEFAULT_MAX_ATTEMPTS,
    ClaimedJob,
    claim_next,
    complete,
    fail,
    heartbeat,
    job_error_text,
    release,
    requeue_expired,
)
from splitaudit.indexer.workspace import Workspace

log = logging.getLogger(__name__)

ProgressFn = Callable[[float, str], None]


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What a handler hands back: a message and an optional JSON result kept on the job."""

    message: str | None = None
    result: dict[str, Any] | None = None
    # Run once the job is recorded done (never before: a retry must still find its inputs).
    after_done: Callable[[], None] | None = None


Handler = Callable[[Workspace, ClaimedJob, ProgressFn], JobOutcome | None]


class JobCancelled(BaseException):
    """Raised inside a handler (from its progress callback) when the job must stop now.

    A ``BaseException`` (like ``KeyboardInterrupt``): the library's ``except Exception``
    handlers, which mark a run failed, let it through, so a stopped run stays resumable.
    """


def default_owner() -> str:
    """A worker identity unique across hosts, processes and restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker:
    """Claims and runs jobs one at a time against one workspace."""

    def __init__(
        self,
        ws: Workspace,
        handlers: Mapping[str, Handler],
        *,
        owner: str | None = None,
        lease_s: float = DEFAULT_LEASE_S,
        poll_s: float = 1.0,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        progress_interval_s: float = 0.5,
    ) -> None:
        if lease_s <= 0 or poll_s <= 0:
            raise ValueError("lease_s and poll_s must be positive")
        self.ws = ws
        self.handlers = dict(handlers)
        self.owner = owner or default_owner()
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.max_attempts = max_attempts
        self.progress_interval_s = progress_interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._current: ClaimedJob | None = None
        self._current_lock = threading.Lock()

    # ---- lifecycle -------------------------------------------------------------------

    def start(self) -> threading.Thread:
        """Run the loop in a daemon thread (the in-process worker of the API server)."""
        if self._thread is not None and self._thread.is_alive():
            return self._thread
        self._stop.clear()
        self._thread = threading.Thread(
            target=self.run, name=f"splitaudit-worker-{self.owner}", daemon=True
        )
        self._thread.start()
        return self._thread

    def request_stop(self) -> None:
        """Ask the loop to stop without waiting (safe from a signal handler)."""
        self._stop.set()

    def stop(self, timeout: float | None = 30.0) -> bool:
        """Ask the loop to stop and wait up to ``timeout``; ``True`` when it stopped.

        A running job is re-queued at its next progress report. One that reports nothing
        for ``timeout`` (a long C call: opening a big index, decoding) is handed back here
        instead (``abandon_current``), so it is re-queued at once rather than when its lease
        expires; its thread, which cannot be interrupted, can no longer record anything.
        """
        self._stop.set()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        if not self._thread.is_alive():
            return True
        abandoned = self.abandon_current()
        log.warning(
            "worker %s did not stop within %ss%s",
            self.owner,
            timeout,
            f"; job {abandoned} handed back to the queue" if abandoned is not None else "",
        )
        return False

    def abandon_current(self) -> int | None:
        """Re-queue the running job (uncounted attempt) now; its id, or ``None`` when idle."""
        with self._current_lock:
            job = self._current
        if job is None:
            return None
        try:
            released = release(self.ws.sessions, job_id=job.id, owner=self.owner)
        except OperationalError as exc:  # its lease expires and another worker takes it
            log.warning("job %d: could not hand it back: %s", job.id, exc)
            return None
        return job.id if released else None

    @property
    def is_running(self) -> bool:
        """True while the worker thread started by ``start`` is alive."""
        return self._thread is not None and self._thread.is_alive()

    def sleep(self, seconds: float) -> None:
        """Sleep, waking early when ``stop`` is called."""
        self._stop.wait(seconds)

    @property
    def stopping(self) -> bool:
        """True once ``stop`` was called."""
        return self._stop.is_set()

    def run(self) -> None:
        """Claim and run jobs until ``stop``; waits ``poll_s`` whenever the queue is empty."""
        log.info("worker %s started", self.owner)
        try:
            requeue_expired(self.ws.sessions, max_attempts=self.max_attempts)
        except OperationalError as exc:
            log.warning("could not re-queue expired jobs: %s", exc)
        while not self._stop.is_set():
            try:
                ran = self.run_once()
            except OperationalError as exc:  # DB briefly unavailable / locked: try again later
                log.warning("worker %s: database error, retrying: %s", self.owner, exc)
                ran = False
            if not ran:
                self._stop.wait(self.poll_s)
        log.info("worker %s stopped", self.owner)

    # ---- one job ---------------------------------------------------------------------

    def run_once(self) -> bool:
        """Claim one job and run it to its end; ``False`` when there was nothing to run."""
        job = claim_next(
            self.ws.sessions,
            owner=self.owner,
            lease_s=self.lease_s,
            kinds=tuple(self.handlers),
            max_attempts=self.max_attempts,
        )
        if job is None:
            return False
        self._execute(job)
        return True

    def _execute(self, job: ClaimedJob) -> None:
        with self._current_lock:
            self._current = job
        try:
            self._execute_current(job)
        finally:
            with self._current_lock:
                self._current = None

    def _execute_current(self, job: ClaimedJob) -> None:
        handler = self.handlers[job.kind]
        run = _RunningJob(self, job)
        run.start_heartbeat()
        try:
            run.progress(0.0, "started")
            outcome = handler(self.ws, job, run.progress) or JobOutcome()
        except JobCancelled:
            if self._stop.is_set() and not run.lost.is_set():
                release(self.ws.sessions, job_id=job.id, owner=self.owner)
                log.info("job %d re-queued: worker shutting down", job.id)
            else:
                log.warning("job %d: lease lost to another worker; abandoned here", job.id)
            return
        except SplitauditError as exc:
            log.warning("job %d (%s) failed: %s", job.id, job.kind, exc)
            fail(self.ws.sessions, job_id=job.id, owner=self.owner, error=str(exc))
            return
        except Exception as exc:
            log.exception("job %d (%s) crashed", job.id, job.kind)
            # The full error (SQL, parameters, traceback) is in the log; the job keeps a sentence.
            fail(self.ws.sessions, job_id=job.id, owner=self.owner, error=job_error_text(exc))
            return
        finally:
            run.stop_heartbeat()
        if not complete(
            self.ws.sessions,
            job_id=job.id,
            owner=self.owner,
            message=outcome.message or "done",
            result=outcome.result,
        ):
            log.warning(
                "job %d finished but its lease was lost; result not recorded as done", job.id
            )
            return
        if outcome.after_done is not None:
            try:
                outcome.after_done()
            except Exception:  # the job is done; a failed clean-up is only logged
                log.exception("job %d: clean-up after completion failed", job.id)


class _RunningJob:
    """Lease heartbeat and progress reporting for one job."""

    def __init__(self, worker: Worker, job: ClaimedJob) -> None:
        self.worker = worker
        self.job = job
        self.lost = threading.Event()
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._latest: tuple[float, str] | None = None
        self._last_write = 0.0
        self._thread: threading.Thread | None = None

    def start_heartbeat(self) -> None:
        self._thread = threading.Thread(
            target=self._beat, name=f"heartbeat-{self.job.id}", daemon=True
        )
        self._thread.start()

    def stop_heartbeat(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(10)

    def _beat(self) -> None:
        interval = max(self.worker.lease_s / 3, 0.05)
        while not self._done.wait(interval):
            self._write(force=True)

    def _write(self, *, force: bool) -> None:
        with self._lock:
            now = time.monotonic()
            if not force and now - self._last_write < self.worker.progress_interval_s:
                return
            latest, self._latest = self._latest, None
            self._last_write = now
        frac, message = latest if latest is not None else (None, None)
        try:
            held = heartbeat(
                self.worker.ws.sessions,
                job_id=self.job.id,
                owner=self.worker.owner,
                lease_s=self.worker.lease_s,
                progress=frac,
                message=message,
            )
        except OperationalError as exc:
            log.warning("job %d: heartbeat failed, will retry: %s", self.job.id, exc)
            return
        if not held:
            self.lost.set()

    def progress(self, fraction: float, message: str) -> None:
        """The callback handed to the job's handler."""
        with self._lock:
            self._latest = (fraction, message)
        self._write(force=False)
        if self.lost.is_set() or self.worker.stopping:
            raise JobCancelled(f"job {self.job.id} stopped")
