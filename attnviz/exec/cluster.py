"""The Dask engine: the same door onto a `distributed` cluster, for when one server is not enough.

`ATTNVIZ_DASK_SCHEDULER=tcp://host:8786` (or `submit(..., engine="tcp://host:8786")`) sends every
task to the scheduler at that address through one `distributed.Client`; nothing else changes. A
task runs in a thread of a Dask worker (`run_on_worker`), with the same `Monitor` calls as in a
local worker:

- progress: each `monitor.report` is put, pickled, on a `distributed.Queue` named for the task; a
  thread of the server (`DaskEngine._watch`) takes it off and feeds the `Handle`;
- stop: `Handle.stop()` and the time limit set a `distributed.Event` of the same name, which
  `monitor.stopped()` reads (at most every 0.2 s); a task that has not ended `grace_s` later is
  cancelled (its handle ends), and if it still runs `STUCK_S` later its worker is restarted by
  its nanny — a Dask worker cannot end one of its threads, and a restart is the last resort
  (tried on a `LocalCluster` here, the third restart in a row left no worker);
- the value comes back as the future's result, pickled by the worker as locally (`pack`).

What differs from the local engine: a task's memory budget is not enforced per task — the worker's
own `--memory-limit` is the guard (its nanny restarts a worker past it: "the worker stopped");
a worker lost under a task is reported as stopped, never re-run. docs/deploy.md says how to start
a scheduler and workers.
"""

from __future__ import annotations

import contextlib
import pickle
import threading
import time
import uuid
from typing import Any

from attnviz.exec.failures import Busy, NoWorker, Stopped, TaskError, TaskFailed, WorkerStopped
from attnviz.exec.handle import Handle
from attnviz.exec.limits import Budget
from attnviz.exec.monitor import Monitor
from attnviz.exec.outcome import failure, pack, run
from attnviz.exec.worker import ready

POLL_S = 0.1  # how often the server's watcher takes the task's reports and looks at its limits
STOP_EVERY_S = 0.2  # how often a task on a Dask worker asks the scheduler whether to stop
CONNECT_S = 30  # how long to wait for the scheduler when the first task is sent
STUCK_S = 30  # after a forced stop, how long a task may go on in its Dask worker's thread before a restart
RESTART_S = 60  # how long a worker's restart may take


class DaskMonitor(Monitor):
    """A task's monitor on a Dask worker: reports on the task's queue, stop from its event."""

    def __init__(self, queue, event):
        super().__init__()
        self._queue, self._event = queue, event
        self._asked, self._next = False, 0.0

    def _send(self, done: int, total: int | None, partial: Any) -> None:
        self._queue.put(pickle.dumps(("progress", done, total, partial), protocol=pickle.HIGHEST_PROTOCOL))

    def _stop_flag(self) -> bool:
        now = time.monotonic()
        if not self._asked and now >= self._next:  # one scheduler round trip per STOP_EVERY_S at most
            self._asked, self._next = bool(self._event.is_set()), now + STOP_EVERY_S
        return self._asked


_RUNNING: set[str] = set()  # on a Dask worker: the names of the tasks its threads are running


def run_on_worker(payload: bytes, name: str) -> bytes:
    """The Dask task: run the attnviz task in this worker, reporting on the queue `name`, stopping on
    the event `name`; its outcome, packed."""
    from distributed import Event, Queue, get_worker

    queue = Queue(name)
    _RUNNING.add(name)
    try:
        queue.put(pickle.dumps(("start", get_worker().address)))
        try:
            task, args, kwargs = pickle.loads(payload)
        except Exception as error:  # the task's module is not installed on this worker
            return pack((False, failure(error)))
        return pack(run(task, DaskMonitor(queue, Event(name)), args, kwargs))
    finally:
        _RUNNING.discard(name)
        queue.close()


def _still_running(name: str) -> bool:
    return name in _RUNNING


def prepare_frameworks(frameworks: tuple[str, ...], warm_up: bytes | None = None) -> None:
    """Import each framework in this worker and run the warm-up (`attnviz.exec.worker.ready`;
    `DaskEngine.warm` runs it on every worker)."""
    ready(frameworks, warm_up)


class DaskEngine:
    """Tasks on the Dask cluster whose scheduler is at `address` (see the module's docstring)."""

    def __init__(self, address: str, budget: Budget | None = None, stuck_s: float = STUCK_S):
        self.address, self.stuck_s = address, stuck_s
        self.budget = budget or Budget.from_env()
        self._lock = threading.Lock()
        self._client = None
        self._trainings = 0
        self._ready = threading.Event()  # cleared while a worker this engine killed restarts
        self._ready.set()

    def client(self):
        """The engine's `distributed.Client`, connected on first use."""
        from distributed import Client

        with self._lock:
            if self._client is None:
                self._client = Client(self.address, set_as_default=False, timeout=CONNECT_S)
            return self._client

    def submit(self, handle: Handle, payload: bytes) -> Handle:
        """Queue the task; a thread of this process sends it to the cluster (once the scheduler is
        reached and no worker this engine killed is restarting) and follows it.

        Raises:
            Busy: a training, when `budget.trainings` of this server's are running.
        """
        with self._lock:
            if handle.training:
                if self._trainings >= self.budget.trainings:
                    raise Busy(self._trainings, self.budget.trainings)
                self._trainings += 1
        threading.Thread(
            target=self._watch, args=(handle, payload), name=f"attnviz-dask-{handle.number}", daemon=True
        ).start()
        return handle

    def warm(self, frameworks: tuple[str, ...] = (), warm_up: bytes | None = None) -> None:
        """Connect, and import `frameworks` and run `warm_up` on every worker; returns at once."""
        threading.Thread(
            target=lambda: self.client().run(prepare_frameworks, tuple(frameworks), warm_up), daemon=True
        ).start()

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    # -- following one task ------------------------------------------------------------------

    def _watch(self, handle: Handle, payload: bytes) -> None:
        """Send the task, follow it to its end, clean up, finish its handle."""
        from distributed import Event, Queue

        value, error, made = None, None, []
        try:
            if not self._ready.wait(handle.limits.wait_s):  # a killed worker restarting
                raise NoWorker(handle.limits.wait_s)
            client = self.client()
            name = f"attnviz-{handle.name}-{uuid.uuid4().hex}"
            queue, event = Queue(name, client=client), Event(name, client=client)
            made = [queue.close, event.clear]
            # A quick task before the queued others, as on the local engine (Dask's own priority)
            future = client.submit(
                run_on_worker, payload, name, key=name, pure=False, priority=1 if handle.quick else 0
            )
            value, error = self._follow(handle, future, queue, event)
        except TaskError as refused:
            error = refused
        except Exception as lost:  # the scheduler cannot be reached, or went away under the task
            error = WorkerStopped(detail=f"Dask: {type(lost).__name__}: {lost}")
        finally:
            for cleanup in made:
                with contextlib.suppress(Exception):  # the scheduler is gone: nothing to clean there
                    cleanup()
        self._release(handle)
        handle._finish(value, error)

    def _follow(self, handle: Handle, future, queue, event) -> tuple[Any, TaskError | None]:
        """Relay the task's reports to its handle until it ends; enforce its limits."""
        reason, kill_at, worker = None, None, None
        while True:
            done = _wait(future, POLL_S)  # before the reports: every report of a finished task is queued
            for item in queue.get(batch=True):
                kind, *rest = pickle.loads(item)
                if kind == "progress":
                    handle._report(*rest)
                elif worker is None:
                    worker = rest[0]
                    handle._start(worker)
                else:  # a second start: the scheduler re-ran it after losing its worker
                    future.cancel()
                    return None, WorkerStopped(detail=f"Dask worker {worker} was lost")
            if done:
                return self._outcome(handle, future, reason)
            if worker is None and handle.stop_asked:
                future.cancel()
                return None, Stopped()
            if worker is None and handle._queued_s() > handle.limits.wait_s:
                future.cancel()
                return None, NoWorker(handle.limits.wait_s)
            if worker is not None and reason is None:
                reason = handle._end_reason()
                if reason is not None:
                    event.set()
                    kill_at = time.monotonic() + handle.grace_s
            elif reason is not None and time.monotonic() >= kill_at:
                self._kill(future, worker, future.key)
                return None, handle._lost(reason)

    def _outcome(self, handle: Handle, future, reason: str | None) -> tuple[Any, TaskError | None]:
        if future.status == "finished":
            return handle._end(future.result(), reason)
        try:
            error = future.exception()
        except Exception as cancelled:
            error = cancelled
        if type(error).__name__ == "KilledWorker":
            return None, WorkerStopped(detail=f"Dask: {error}")
        return None, error if isinstance(error, TaskFailed) else failure(error)

    def _kill(self, future, worker: str, name: str) -> None:
        """End a task that did not stop in time: the scheduler forgets it now (its handle ends); a
        Dask worker cannot end one of its threads, so if the task is still running there `stuck_s`
        later its worker is restarted by its nanny (tasks sent meanwhile wait: `_ready`)."""
        future.cancel()
        timer = threading.Timer(self.stuck_s, self._restart_if_stuck, args=(worker, name))
        timer.daemon = True
        timer.start()

    def _restart_if_stuck(self, worker: str, name: str) -> None:
        with self._lock:
            client = self._client
        if client is None:  # the engine was closed meanwhile
            return
        try:
            stuck = client.run(_still_running, name, workers=[worker]).get(worker, False)
        except Exception:  # the worker (or the scheduler) is gone: nothing to restart
            return
        if not stuck:
            return
        self._ready.clear()
        try:
            client.restart_workers([worker], timeout=RESTART_S, raise_for_error=False)
        finally:
            self._ready.set()

    def _release(self, handle: Handle) -> None:
        if handle.training:
            with self._lock:
                self._trainings -= 1


def _wait(future, timeout: float) -> bool:
    """Wait up to `timeout` for `future` to end, on the client (a timed-out `Queue.get` would log an
    error on the scheduler each time); whether it has."""
    with contextlib.suppress(Exception):  # TimeoutError: not yet; a cancelled future: ended
        future.exception(timeout=timeout)
    return future.done()
