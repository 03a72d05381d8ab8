"""The Python callables of ``Dataset.map`` / ``Dataset.filter``, run off the consuming thread.

Over 600 lines: the three executors share the ordering, error and shutdown protocol kept
here; the shared-memory message codec is part of that protocol.

One :class:`CallableStage` per Python map or filter: it pulls elements from the stage before it,
hands them to an executor, and yields the results in input order. Executors:

- ``inline``: the callable on the consuming thread (what ``num_parallel=1`` asks for);
- ``thread``: a pool of threads (parallel on free-threaded CPython, or for callables that
  release the GIL: NumPy, PIL, I/O);
- ``process``: worker processes forked by multiprocessing's forkserver (a clean process of its
  own, started like spawn), never forked from this process (the engine's threads would be
  copied half-held). Elements and results cross as pickle protocol 5 with their large buffers
  (NumPy arrays, ``PickleBuffer``) out of band in one shared-memory segment (a file in
  ``/dev/shm``) per message: the receiver maps it, unlinks it at once and builds its arrays on
  the mapping, so array bytes are copied once (into the segment) and never pickled.

In flight per stage: at most ``2 * workers`` elements (taken from upstream, not yet yielded),
which bounds memory; the elements in flight are the stage's checkpoint state (``state()``), so
a restore re-feeds them and none is lost or repeated.

Errors: the callable's exception is raised in the consumer, at its element's place in the
order, as the original type (when it pickles) with a note naming the element index, the worker
and the worker's traceback; a worker that dies (``os._exit``, a signal) raises
``MapWorkerError`` naming the element it held. Closing or dropping the iterator stops the
workers and unlinks every segment of the stage.
"""

from __future__ import annotations

import collections
import glob
import itertools
import math
import mmap
import os
import pickle
import queue
import signal
import sys
import threading
import time
import traceback
import uuid
import weakref
from multiprocessing import connection as _mpc

from recordflow.errors import InvalidArgumentError, MapWorkerError, UnimplementedError

AUTOTUNE = -1
WORKER_KINDS = ("auto", "process", "thread", "inline")

_SHM_DIR = "/dev/shm"
_OUT_OF_BAND_MIN = 16 << 10   # buffers from this size on go to shared memory, unpickled
_INLINE_MAX = 32 << 10        # a message whose pickle is bigger goes to shared memory whole
_PER_WORKER = 2               # elements in flight per worker: one running, one queued
_AUTO_PROBE = 8               # auto: elements timed on the consuming thread before deciding
_AUTO_MIN_SECONDS = 1e-3      # auto: mean callable time from which processes pay off
_TUNE_EVERY = 16              # AUTOTUNE: completions between two looks at the counters
_counter = itertools.count()


def usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def free_threaded() -> bool:
    """True on a free-threaded CPython running without the GIL (3.13t+)."""
    check = getattr(sys, "_is_gil_enabled", None)
    return check is not None and not check()


# ---------------------------------------------------------------- messages through /dev/shm
def _encode(obj, prefix: str):
    """``obj`` as a small picklable message: (pickle, None, None), or (None, segment name,
    layout) with the pickle and its large buffers in a shared-memory segment."""
    buffers = []

    def out_of_band(pb: pickle.PickleBuffer) -> bool:
        try:
            raw = pb.raw()
        except BufferError:  # not contiguous: pickled in band
            return True
        if raw.nbytes < _OUT_OF_BAND_MIN:
            return True
        buffers.append(raw)
        return False

    data = pickle.dumps(obj, protocol=5, buffer_callback=out_of_band)
    if not buffers and len(data) <= _INLINE_MAX:
        return (data, None, None)
    pieces = [memoryview(data)] + buffers
    layout, end = [], 0
    for piece in pieces:
        end = (end + 63) & ~63  # 64-byte aligned arrays
        layout.append((end, piece.nbytes))
        end += piece.nbytes
    name = f"{prefix}-{os.getpid()}-{next(_counter)}"
    path = os.path.join(_SHM_DIR, name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, end)
        with mmap.mmap(fd, end) as mm:
            for (offset, size), piece in zip(layout, pieces):
                mm[offset:offset + size] = piece
    except BaseException:
        os.close(fd)
        _unlink(name)
        raise
    os.close(fd)
    return (None, name, tuple(layout))


def _decode(message):
    data, name, layout = message
    if name is None:
        return pickle.loads(data)
    path = os.path.join(_SHM_DIR, name)
    fd = os.open(path, os.O_RDWR)
    try:
        mm = mmap.mmap(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)
        _unlink(name)  # the mapping keeps the bytes; nothing is left in /dev/shm
    view = memoryview(mm)
    (offset, size), rest = layout[0], layout[1:]
    # Arrays are built on the mapping (they keep it alive): no copy of their bytes.
    return pickle.loads(view[offset:offset + size],
                        buffers=[view[o:o + n] for o, n in rest])


def _discard(message) -> None:
    if message is not None and message[1] is not None:
        _unlink(message[1])


def _sweep(prefix: str) -> None:
    """Unlinks every segment of one stage (its consumer and workers name them all prefix-*)."""
    for path in glob.glob(os.path.join(_SHM_DIR, prefix + "-*")):
        _unlink(os.path.basename(path))


def _unlink(name: str) -> None:
    try:
        os.unlink(os.path.join(_SHM_DIR, name))
    except FileNotFoundError:
        pass


# ---------------------------------------------------------------- worker process
def _worker_main(conn, fn_bytes: bytes, prefix: str, seed: int) -> None:
    # Ctrl-C in a terminal reaches the whole process group: the consumer handles it and
    # stops the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Forked workers inherit one state of the global RNGs: without a seed of their own each
    # would draw the same "random" augmentations.
    import random
    random.seed(seed)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(seed % (1 << 32))
    pid = os.getpid()
    try:
        fn = pickle.loads(fn_bytes)
    except BaseException:
        conn.send(("fatal", -1, None, traceback.format_exc(), pid))
        return
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):  # the consumer died: nobody else will free its segments
            _sweep(prefix)
            return
        if task is None:
            return
        index, message = task
        start = time.perf_counter()
        try:
            result = _encode(fn(_decode(message)), prefix)
            reply = ("ok", index, result, time.perf_counter() - start, pid)
        except BaseException as e:  # noqa: BLE001 - every error goes to the consumer
            reply = ("err", index, _pickled_exception(e), traceback.format_exc(), pid)
        try:
            conn.send(reply)
        except (EOFError, OSError):
            _sweep(prefix)
            return


def _pickled_exception(e: BaseException) -> bytes | None:
    try:
        data = pickle.dumps(e)
        pickle.loads(data)
        return data
    except Exception:  # noqa: BLE001 - an exception that does not round-trip: text only
        return None


# ---------------------------------------------------------------- executors
class _InlineExecutor:
    """The callable on the consuming thread."""

    kind = "inline"

    def __init__(self, fn):
        self._fn = fn
        self._done = collections.deque()
        self.workers = 1

    def capacity(self) -> int:
        return 1 - len(self._done)

    def submit(self, index: int, element) -> None:
        start = time.perf_counter()
        try:
            out = ("ok", index, self._fn(element), time.perf_counter() - start, os.getpid())
        except Exception as e:  # noqa: BLE001 - delivered in order like a worker's
            out = ("err", index, e, traceback.format_exc(), os.getpid())
        self._done.append(out)

    def poll(self, timeout: float) -> list:
        done, self._done = list(self._done), collections.deque()
        return done

    def grow(self) -> bool:
        return False

    def close(self) -> None:
        self._done.clear()


class _ThreadExecutor:
    """A pool of threads; results through a queue (whose get blocks, never spins)."""

    kind = "thread"

    def __init__(self, fn, workers: int):
        self._fn = fn
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = []
        self._busy = 0
        self.workers = 0
        for _ in range(workers):
            self.grow()

    def _run(self) -> None:
        tasks, results, fn = self._tasks, self._results, self._fn
        while True:
            task = tasks.get()
            if task is None:
                return
            index, element = task
            start = time.perf_counter()
            try:
                out = ("ok", index, fn(element), time.perf_counter() - start,
                       threading.get_ident())
            except Exception as e:  # noqa: BLE001
                out = ("err", index, e, traceback.format_exc(), threading.get_ident())
            results.put(out)

    def capacity(self) -> int:
        return _PER_WORKER * self.workers - self._busy

    def submit(self, index: int, element) -> None:
        self._busy += 1
        self._tasks.put((index, element))

    def poll(self, timeout: float) -> list:
        out = []
        try:
            out.append(self._results.get(timeout=timeout))
            while True:
                out.append(self._results.get_nowait())
        except queue.Empty:
            pass
        self._busy -= len(out)
        return out

    def grow(self) -> bool:
        t = threading.Thread(target=self._run, name=f"rf-map-{len(self._threads)}", daemon=True)
        t.start()
        self._threads.append(t)
        self.workers += 1
        return True

    def close(self) -> None:
        for _ in self._threads:
            self._tasks.put(None)
        deadline = time.monotonic() + 5
        for t in self._threads:  # a callable still running finishes its element first
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        self._threads.clear()


def _context():
    """forkserver (a clean single-threaded server, started once like spawn, that forks each
    worker: no exec and no re-import per worker) with this module preloaded; spawn where
    forkserver does not exist."""
    import multiprocessing
    try:
        ctx = multiprocessing.get_context("forkserver")
    except ValueError:
        return multiprocessing.get_context("spawn")
    from multiprocessing import forkserver
    preload = list(getattr(forkserver._forkserver, "_preload_modules", ["__main__"]))
    if __name__ not in preload:  # keep what the application preloads
        ctx.set_forkserver_preload(preload + [__name__])
    return ctx


class _ProcessExecutor:
    """Spawn-started worker processes, one duplex pipe each; every message is small (its bulk
    is in /dev/shm), so neither side blocks on a full pipe."""

    kind = "process"

    def __init__(self, fn_bytes: bytes, workers: int):
        self._ctx = _context()
        self._fn_bytes = fn_bytes
        # Every segment of this stage starts with the prefix: close() sweeps what a killed
        # worker or an unread message left.
        self.prefix = f"rf-map-{uuid.uuid4().hex[:12]}"
        self._seed = int.from_bytes(os.urandom(8), "little")
        self._procs = []      # multiprocessing.Process
        self._conns = []      # consumer ends of the pipes
        self._held = []       # per worker: indices sent and not answered
        self.workers = 0
        self._closed = False
        for _ in range(workers):
            self.grow()

    def grow(self) -> bool:
        ours, theirs = self._ctx.Pipe(duplex=True)
        p = self._ctx.Process(target=_worker_main, args=(theirs, self._fn_bytes, self.prefix,
                                                         self._seed + len(self._procs)),
                              name=f"rf-map-worker-{len(self._procs)}", daemon=True)
        p.start()
        theirs.close()
        self._procs.append(p)
        self._conns.append(ours)
        self._held.append(set())
        self.workers += 1
        return True

    def pids(self) -> list:
        return [p.pid for p in self._procs]

    def capacity(self) -> int:
        return sum(_PER_WORKER - len(h) for h in self._held)

    def submit(self, index: int, element) -> None:
        w = min(range(len(self._held)), key=lambda i: len(self._held[i]))
        message = _encode(element, self.prefix)
        try:
            self._conns[w].send((index, message))
        except (OSError, EOFError):
            _discard(message)
            self._died(w)
        self._held[w].add(index)

    def poll(self, timeout: float) -> list:
        ready = _mpc.wait(self._conns + [p.sentinel for p in self._procs], timeout)
        out = []
        for w, conn in enumerate(self._conns):
            if conn not in ready:
                continue
            try:
                while conn.poll():
                    reply = conn.recv()
                    self._held[w].discard(reply[1])
                    if reply[0] == "ok":
                        reply = ("ok", reply[1], _decode(reply[2]), reply[3], reply[4])
                    elif reply[0] == "fatal":
                        raise MapWorkerError(
                            f"map worker (pid {reply[4]}) could not load the callable:\n"
                            f"{reply[3]}")
                    out.append(reply)
            except (EOFError, OSError):
                self._died(w)
        for w, p in enumerate(self._procs):
            if p.sentinel in ready and not self._conns[w].poll():
                self._died(w)
        return out

    def _died(self, w: int) -> None:
        p = self._procs[w]
        p.join(timeout=1)
        code = p.exitcode
        how = (f"killed by signal {signal.Signals(-code).name}" if code is not None and code < 0
               else f"exited with code {code}")
        held = sorted(self._held[w])
        what = (f"while processing element {held[0]} (of the map's input)" if held
                else "while idle")
        raise MapWorkerError(f"map worker process (pid {p.pid}) {how} {what}; the iterator is "
                             "closed")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for conn in self._conns:
            try:
                conn.send(None)
            except (OSError, EOFError):
                pass
        deadline = time.monotonic() + 2
        for p in self._procs:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        for p in self._procs:
            if p.is_alive():  # a callable still running: stop it
                p.kill()
                p.join(timeout=5)
        for conn in self._conns:  # replies never read: free their segments
            try:
                while conn.poll():
                    reply = conn.recv()
                    if reply[0] == "ok":
                        _discard(reply[2])
            except (EOFError, OSError):
                pass
            conn.close()
        _sweep(self.prefix)


# ---------------------------------------------------------------- the stage
def _check_picklable(fn, what: str) -> bytes:
    try:
        return pickle.dumps(fn)
    except Exception as e:  # noqa: BLE001 - any pickling failure means the same thing
        raise InvalidArgumentError(
            f"{what}(workers='process'): the callable {fn!r} cannot be pickled ({type(e).__name__}:"
            f" {e}); worker processes need a module-level function or a picklable callable "
            "object (not a lambda or a nested function), or use workers='thread'") from None


def _picklable(fn) -> bytes | None:
    try:
        return pickle.dumps(fn)
    except Exception:  # noqa: BLE001
        return None


def _workers_can_load(fn) -> bool:
    """Whether "auto" may move ``fn`` to worker processes without surprises. Each worker
    re-imports the main script (as ``__mp_main__``, as spawn does): only a script whose work is
    under ``if __name__ == "__main__":`` is safe to re-import; and a callable defined in an
    interactive ``__main__`` (REPL, notebook, ``python -c``) cannot be loaded by a worker."""
    import re
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    module = getattr(fn, "__module__", None) or type(fn).__module__
    if path is None:
        return module != "__main__"
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            source = f.read()
    except OSError:
        return False
    return re.search(r"""__name__\s*==\s*['"]__main__['"]""", source) is not None


def _can_spawn() -> bool:
    import multiprocessing
    return not multiprocessing.current_process().daemon  # daemons may not have children


class CallableStage:
    """The iterator of one Python map or filter (see the module docstring). ``kind``: "map"
    or "filter". ``state``: a ``state()`` of the same stage, from a checkpoint."""

    def __init__(self, kind: str, fn, num_parallel: int, workers: str, upstream,
                 state: dict | None = None, continue_after_errors: bool = False):
        self._kind, self._fn, self._upstream = kind, fn, upstream
        # tf.data's semantics (rf.Dataset.ignore_errors): an exception of the callable consumes
        # its element only, and an upstream exception is raised in order, after the elements
        # taken before it, and iteration may go on (unless it carries _rf_fatal). Off: the
        # first exception ends the stage.
        self._continue = continue_after_errors
        self._upstream_error: BaseException | None = None
        self._num_parallel, self._workers = num_parallel, workers
        self._pending: dict = {}   # index -> input element, taken and not yet yielded
        self._done: dict = {}      # index -> reply
        self._replay = collections.deque()
        self._head = self._next_in = 0
        if state is not None:
            self._head = self._next_in = int(state["next_index"])
            self._replay.extend(state["pending"])
        self._exhausted = False
        self._failed = False
        self._executor = None
        self._finalizer = None
        self._probe_seconds = 0.0
        self._probed = 0
        # AUTOTUNE counters: callable busy seconds, consumer wait and own time.
        self._busy = 0.0
        self._completions = 0
        self._wait = 0.0
        self._own = 0.0
        self._left_at = None
        self._tuned_at = 0
        self._setup()

    # -------------------------------------------------------- executor choice
    def _setup(self) -> None:
        n, workers = self._num_parallel, self._workers
        what = self._kind
        if workers == "process":
            fn_bytes = _check_picklable(self._fn, what)
            if not _can_spawn():
                raise InvalidArgumentError(
                    f"{what}(workers='process') inside a daemonic process (a DataLoader "
                    "worker?), which may not start processes: use workers='thread'")
            self._start(_ProcessExecutor(fn_bytes, self._initial(n)))
        elif workers == "thread":
            self._start(_ThreadExecutor(self._fn, self._initial(n)))
        elif workers == "inline" or n == 1:
            self._start(_InlineExecutor(self._fn))
        elif free_threaded():
            self._start(_ThreadExecutor(self._fn, self._initial(n)))
        else:
            # auto with the GIL: time the callable on the consuming thread first, then choose.
            self._start(_InlineExecutor(self._fn))
            self._probing = True
            return
        self._probing = False

    def _initial(self, n: int) -> int:
        return min(2, usable_cpus()) if n == AUTOTUNE else n

    def _start(self, executor) -> None:
        self._executor = executor
        self._finalizer = weakref.finalize(self, executor.close)

    def _decide(self) -> None:
        """auto (GIL build), after ``_AUTO_PROBE`` elements on the consuming thread."""
        self._probing = False
        for reply in self._executor.poll(0):  # computed ahead by the inline executor
            self._done[reply[1]] = reply
        mean = self._probe_seconds / max(1, self._probed)
        n = self._num_parallel
        fn_bytes = None
        if (mean >= _AUTO_MIN_SECONDS and usable_cpus() >= 2 and _can_spawn()
                and _workers_can_load(self._fn)):
            fn_bytes = _picklable(self._fn)
        if fn_bytes is not None:
            new = _ProcessExecutor(fn_bytes, self._initial(n))
        elif n > 1:
            new = _ThreadExecutor(self._fn, n)  # as asked: a thread pool of n
        else:
            return
        self._finalizer()
        self._start(new)

    # -------------------------------------------------------- iteration
    def __iter__(self):
        return self

    def __next__(self):
        now = time.perf_counter()
        if self._left_at is not None:
            self._own += now - self._left_at
        try:
            return self._next()
        finally:
            self._left_at = time.perf_counter()

    def _next(self):
        if self._failed:
            raise StopIteration
        try:
            while True:
                self._fill()
                reply = self._done.pop(self._head, None)
                if reply is not None:
                    element = self._pending.pop(self._head)
                    self._head += 1
                    if self._continue and reply[0] == "err":
                        error = self._error(*reply[1:])
                        break
                    keep, value = self._result(reply, element)
                    if keep:
                        return value
                    continue
                if self._upstream_error is not None and self._head == self._next_in:
                    error, self._upstream_error = self._upstream_error, None
                    break
                if self._exhausted and self._head == self._next_in:
                    self.close()
                    raise StopIteration
                start = time.perf_counter()
                for reply in self._executor.poll(0.5):
                    self._done[reply[1]] = reply
                self._wait += time.perf_counter() - start
        except StopIteration:
            raise
        except BaseException:
            self._failed = True
            self.close()
            raise
        raise error

    def _fill(self) -> None:
        ex = self._executor
        # Inline: no look-ahead (the consumer would compute the next element before returning).
        cap = 1 if ex.kind == "inline" else _PER_WORKER * ex.workers
        while (not self._exhausted and self._upstream_error is None and ex.capacity() > 0
               and self._next_in - self._head < cap):
            if self._replay:
                element = self._replay.popleft()
            else:
                try:
                    element = next(self._upstream)
                except StopIteration:
                    self._exhausted = True
                    return
                except Exception as e:
                    if not self._continue:
                        raise
                    self._upstream_error = e
                    self._exhausted = bool(getattr(e, "_rf_fatal", False))
                    return
            index = self._next_in
            self._next_in += 1
            self._pending[index] = element
            ex.submit(index, element)

    def _result(self, reply, element):
        status, index, value, extra, worker = reply
        if status == "err":
            raise self._error(index, value, extra, worker)
        self._busy += extra
        self._completions += 1
        if self._probing:
            self._probe_seconds += extra
            self._probed += 1
            if self._probed >= _AUTO_PROBE:
                self._decide()
        elif self._num_parallel == AUTOTUNE and self._completions - self._tuned_at >= _TUNE_EVERY:
            self._tune()
        if self._kind == "filter":
            return bool(value), element
        return True, value

    def _tune(self) -> None:
        """AUTOTUNE: one more worker while the consumer waits and the callable's busy time
        per element needs more workers than run now to keep up with the consumer's pace."""
        self._tuned_at = self._completions
        ex = self._executor
        if ex.kind == "inline":
            return
        busy = self._busy / max(1, self._completions)
        own = self._own / max(1, self._completions)
        waiting = self._wait > 0.05 * (self._wait + self._own)
        needed = math.ceil(busy / max(own, 1e-4))
        if waiting and ex.workers < min(usable_cpus(), max(needed, ex.workers + 1)):
            ex.grow()
        self._busy = self._own = self._wait = 0.0
        self._completions = self._tuned_at = 0

    def _error(self, index: int, value, tb: str, worker) -> BaseException:
        # In-process executors hand over the exception itself, worker processes its pickle
        # (None when it does not pickle); an auto stage may hold replies of both.
        remote = not isinstance(value, BaseException)
        where = (f"element {index} of the {self._kind}'s input, in worker "
                 f"{'pid' if remote else 'thread'} {worker}")
        e = value
        if remote:
            try:
                e = pickle.loads(value) if value is not None else None
            except Exception:  # noqa: BLE001 - e.g. its class is not importable here
                e = None
        if e is None:
            return MapWorkerError(f"{self._kind}: the callable raised at {where} (its exception "
                                  f"does not pickle):\n{tb}")
        try:
            e.rf_element_index = index
        except Exception:  # noqa: BLE001 - an exception type with __slots__
            pass
        e.add_note(f"recordflow {self._kind}: raised at {where}")
        if remote:
            e.add_note("worker traceback:\n" + tb.rstrip())
        return e

    # -------------------------------------------------------- checkpoint, stats, close
    def state(self) -> dict:
        """The stage's part of a checkpoint: the index of its next output's input, and the
        inputs taken from upstream and not yet yielded (re-fed, in order, on restore)."""
        if self._upstream_error is not None:
            raise UnimplementedError(f"checkpoint(): an error of the stages before a "
                                     f"{self._kind} is waiting to be raised; take the "
                                     "checkpoint after it")
        pending = [self._pending[i] for i in range(self._head, self._next_in)]
        return {"next_index": self._head, "pending": pending + list(self._replay)}

    def stats(self) -> dict:
        ex = self._executor
        out = {"stage": self._kind, "executor": ex.kind, "workers": ex.workers,
               "in_flight": self._next_in - self._head}
        if ex.kind == "process":
            out["pids"] = ex.pids()
        return out

    @property
    def upstream(self):
        return self._upstream

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
