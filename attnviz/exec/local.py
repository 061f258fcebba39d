"""The default engine: local worker processes, one task at a time each.

`Budget.workers` slots; each slot is a thread of the server that owns one worker process
(`attnviz.exec.worker`, started with `spawn` when the slot first gets a task, or by `warm`) and
runs the queue's tasks in it one after another. The slot's thread enforces the task's limits:
a stop or the time limit sets the worker's stop flag, and `grace_s` later kills the worker if
the task has not ended; a dead worker is replaced on the slot's next task.

A worker gives its memory back by ending: one that ran a task and then waited `Budget.idle_s` for
the next, or that a task left above `Budget.keep_mb` resident, is ended by its slot (a warmed slot
starts a fresh one at once). Its checkpoints are loaded again by the next task that needs them.
Measured before choosing this (docs/security.md): dropping a worker's checkpoints and trimming its
heap in place gave back 2.1 of its 4.2 GiB — TensorFlow keeps what it allocated — and a fresh warm
worker holds 0.8 GiB.

Why processes of our own rather than `concurrent.futures.ProcessPoolExecutor` or loky (read
in their 3.11 / 3.7 sources): neither can end one running task. Killing the worker under a
task breaks the whole executor — the standard library's marks every pending future failed and
terminates every worker, loky's kills all workers ("broken executor") — so stopping one
visitor's run would end every other visitor's too, and the standard library does not say how
its worker died. One `multiprocessing` process per slot, with a pipe, gives a per-task kill,
a replacement for that slot only, and the exit status (`Process.exitcode`: −9 for SIGKILL).

`spawn` starts each worker as a fresh interpreter (no copy of the server's threads or memory) and,
as with every spawn-based pool, imports the server's main module there: under `streamlit run` that
is Streamlit's launcher (guarded; about 2 s and 30 MiB once per worker); a script that submits
tasks needs `if __name__ == "__main__":`.
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import threading
import time
from dataclasses import dataclass

from attnviz.cache import env_number
from attnviz.exec import worker
from attnviz.exec.failures import Busy, NoWorker, Stopped, TaskError, WorkerStopped
from attnviz.exec.handle import Handle
from attnviz.exec.limits import Budget
from attnviz.exec.outcome import failure

POLL_S = 0.05  # how often a busy slot looks at its task's stop request and time limit
JOIN_S = 5.0  # how long to wait for a killed worker to be reaped


BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# TensorFlow's oneDNN kernels allocate from malloc, not from its own CPU arena (issue 46 §23). That
# arena (a BFC allocator) keeps every region it took for the process's life, and each new region is
# twice the last: in a worker that had loaded MiniLM and Gemma 3, loading Whisper took one region of
# 1,024 MiB at once. Taken inside a task, such a region is over the task's `RLIMIT_DATA` budget
# whatever the task needs, and the failure comes from inside oneDNN ("could not create a primitive",
# or the worker's SIGSEGV) instead of as "over the memory budget". With malloc a task's data segment
# grows by what it allocates, and what it frees goes back with the heap (`release_memory`): Whisper's
# first transcription left its worker +76 MiB resident instead of +294 (docs/security.md).
TF_ALLOCATOR = {"TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "1"}


@contextlib.contextmanager
def _worker_environment():
    """A worker's environment, read by the spawned process when it loads NumPy and TensorFlow, before
    any task: NumPy's BLAS at `ATTNVIZ_THREADS` threads, as the frameworks' are (`prepare`) — on its
    own OpenBLAS starts a thread per core, and on a shared machine they fight every other process for
    it (50 products of 576 × 576 matrices: 5.7 s on two threads against 1.0 s on one, at load 19) —
    and TensorFlow's oneDNN kernels on malloc (`TF_ALLOCATOR`). Set around its start only, and never
    over a value the operator set."""
    threads = str(int(env_number("ATTNVIZ_THREADS", 1, minimum=1)))
    wanted = {**dict.fromkeys(BLAS_THREADS, threads), **TF_ALLOCATOR}
    added = {name: value for name, value in wanted.items() if name not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


@dataclass
class Job:
    handle: Handle
    payload: bytes  # pickled (task, args, kwargs)


class _Worker:
    """One worker process and the server's end of its pipe."""

    def __init__(self, ctx, budget: Budget, preload: tuple[str, ...], warm_up: bytes | None):
        self.conn, child = ctx.Pipe()
        self.stop_flag = ctx.RawValue("q", 0)  # the number of the task asked to stop
        self.process = ctx.Process(
            target=worker.main,
            args=(child, self.stop_flag, budget.nice, preload, warm_up),
            name="attnviz-worker",
            daemon=True,  # ended with the server
        )
        with _worker_environment():
            self.process.start()
        child.close()
        self.pid = self.process.pid

    def alive(self) -> bool:
        return self.process.is_alive()

    def resident_mib(self) -> float | None:
        """Its resident memory (`VmRSS`), None where /proc cannot say."""
        try:
            with open(f"/proc/{self.pid}/status") as status:
                found = [line for line in status if line.startswith("VmRSS:")]
        except OSError:
            return None
        return int(found[0].split()[1]) / 1024 if found else None

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(JOIN_S)
        self.conn.close()


class LocalEngine:
    """Runs tasks in `budget.workers` local worker processes (see the module's docstring)."""

    def __init__(self, budget: Budget | None = None):
        self.budget = budget or Budget.from_env()
        self._mp = multiprocessing.get_context("spawn")
        self._cond = threading.Condition()
        self._queue: collections.deque[Job] = collections.deque()
        self._slots: list[_Slot] = []
        self._trainings = 0
        self._preload: tuple[str, ...] = ()
        self._warm_up: bytes | None = None
        self._closed = False

    # -- the engine's interface ------------------------------------------------------------

    def submit(self, handle: Handle, payload: bytes) -> Handle:
        """Queue the task; the first free slot runs it.

        Raises:
            Busy: a training, when `budget.trainings` are running or queued.
        """
        with self._cond:
            if self._closed:
                raise RuntimeError("attnviz.exec: this engine is closed")
            if handle.training:
                if self._trainings >= self.budget.trainings:
                    raise Busy(self._trainings, self.budget.trainings)
                self._trainings += 1
            self._queue.append(Job(handle, payload))
            self._start_slots()
            self._cond.notify_all()
        handle._set_stopper(lambda: self._drop(handle))
        return handle

    def warm(self, frameworks: tuple[str, ...] = (), warm_up: bytes | None = None) -> None:
        """Start every worker now, each importing `frameworks` and then running `warm_up`
        (`worker.ready`; a replaced worker too); returns at once."""
        with self._cond:
            self._preload, self._warm_up = tuple(frameworks), warm_up
            self._start_slots()
            for slot in self._slots:
                slot.warm = True
            self._cond.notify_all()

    def workers(self) -> list[int]:
        """The process ids of the running workers."""
        return [s.worker.pid for s in self._slots if s.worker is not None and s.worker.alive()]

    def close(self) -> None:
        """Stop taking tasks, end the queued ones (`Stopped`), stop the running ones and end every
        worker (waiting at most a task's grace period and `JOIN_S` per slot)."""
        with self._cond:
            self._closed = True
            queued, self._queue = list(self._queue), collections.deque()
            self._cond.notify_all()
        for job in queued:
            self._finish(job.handle, error=Stopped())
        running = [handle for slot in self._slots if (handle := slot.current) is not None]
        for handle in running:
            handle.stop()
        grace = max((handle.grace_s for handle in running), default=0.0)
        for slot in self._slots:
            slot.thread.join(JOIN_S + grace)

    # -- for the slots -----------------------------------------------------------------------

    def _start_slots(self) -> None:
        while len(self._slots) < self.budget.workers:
            self._slots.append(_Slot(self, len(self._slots)))

    def _take(self, slot: _Slot, timeout: float) -> Job | None:
        """The next queued task for `slot`, waiting up to `timeout`; None if there is none (or closing)."""
        with self._cond:
            self._expire()
            job = self._pick(slot)
            if job is None and not self._closed:
                self._cond.wait(timeout)
                self._expire()
                job = self._pick(slot)
            return job

    def _pick(self, slot: _Slot) -> Job | None:
        """The first queued task `slot` should run (caller holds the lock): the first quick one
        (`Handle.quick`), else the first in the queue, where a task on a checkpoint
        (`Handle.affinity`) is left to a free slot whose worker has that checkpoint loaded, if
        there is one; it takes `slot` otherwise (no task waits for a busy worker)."""
        if self._closed:
            return None
        quick = next((job for job in self._queue if job.handle.quick), None)
        if quick is not None:  # before the tasks queued earlier: a page's first view waits for it
            self._queue.remove(quick)
            return quick
        for job in self._queue:
            key = job.handle.affinity
            if (
                key is None
                or key in slot.loaded
                or not any(
                    other is not slot and other.current is None and key in other.loaded
                    for other in self._slots
                )
            ):
                self._queue.remove(job)
                return job
        return None

    def _expire(self) -> None:
        """Fail the queued tasks that waited longer than their `wait_s` (caller holds the lock)."""
        late = [job for job in self._queue if job.handle._queued_s() > job.handle.limits.wait_s]
        for job in late:
            self._queue.remove(job)
            self._finish(job.handle, error=NoWorker(job.handle.limits.wait_s))

    def _expire_queued(self) -> None:
        with self._cond:
            self._expire()

    def _drop(self, handle: Handle) -> None:
        """A stop asked while the task waits in the queue: it never runs."""
        with self._cond:
            job = next((j for j in self._queue if j.handle is handle), None)
            if job is None:
                return  # running: its slot sees the stop
            self._queue.remove(job)
        self._finish(handle, error=Stopped())

    def _finish(self, handle: Handle, value=None, error: TaskError | None = None) -> None:
        with self._cond:
            if handle.training and not handle.done():
                self._trainings -= 1
        handle._finish(value, error)


class _Slot:
    """A thread of the server that runs queued tasks, one at a time, in its own worker process."""

    def __init__(self, engine: LocalEngine, index: int):
        self.engine, self.worker, self.warm = engine, None, False
        self.current: Handle | None = None  # the task it runs
        self.loaded: set[str] = set()  # the checkpoints its worker has run tasks on (`Handle.affinity`)
        self.used_at: float | None = None  # when its worker last ended a task (None: fresh, nothing held)
        self.thread = threading.Thread(target=self._serve, name=f"attnviz-slot-{index}", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        engine = self.engine
        while not engine._closed:
            if self.warm and self.worker is None:
                self.worker = self._spawn()
            job = engine._take(self, timeout=min(1.0, engine.budget.idle_s / 4))
            if job is None:
                if self._idle_s() > engine.budget.idle_s:
                    self._end_worker()  # its memory goes back; a warm slot starts a fresh one above
                continue
            self.current = job.handle
            try:
                self._run(job)
            except Exception as error:  # the slot itself failed (no process could start): say so, go on
                self.current = None
                self._end_worker()
                engine._finish(job.handle, error=failure(error))
            finally:
                self.current = None
            self._keep_or_end()
        self._end_worker()

    def _idle_s(self) -> float:
        """Seconds its worker has waited since its last task (0 for a fresh one, which holds nothing)."""
        return 0.0 if self.used_at is None or self.worker is None else time.monotonic() - self.used_at

    def _keep_or_end(self) -> None:
        """After a task: a worker left above `keep_mb` resident is ended at once."""
        if self.worker is None:
            return
        self.used_at = time.monotonic()
        resident = self.worker.resident_mib()
        if resident is not None and resident > self.engine.budget.keep_mb:
            self._end_worker()

    def _end_worker(self) -> None:
        if self.worker is not None:
            self.worker.kill()
        self.worker, self.loaded, self.used_at = None, set(), None

    def _spawn(self) -> _Worker:
        engine = self.engine
        return _Worker(engine._mp, engine.budget, engine._preload, engine._warm_up)

    def _run(self, job: Job) -> None:
        handle = job.handle
        idle = self.worker is not None and self.worker.alive()
        if not idle:
            self._replace_worker()
        value, error, started = self._hand_over(job)
        if isinstance(error, WorkerStopped) and idle and not started:
            # The idle worker was dying (killed from outside) when the task came: `alive()` cannot
            # tell, as a SIGKILLed process stays unreaped while its other threads exit, and holds
            # its end of the pipe open until the last one has, so the send succeeds. The task
            # never started there: a fresh worker runs it.
            self._replace_worker()
            value, error, started = self._hand_over(job)
        if error is not None and not self.worker.alive():
            self._end_worker()  # reaped; the slot's next task starts a new worker
        elif started and handle.affinity is not None:
            self.loaded.add(handle.affinity)
        self.current = None  # free (and what it loaded known) before the visitor hears the task ended
        self.engine._finish(handle, value, error)

    def _replace_worker(self) -> None:
        self._end_worker()
        self.worker = self._spawn()

    def _hand_over(self, job: Job):
        """Send the task to the slot's worker and watch it (`_watch`)."""
        handle = job.handle
        # A closed pipe means the worker is gone: `_watch` sees its sentinel and says how it ended.
        with contextlib.suppress(OSError):
            self.worker.conn.send(("run", handle.number, job.payload, handle.limits.memory_mb))
        return self._watch(handle, self.worker)

    def _watch(self, handle: Handle, w: _Worker):
        """Relay the task's messages to its handle until it ends; enforce its stop and time limit.

        Returns:
            `(value, None, started)` or `(None, TaskError, started)`; `started`: whether the
            worker said it began the task (before that, the task's code has not run).
        """
        reason, kill_at, started = None, None, False
        while True:
            ready = multiprocessing.connection.wait([w.conn, w.process.sentinel], POLL_S)
            message = _receive(w.conn) if w.conn in ready else None
            if message is not None and message[0] == "start":
                started = True
                handle._start(w.pid)
            elif message is not None and message[0] == "progress":
                handle._report(*message[2:])
            elif message is not None and message[0] == "done":
                return *handle._end(message[2], reason), started
            elif w.process.sentinel in ready or not w.alive():  # read every message before this
                w.process.join(JOIN_S)
                return None, handle._lost(reason, w.process.exitcode), started
            if reason is None:  # looked at after every message too: a chatty task is still stopped
                reason = handle._end_reason()
                if reason is not None:
                    w.stop_flag.value = handle.number
                    kill_at = time.monotonic() + handle.grace_s
            elif time.monotonic() >= kill_at and w.alive():
                w.process.kill()
            self.engine._expire_queued()


def _receive(conn):
    """The next message, or None when the pipe broke (the worker is dying: its sentinel says how)."""
    try:
        return conn.recv()
    except (EOFError, OSError):
        return None
