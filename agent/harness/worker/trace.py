"""What a forward does, recorded where it happens (inside the candidate's worker). Over 400 lines because Tracker is
one object: its launch hook and its dispatch mode read and write the same storages' record, in the forward's order.

Tracker hooks the one place every Triton launch passes, at class level, so kernels defined in functions, in
`__init__`, autotuned or compiled by hand are all seen: the interpreter's GridExecutor in CPU mode, the active
driver's launcher class on the GPU. For every call it counts launches and the storages they were given; for a
traced call it also copies each storage a launch was given before and after the launch, to know which ones the
launch wrote, and records every PyTorch operator the forward ran (a TorchDispatchMode), with what it read: in total
per operator, and call by call which storages already met (inputs, launches' tensors) it read, in the forward's
order (so the parent knows what a buffer a kernel wrote was used for). Tracing keeps nothing of the forward's alive:
what the allocator hands out must be what it hands out in a call nobody records (a freed buffer that comes back, or
does not, would tell the forward it is being checked). An allocation at a freed storage's address is a new storage
(every allocation passes the dispatch mode), with an id of its own.
What PyTorch computes on counts as the data where it derives from the inputs, or where a launch could have written it:
a kernel reaches memory by address (an offset from a pointer it was given), so after the first launch every storage
but those made since the last launch may hold the data.

A traced launch also names its arguments Triton could take for a pointer that are not tensors (foreign_arguments):
Triton asks those for their memory inside the launch, where no operator is recorded. Under the interpreter, what
the GPU runs before its launcher (a callable grid, pre-run hooks) runs before the hooked launch too.

The worker reports these facts; the parent judges them (agent.harness.judge.rules).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Literal

from agent.datafiles import load_toml
from agent.harness.job import Launch, Op, Read, Span, Storage, Trace, Traffic
from agent.harness.worker.launchargs import classes_now, foreign_arguments, known_types
from agent.harness.worker.storetargets import stored_parameters, stored_tensors


class OperatorKinds:
    """agent/data/operators.toml: the free operators (those of them that only look at metadata), and the heavy
    layers by family; every other operator computes."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.free = frozenset(data["free"])
        self.metadata = frozenset(data["metadata"])
        self.families: dict[str, str] = {name: family for family, names in data["heavy"].items() for name in names}
        self.heavy = frozenset(self.families)

    def kind(self, name: str) -> str:
        """free, heavy or compute: how the run-time rules count an operator."""
        return "free" if name in self.free else "heavy" if name in self.heavy else "compute"

    def family(self, name: str) -> str:
        """The heavy family of an operator (its own name where it is in none)."""
        return self.families.get(name, name)


@lru_cache(maxsize=1)
def operator_kinds() -> OperatorKinds:
    return OperatorKinds(load_toml("operators.toml"))


def _tensors(obj: Any, torch: Any) -> list[Any]:
    """The tensors in (nested) arguments, in argument order."""
    out, stack = [], [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            out.append(x)
        elif isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        elif isinstance(x, dict):
            stack.extend(reversed(list(x.values())))
        elif hasattr(x, "base") and isinstance(getattr(x, "base", None), torch.Tensor):  # a TensorDescriptor
            out.append(x.base)
    return out


def _before_launch(executor: Any, args: tuple, kwargs: dict) -> None:
    """What the GPU runs before the launch, run there under the interpreter too: JITFunction.run calls the pre-run
    hooks and a callable grid (with the bound arguments) before the launcher, where the forward's operators are
    recorded; the interpreter calls them inside its launch, where none is (a grid that computed would compute
    unseen)."""
    import inspect

    hooks, executor.pre_run_hooks = executor.pre_run_hooks, []  # the executor's own reference: the kernel's list stays
    for hook in hooks:
        hook(*args, **kwargs)
    if callable(executor.grid):
        spec = inspect.getfullargspec(executor.fn)
        named = {k: v for k, v in kwargs.items() if k in spec.args or k in spec.kwonlyargs}
        executor.grid = tuple(executor.grid(inspect.getcallargs(executor.fn, *args, **named)))


def watches_the_gpu(func: Any, args: Any, kwargs: dict) -> str | None:
    """Why an operator lets the host see the GPU's progress (None: it does not): pinned host memory, which a copy
    fills while the host runs on, or a copy from the device to the host that does not wait (it pins its target). A
    forward that reads such memory at once sees whether the GPU has finished its launches, as it has in a recorded
    call (the tracer synchronizes around each launch) and not in the others."""
    name = func._overloadpacket.__name__
    if name == "_pin_memory" or kwargs.get("pin_memory"):
        return f"aten.{name}: pinned host memory"
    blocking = kwargs.get("non_blocking", args[2] if name == "copy_" and len(args) > 2 else False)
    if name in ("_to_copy", "copy_", "to") and blocking:
        tensors = [a for a in args if hasattr(a, "device")]
        target = kwargs.get("device", tensors[0].device if name == "copy_" and tensors else None)
        sources = tensors[1:] if name == "copy_" else tensors
        if target is not None and str(target).startswith("cpu") and any(t.device.type != "cpu" for t in sources):
            return f"aten.{name}(non_blocking=True) to the host"
    return None


STACK_MARGIN = 100  # frames: more than the recorder ever needs; honest forwards run a few dozen deep of 1,000 or more


# An operator run within STACK_MARGIN frames of Python's recursion limit: there it fails in a recorded call (the
# recorder's Python frames take the last room) and not in the others, so a forward that recursed to the edge first
# could tell them apart. The worker raises the limit far above what any honest forward uses
# (agent.harness.worker.candidate.STACK_ROOM): a probe costs a recursion that deep on every call, and one the recorder sees
# is reported.
_EDGE = f"an operator run within {STACK_MARGIN} frames of the recursion limit (where the recorder's own frames fail)"


class Tracker:
    """Counts and (when tracing) records Triton launches and PyTorch operators, per forward call."""

    def __init__(self, trusted: Any) -> None:
        import torch

        self.torch, self.trusted = torch, trusted
        self.depth = 0  # > 0 inside a launch or the harness's own bookkeeping: operators there are not the forward's
        self.tracing = False
        self.count_only = False
        self.ablating = False  # destroy (NaN) what each launch wrote, as it returns (agent.harness.worker.ablation)
        self._inputs: list[Any] = []
        self.memory: Any = None  # CPU mode: the interpreter's loads and stores (agent.harness.worker.memrecord)
        self._ablation: Any = None
        self.launches = 0
        self.launch_storages: set[int] = set()
        self._ids: dict[int, int] = {}
        self._storages: dict[int, Storage] = {}
        self._launch_log: list[Launch] = []
        self._ops: dict[str, Op] = {}
        self._reads: list[Read] = []
        kinds = operator_kinds()
        self.free, self.heavy, self.metadata = kinds.free, kinds.heavy, kinds.metadata
        self.installed = ""
        self.candidate = ""  # the candidate's file (agent.harness.worker.candidate sets it): its code inside a launch
        # the model's parameters and buffers (agent.harness.worker.candidate sets them before its calls): kept at the start
        # of a traced call, a weight whose bytes are still those is not the data, whatever launch ran since
        self.weights: list[Any] = []
        self._kept: dict[int, tuple[Any, Any]] = {}
        self._intact: set[int] = set()
        # the numeric flags as the harness set them (agent.harness.worker.candidate): read as each recorded operator runs
        self.flags: dict[str, Any] = {}
        self._flags_set: list[str] = []
        self.known, self.before = known_types(torch), classes_now()
        # A tensor's (or storage's) own namespace shadows its class's methods: `t.numel()` would call whatever the
        # candidate stored on t under that name, here in the tracker's bookkeeping, where no operator is recorded
        # (inside the recorder's dispatch its mode is off). The tracker reads tensors through their classes only.
        tensor: Any = torch._C.TensorBase
        storage: Any = torch._C.StorageBase
        self._storage_of, self._numel, self._element_size = tensor.untyped_storage, tensor.numel, tensor.element_size
        self._storage_offset, self._stride = tensor.storage_offset, tensor.stride
        self._address, self._nbytes = storage.data_ptr, storage.nbytes

    # ---------------------------------------------------------------- hooks

    def install(self) -> None:
        """Hook the launch path of this process's Triton (fails loudly: without it nothing can be checked)."""
        tracker = self
        if os.environ.get("TRITON_INTERPRET") == "1":
            from triton.runtime.interpreter import GridExecutor

            original = GridExecutor.__call__

            def call(self: Any, *args: Any, **kwargs: Any) -> Any:
                _before_launch(self, args, kwargs)
                return tracker._launch(getattr(self.fn, "__name__", "?"), (args, kwargs), lambda: original(self, *args, **kwargs))

            GridExecutor.__call__ = call
            self.installed = "triton.runtime.interpreter.GridExecutor"
            from agent.harness.worker.memrecord import MemoryRecord

            self.memory = MemoryRecord()
            self.memory.install()
            return
        from triton.runtime import driver

        launcher = driver.active.launcher_cls
        init, original = launcher.__init__, launcher.__call__

        def new_init(self: Any, src: Any, metadata: Any, *args: Any, **kwargs: Any) -> None:
            init(self, src, metadata, *args, **kwargs)
            self._agent_kernel = getattr(metadata, "name", None) or getattr(getattr(src, "fn", None), "__name__", "?")
            self._agent_pdl = bool(getattr(metadata, "launch_pdl", False))
            fn = getattr(src, "fn", None)
            self._agent_stores = (list(vars(fn).get("arg_names") or []), stored_parameters(fn)) \
                if fn is not None and hasattr(fn, "__dict__") else None

        def new_call(self: Any, *args: Any, **kwargs: Any) -> Any:
            return tracker._launch(getattr(self, "_agent_kernel", "?"), (args, kwargs), lambda: original(self, *args, **kwargs),
                                   pdl=getattr(self, "_agent_pdl", False), stores=getattr(self, "_agent_stores", None))

        launcher.__init__, launcher.__call__ = new_init, new_call
        self.installed = f"{launcher.__module__}.{launcher.__qualname__}"

    def hooked(self) -> dict[str, Any]:
        """The hooked classes, for the integrity snapshot."""
        import importlib

        module, _, name = self.installed.rpartition(".")
        hooked = {self.installed: getattr(importlib.import_module(module), name)} if self.installed else {}
        if self.memory is not None:
            from triton.runtime.interpreter import InterpreterBuilder

            hooked["triton.runtime.interpreter.InterpreterBuilder"] = InterpreterBuilder
        return hooked

    # ---------------------------------------------------------------- one forward

    def begin(self, trace: bool, inputs: list[Any], count_only: bool = False, ablate: bool = False) -> None:
        """Start recording one call; `count_only` (timed calls): launches are counted, nothing else is looked at;
        `ablate` (a traced call): what each launch wrote is destroyed as it returns (restore() after the call)."""
        from agent.harness.worker.ablation import Ablation

        self.tracing, self.launches, self.count_only = trace, 0, count_only
        self.ablating = ablate and trace
        self._ablation = Ablation(self.torch, self.trusted.inference_mode) if self.ablating else None
        self._inputs = _tensors(inputs, self.torch) if trace else []
        if self.memory is not None:
            self.memory.begin_call()
        self.launch_storages = set()
        self._ids, self._storages, self._launch_log, self._ops, self._reads = {}, {}, [], {}, []
        self._input_ids = [self._id(t) for t in _tensors(inputs, self.torch)] if trace else []
        # storages derived from the forward's inputs (the data), followed through operators and launches
        self._tainted = {self._key(t) for t in _tensors(inputs, self.torch)} if trace else set()
        # the memory of each storage derived from the data (key -> end), and the storages operators made this call:
        # a storage no operator made (an alias through DLPack) holds the data where it overlaps such memory
        self._tainted_end: dict[int, int] = {}
        self._made: set[int] = set()
        # storages seen this call, and those operators made since the last launch: a kernel reaches memory by address
        # (an offset from a buffer it was given), so once one has run, any storage older than it may hold the data
        self._seen: set[int] = set()
        self._born: set[int] = set()
        self._watching: list[str] = []
        self._flags_set = []
        self._intact, self._kept = set(), {}
        if trace and self.weights:  # never in a timed call: apart() synchronizes
            with self.trusted.apart():
                self._kept = {self._key(w): (w, self._snapshot(w)) for w in self.weights}

    def end(self, outputs: list[Any]) -> tuple[bool, Trace | None]:
        """(every output's storage was given to a launch, the trace if tracing)."""
        self.depth += 1
        try:
            keys = [self._key(t) for t in outputs]
            launched = bool(keys) and all(k in self.launch_storages for k in keys)
            if not self.tracing:
                return launched, None
            trace = Trace(launches=self._launch_log, ops=list(self._ops.values()), reads=self._reads,
                          inputs=self._input_ids, outputs=[self._id(t) for t in outputs],
                          storages=list(self._storages.values()), watching=self._watching, flags=self._flags_set,
                          output_spans=[self._extent(t) for t in outputs], measured=self.memory is not None,
                          traffic=self.traffic(outputs))
            self.tracing = False
            return launched, trace
        finally:
            self.depth -= 1

    def _key(self, t: Any) -> int:
        return int(self._address(self._storage_of(t)))

    def _bytes(self, t: Any) -> int:
        return int(self._numel(t)) * int(self._element_size(t))

    def _id(self, t: Any) -> int:
        key = self._key(t)
        if key not in self._ids:
            self._ids[key] = len(self._storages)  # ids are never reused: a retired address keeps its storage's record
            self._storages[self._ids[key]] = Storage(id=self._ids[key], bytes=int(self._nbytes(self._storage_of(t))),
                                                     shape=list(t.shape))
        return self._ids[key]

    def _retire(self, key: int) -> None:
        """The storage at `key` was freed and the address handed to a new one: forget the old one's id and taint."""
        self._ids.pop(key, None)
        self._tainted.discard(key)
        self._tainted_end.pop(key, None)
        if self.memory is not None:
            self.memory.forget(key)
        self.launch_storages.discard(key)

    def _launch(self, name: str, args: Any, run: Callable[[], Any], pdl: bool = False,
                stores: tuple[list[str], frozenset[str] | None] | None = None) -> Any:
        if self.depth:
            return run()
        if self.count_only:
            self.launches += 1
            return run()
        self.depth += 1
        try:
            self.launches += 1
            tensors = _tensors(args, self.torch)
            self.launch_storages.update(self._key(t) for t in tensors)
            if not self.tracing:
                return run()
            if pdl:  # however launch_pdl was spelled (a computed **options dict): the compiled kernel says
                self._watching.append(f"launch_pdl on kernel `{name}`: programmatic dependent launch (overlapping "
                                      "kernels see whether the one before has finished)")
            foreign = foreign_arguments(args, self.known, self.before)
            if self.trusted.cuda:  # host memory a kernel writes is memory the host reads while the kernel runs
                foreign += [f"a {t.device.type} tensor" for t in tensors if t.device.type != "cuda"]
            by_key = {self._key(t): t for t in tensors}
            if self.memory is not None:
                result, written = self._interpreted(by_key, run)
            else:
                with self.trusted.apart():
                    before = {k: self._snapshot(t) for k, t in by_key.items()}
                self.trusted.sync()
                result = run()
                with self.trusted.apart():
                    written = [span for k, t in by_key.items() if (span := self._changed(t, before[k])) is not None]
                    del before
                self.trusted.sync()
                if self._ablation is not None:
                    with self.trusted.apart():
                        self._ablation.destroy_arguments(stored_tensors(args, stores, tensors, self.torch),
                                                         self._protected())
                    self.trusted.sync()
            if self._tainted & set(by_key):
                self._taint([t for t in by_key.values() if self._id(t) in {w.id for w in written}])
            self._launch_log.append(Launch(kernel=name, args=[self._extent(t) for t in tensors], written=written,
                                           foreign=foreign))
            self._seen.update(by_key)
            self._born, self._intact = set(), set()
            return result
        finally:
            self.depth -= 1

    def _interpreted(self, by_key: dict[int, Any], run: Callable[[], Any]) -> tuple[Any, list[Span]]:
        """CPU mode: run the launch with the interpreter's loads and stores recorded; what it wrote is what it stored
        (a store of the value a location already held is a write)."""
        memory = self.memory
        memory.begin_launch([(int(self._address(self._storage_of(t))),
                              int(self._address(self._storage_of(t))) + int(self._nbytes(self._storage_of(t))), k)
                             for k, t in by_key.items()])
        try:
            result = run()
        finally:
            stored = memory.end_launch()
        written = []
        for k, st in stored.items():
            hit = st.bitmap.nonzero()[0]
            written.append(Span(id=self._id(by_key[k]), lo=int(hit[0]), hi=int(hit[-1]) + 1, bytes=int(hit.size)))
        if self._ablation is not None:
            self._ablation.destroy_stored(by_key, stored, self._storage_of)
        return result, written

    def _protected(self) -> set[int]:
        """The storages a GPU ablation leaves alone: the forward's inputs and the model's weights (a launch reads
        them; destroying them would break the calls after this one)."""
        return {self._key(t) for t in self._inputs} | {self._key(w) for w in self.weights}

    def restore(self) -> None:
        """After an ablated call (its outputs copied): put back what the launches wrote, so that the state the
        candidate keeps across calls (a workspace its kernel zeroes for the next call) is what a plain call leaves."""
        if self._ablation is not None:
            with self.trusted.apart():
                self._ablation.restore()
            self.trusted.sync()
        self._ablation, self.ablating = None, False

    def traffic(self, outputs: list[Any]) -> list[Traffic]:
        """CPU mode: per storage, the bytes the call's launches stored outside the returned tensors' extents (each
        byte once, however many launches wrote it) and the bytes they loaded from locations a launch had stored."""
        memory = self.memory
        if memory is None:
            return []
        extents = [self._extent(t) for t in outputs]
        out = []
        for key, storage_id in list(self._ids.items()):
            written = memory.written_bytes(key)
            reloaded = memory.reloaded.get(key, 0)
            if written is None and not reloaded:
                continue
            outside = 0
            if written is not None:
                mask = written.copy()
                for e in extents:
                    if e.id == storage_id:
                        mask[e.lo:e.hi] = False
                outside = int(mask.sum())
            if outside or reloaded:
                out.append(Traffic(id=storage_id, written=outside, reloaded=reloaded))
        return out

    def _extent(self, t: Any) -> Span:
        """The bytes of its storage a tensor view covers."""
        size = self._element_size(t)
        lo = self._storage_offset(t) * size
        reach = sum((n - 1) * st for n, st in zip(t.shape, self._stride(t)) if n > 0) + 1 if self._numel(t) else 0
        return Span(id=self._id(t), lo=lo, hi=lo + reach * size)

    def _changed(self, t: Any, before: Any) -> Span | None:
        after = self._snapshot(t)
        if self.trusted.equal(before, after):
            return None
        where = (before != after).nonzero()
        size = self._element_size(t)  # whole elements: a float's low bytes may not change (2.0 is 00 00 00 40)
        lo, hi = int(where[0]), int(where[-1]) + 1
        return Span(id=self._id(t), lo=lo - lo % size, hi=hi + (-hi) % size)

    def _snapshot(self, t: Any) -> Any:
        """A copy of the whole storage under `t` (a launch may write outside the view it was given)."""
        whole = self.torch.empty(0, dtype=self.torch.uint8, device=t.device).set_(self._storage_of(t))
        return self.trusted.clone(whole)

    # ---------------------------------------------------------------- operators

    def dispatch_mode(self) -> Any:
        """A TorchDispatchMode recording the forward's operators (enter it around the call)."""
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self

        class Recorder(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                return False  # True would import torch._dynamo (2.3 s) to wrap a method nothing compiles

            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                try:  # first, with nothing called: at the stack's edge any call fails
                    if tracker.tracing and sys._getframe(max(0, sys.getrecursionlimit() - STACK_MARGIN)):
                        tracker._watching.append(_EDGE)
                except ValueError:  # the stack is not that deep: where every honest forward runs
                    pass
                except RecursionError:
                    tracker._watching.append(_EDGE)
                    raise
                try:
                    return self.record(func, types, args, kwargs)
                except RecursionError:  # the recorder's own frames took the last of the stack
                    if tracker.tracing:
                        tracker._watching.append(_EDGE)
                    raise

            def record(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
                mine = tracker.tracing and (not tracker.depth or tracker.candidate_inside())
                if mine:  # before the call: it may fail, as pinning does without a GPU
                    if why := watches_the_gpu(func, args, kwargs or {}):
                        tracker._watching.append(why)
                    # a tensor class of the candidate's: its __torch_dispatch__ runs inside this one, a few frames
                    # deeper than in a call nobody records (a recursion probe tells them apart)
                    tracker._watching += [f"{t.__name__}, a tensor subclass of its own" for t in types
                                          if t not in tracker.before]
                    tracker.flags_where(func)
                before = tracker._reaching(args, kwargs or {}) if mine else []
                out = func(*args, **(kwargs or {}))
                if mine:
                    tracker._op(func, args, kwargs or {}, out, before)
                return out

        return Recorder()

    def flags_where(self, func: Any) -> None:
        """A numeric flag that differs from the harness's where an operator runs: set by the forward around its
        convolution or matmul and put back before it returns, it is never seen after the call."""
        if not self.flags:
            return
        from agent.harness.worker.trusted import numeric_flags

        now = numeric_flags()
        self._flags_set += [f"{k} {v!r} -> {now[k]!r} at aten.{func._overloadpacket.__name__}" for k, v in self.flags.items()
                            if k in now and now[k] != v and not any(m.startswith(k + " ") for m in self._flags_set)]

    def candidate_inside(self) -> bool:
        """Whether the candidate's code runs this operator from inside a launch or the tracker's bookkeeping: Triton
        calls an argument's own methods there (an int subclass's comparisons, a descriptor shape's __index__, an
        allocator), and the garbage collector runs finalizers wherever it is triggered. Its operators are the
        forward's wherever they run: the innermost frame of the candidate's file comes before any of this module's."""
        if not self.candidate:
            return False
        frame: Any = sys._getframe(3)  # above __torch_dispatch__ (candidate_inside, record, __torch_dispatch__)
        while frame is not None:
            name = frame.f_code.co_filename
            if name == self.candidate:
                return True
            if name == __file__:
                return False
            frame = frame.f_back
        return False

    def _reaching(self, args: Any, kwargs: dict) -> list[bool]:
        """Before an operator runs, which of its tensors reach the data by memory: a storage derived from it, or any
        byte of the forward's inputs (a view, an alias made through DLPack at an offset, a storage that resize_ will
        move: what is compared is the memory, not the storage objects the recorder linked)."""
        self.depth += 1
        try:
            inputs = self._input_spans()
            derived = inputs + list(self._tainted_end.items())
            out = []
            for t in {id(t): t for t in _tensors((args, kwargs), self.torch)}.values():
                storage = self._storage_of(t)
                lo = int(self._address(storage))
                hi = lo + int(self._nbytes(storage))
                # a storage no operator made this call (an alias through DLPack, a storage resize_ moved) is judged
                # by where its memory lies; one an operator made, by what it was made from (a freed storage's memory
                # handed to a new one is not the data)
                near = inputs if lo in self._made else derived
                out.append(self._holds_data(lo) or any(a < hi and lo < b for a, b in near))
            return out
        finally:
            self.depth -= 1

    def _taint(self, tensors: list[Any]) -> None:
        """These tensors' storages derive from the data (their memory too: see _reaching)."""
        for t in tensors:
            storage = self._storage_of(t)
            lo = int(self._address(storage))
            self._tainted.add(lo)
            self._tainted_end[lo] = lo + max(1, int(self._nbytes(storage)))

    def _input_spans(self) -> list[tuple[int, int]]:
        """The memory the forward's inputs occupy now (a storage resized in the call has moved)."""
        spans = []
        for t in self._inputs:
            storage = self._storage_of(t)
            lo = int(self._address(storage))
            spans.append((lo, lo + max(1, int(self._nbytes(storage)))))
        return spans

    def _op(self, func: Any, args: Any, kwargs: dict, out: Any, before: list[bool] | None = None) -> None:
        self.depth += 1
        try:
            name = func._overloadpacket.__name__
            ins = {id(t): t for t in _tensors((args, kwargs), self.torch)}
            outs = _tensors(out, self.torch)
            sizes = [self._bytes(t) for t in ins.values()]
            kind: Literal["free", "heavy", "compute"] = (
                "free" if name in self.free else "heavy" if name in self.heavy else "compute")
            self._record_read(name, kind, list(ins.values()), outs)
            if name in ("copy_", "set_") or name.endswith("_"):  # in place: the written tensor derives from the rest
                outs = [*outs, *list(ins.values())[:1]]
            if kind == "free" and self._crosses_devices(name, list(ins.values()), kwargs):
                kind, name = "compute", f"{name} (to another device)"
            op = self._ops.setdefault(name, Op(name=name, kind=kind))
            op.calls += 1
            op.in_bytes += sum(sizes)
            op.out_bytes += sum(self._bytes(t) for t in _tensors(out, self.torch))
            in_keys = {self._key(t) for t in ins.values()}
            made = {self._key(t) for t in outs} - in_keys  # allocations: a key met before is a freed storage's address
            for key in made & (self._seen | set(self._ids)):
                self._retire(key)
            data = [bool(before and i < len(before) and before[i]) or self._holds_data(self._key(t))
                    for i, t in enumerate(ins.values())]
            if any(data):  # PyTorch's work on the data: the bytes of the data it read
                op.data_bytes += sum(n for n, d in zip(sizes, data) if d)
                self._taint(outs)
            self._born.update(made)
            self._made.update(made)
            self._seen.update(in_keys | {self._key(t) for t in outs})
            op.largest_bytes = max([op.largest_bytes, *sizes, *(self._bytes(t) for t in outs)])
            if kind == "heavy" and sum(sizes) > 0:
                ratio = sum(self._bytes(t) for t in _tensors(out, self.torch)) / sum(sizes)
                op.least_yield = ratio if op.least_yield is None else min(op.least_yield, ratio)
        finally:
            self.depth -= 1

    def _holds_data(self, key: int) -> bool:
        """Derived from the inputs, or possibly written by a kernel: any storage but those made after the last launch
        (a weight read before the first launch is not the data; one read after it may have been overwritten, unless
        its bytes are still those it had when the call began: a weight folded after a launch is still a weight)."""
        if key in self._tainted:
            return True
        return bool(self._launch_log) and key not in self._born and not self._weight_intact(key)

    def _weight_intact(self, key: int) -> bool:
        """The model's weight at `key` has the bytes it had when the call began (checked once between launches)."""
        if key not in self._intact and key in self._kept:
            weight, kept = self._kept[key]
            with self.trusted.apart():
                if self.trusted.equal(self._snapshot(weight), kept):
                    self._intact.add(key)
        return key in self._intact

    def _record_read(self, name: str, kind: Literal["free", "heavy", "compute"], ins: list[Any],
                     outs: list[Any]) -> None:
        """Which storages already met this call read. A free operator reads none of what it returns (a view, the
        target of a copy) and nothing at all when it looks only at metadata (empty_like, sym_size); an operator
        that computes or a heavy layer reads every tensor it is given."""
        if kind == "free" and name in self.metadata:
            return
        keys = {self._key(t) for t in ins}
        if kind == "free":
            keys -= {self._key(t) for t in outs}
        read = sorted(self._ids[k] for k in keys if k in self._ids)
        if read:
            self._reads.append(Read(op=name, kind=kind, after=len(self._launch_log), storages=read))

    @staticmethod
    def _crosses_devices(name: str, ins: list[Any], kwargs: dict) -> bool:
        """A copy to another device (host) is where a forward could compute outside PyTorch's operators."""
        kinds = {t.device.type for t in ins}
        target = kwargs.get("device")
        return len(kinds) > 1 or (target is not None and any(k != getattr(target, "type", str(target).split(":")[0])
                                                             for k in kinds))
