"""What the worker holds on to before any candidate code runs, and how it notices the candidate reaching for it.

The candidate runs in the process that times and reports it, so three things keep the report honest:
- Trusted: the functions the harness times and fills inputs with, taken as C-level references (TensorBase methods,
  the CUDA event base type, torch._C's synchronize) before the candidate is imported. Replacing `torch.cuda.Event`,
  `time.perf_counter` or `torch.Tensor.normal_` afterwards changes nothing the harness calls.
- Integrity: a snapshot of what torch, triton, builtins and the harness's own modules bind (functions, classes,
  modules) and of PyTorch's numeric flags. Compared after the candidate's import, validation and timing: any
  replaced or deleted binding, or a changed flag, is reported (the parent turns it into a rule_violation).
- guard(): an audit hook (irremovable once added) refusing, from the candidate's own code, the interpreter's
  introspection (frames, the garbage collector, tracing hooks, code objects, ctypes) and process/network calls.
The static policy is the first fence and the sandbox the wall; these make a gap in the fence visible.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any


class Trusted:
    """C-level references for timing and filling inputs, taken before the candidate is imported."""

    def __init__(self, device: str) -> None:
        import time

        import torch

        self.device = device
        self.perf_counter = time.perf_counter
        self.normal_ = torch._C.TensorBase.normal_
        self.clone = torch._C.TensorBase.clone
        self.copy_ = torch._C.TensorBase.copy_
        self.sum = torch._C.TensorBase.sum
        self.to = torch._C.TensorBase.to
        self.equal = torch.equal
        # the ablated call writes into what a launch stored; a forward under @torch.inference_mode stores into
        # inference tensors, which only accept in-place writes inside that mode (the guard class, not the decorator)
        self.inference_mode = torch._C._InferenceMode
        self.ones = torch.ones
        self.generator = torch.Generator
        self.cuda = device == "cuda"
        if self.cuda:
            self._sync = torch._C._cuda_synchronize
            self.event_type = torch._C._CudaEventBase
            self.record = torch._C._CudaEventBase.record
            self.elapsed = torch._C._CudaEventBase.elapsed_time
            self.current_stream = torch.cuda.current_stream
            self._sleep = torch._C._cuda_sleep  # a GPU-side spin for N cycles
            # the tracer's own buffers come from this stream's pool: the caching allocator never hands a block freed
            # there to the forward (default stream), which then gets in a recorded call what it gets in the others
            self.aside = torch.cuda.Stream()
            self.stream_context = torch.cuda.stream
        import gc

        # the cycle collector runs finalizers (a candidate class's __del__) wherever a collection starts (collector_off)
        self._gc = (gc.enable, gc.disable, gc.isenabled, gc.collect)
        self.energy: Any = None  # an agent.harness.worker.energy.EnergyCounter once open_energy() found one
        self.energy_note = "CPU mode: no GPU energy counter" if not self.cuda else "energy counter not opened"

    def open_energy(self) -> None:
        """Open the GPU's energy counter (or note why there is none): call it before the candidate is imported."""
        if not self.cuda:
            return
        from agent.harness.worker.energy import open_counter

        found = open_counter(0)
        if isinstance(found, str):
            self.energy, self.energy_note = None, found
        else:
            self.energy, self.energy_note = found, ""

    def apart(self) -> Any:
        """A context in which the harness's bookkeeping allocates out of the forward's reach (the GPU: another
        stream's memory pool, everything before it finished; the CPU: as it is, every CPU call being recorded)."""
        import contextlib

        if not self.cuda:
            return contextlib.nullcontext()
        self._sync()
        return self.stream_context(self.aside)

    def sync(self) -> None:
        if self.cuda:
            self._sync()

    def collector_off(self) -> Any:
        """A context in which no collection starts by itself: the candidate's finalizers (its classes' __del__) run
        where `collect` is called, between calls, never inside one. The collector starts wherever an allocation tips
        it over its threshold, and in a traced call that is mostly inside the recorder's dispatch, where its mode is
        off: a finalizer there computed unrecorded. Every call runs so, traced or not (nothing to tell them by)."""
        import contextlib

        enable, disable, enabled, _ = self._gc

        @contextlib.contextmanager
        def off() -> Any:
            was = enabled()
            disable()
            try:
                yield
            finally:
                if was:
                    enable()

        return off()

    def collect(self) -> None:
        """Collect what the last call left (with the collector off, all of it is in the youngest generation): where
        the harness calls this, the call's outputs are copied and the next call's inputs not yet drawn."""
        self._gc[3](0)

    def event(self) -> Any:
        return self.event_type(enable_timing=True)

    def sleep(self, cycles: int) -> None:
        """Queue GPU work that spins for `cycles` clock cycles (the host returns at once)."""
        self._sleep(int(cycles))


def _flags() -> dict[str, Any]:
    """PyTorch's numeric and dispatch state: a candidate must be judged, and timed, under the defaults."""
    import torch

    return {**numeric_flags(), "dispatch_modes": torch._C._len_torch_dispatch_stack(),
            "function_modes": torch._C._len_torch_function_stack()}


def numeric_flags() -> dict[str, Any]:
    """The flags that change what an operator computes or how fast (cuDNN's and cuBLAS's choices, TF32 and reduced
    precision, the default dtype, threads): read where each operator of a recorded call runs (a forward can set one
    around its convolution and put it back before it returns) and compared after the calls. A flag that cannot be
    read has its error as its value: PyTorch's legacy TF32 getters raise once the newer fp32_precision settings were
    given other values (the harness only ever uses the legacy ones), and a flag this PyTorch lacks is absent."""
    import torch

    cudnn, cuda, matmul = torch.backends.cudnn, torch.backends.cuda, torch.backends.cuda.matmul
    readers: dict[str, Callable[[], Any]] = {
        "cudnn.enabled": lambda: cudnn.enabled, "cudnn.benchmark": lambda: cudnn.benchmark,
        "cudnn.deterministic": lambda: cudnn.deterministic, "cudnn.allow_tf32": lambda: cudnn.allow_tf32,
        "matmul.allow_tf32": lambda: matmul.allow_tf32,
        "matmul.allow_fp16_reduced_precision_reduction": lambda: matmul.allow_fp16_reduced_precision_reduction,
        "matmul.allow_bf16_reduced_precision_reduction": lambda: matmul.allow_bf16_reduced_precision_reduction,
        "matmul.allow_fp16_accumulation": lambda: matmul.allow_fp16_accumulation,
        "float32_matmul_precision": torch.get_float32_matmul_precision,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
        "default_dtype": lambda: str(torch.get_default_dtype()), "num_threads": torch.get_num_threads,
        "blas_library": lambda: str(cuda.preferred_blas_library()),
        "linalg_library": lambda: str(cuda.preferred_linalg_library()),
        "mkldnn.enabled": lambda: torch.backends.mkldnn.enabled,
        "cudnn.benchmark_limit": lambda: cudnn.benchmark_limit,
        # attention's backends and the math backend's reduced-precision reduction; einsum's contraction order
        "sdp": lambda: (cuda.flash_sdp_enabled(), cuda.mem_efficient_sdp_enabled(), cuda.math_sdp_enabled(),
                        cuda.cudnn_sdp_enabled(), cuda.fp16_bf16_reduction_math_sdp_allowed()),
        "opt_einsum": lambda: (torch.backends.opt_einsum.enabled, torch.backends.opt_einsum.strategy),
    }
    out: dict[str, Any] = {}
    for name, read in readers.items():
        try:
            out[name] = read()
        except AttributeError:
            pass
        except RuntimeError as e:
            out[name] = f"unreadable ({type(e).__name__})"
    return out


def speed_flags() -> dict[str, Any]:
    """The backend flags an answer may set but never keeps (agent.harness.static.policy._SPEED_FLAGS and the default
    float32 matmul precision), as they are now."""
    return {k: v for k, v in _flags().items() if k in _SPEED_KEYS}


_SPEED_KEYS = ("float32_matmul_precision", "cudnn.benchmark", "cudnn.deterministic", "cudnn.allow_tf32",
               "matmul.allow_tf32")


def restore_speed_flags(saved: dict[str, Any]) -> None:
    """Put those flags back (after the candidate's import, and after each ModelNew is built): its calls run and are
    timed under the defaults, as the baseline's are. Set by forward, a flag is still set when Integrity compares."""
    import torch

    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    # the precision first: setting it sets matmul.allow_tf32 too
    torch.set_float32_matmul_precision(saved["float32_matmul_precision"])
    cudnn.benchmark, cudnn.deterministic = saved["cudnn.benchmark"], saved["cudnn.deterministic"]
    cudnn.allow_tf32, matmul.allow_tf32 = saved["cudnn.allow_tf32"], saved["matmul.allow_tf32"]


def _watched(extra: dict[str, Any]) -> dict[str, Any]:
    import builtins
    import time

    import torch
    import triton
    import triton.language

    found: dict[str, Any] = {
        "torch": torch, "torch.Tensor": torch.Tensor, "torch.nn.Module": torch.nn.Module,
        "torch.nn.Parameter": torch.nn.Parameter, "torch.cuda.Event": torch.cuda.Event,
        "torch.autograd.Function": torch.autograd.Function,
        "torch.nn.functional": torch.nn.functional, "torch.cuda": torch.cuda, "time": time, "builtins": builtins,
        "triton": triton, "triton.language": triton.language,
    }
    found.update(extra)
    for name, module in list(sys.modules.items()):
        if name.startswith("agent.harness") and module is not None:
            found[name] = module
    return found


class Integrity:
    """What the watched objects bind now; `changed()` lists every binding replaced or deleted since."""

    def __init__(self, extra: dict[str, Any] | None = None) -> None:
        self.objects = _watched(extra or {})
        self.modules = {name: sys.modules.get(name) for name in self.objects if name in sys.modules}
        self.bindings = {(label, key): value for label, obj in self.objects.items()
                         for key, value in list(vars(obj).items())
                         if callable(value) or isinstance(value, (type, types.ModuleType))}
        self.keys = {label: set(vars(obj)) for label, obj in self.objects.items()}
        self.flags = _flags()

    def changed(self) -> list[str]:
        out = []
        for (label, key), value in self.bindings.items():
            now = vars(self.objects[label]).get(key, _GONE)
            if now is not value:
                out.append(f"{label}.{key}" + (" (deleted)" if now is _GONE else ""))
        for label, obj in self.objects.items():  # a class gains no attribute on its own: one added shadows a base's
            if isinstance(obj, type):
                out += [f"{label}.{key} (added)" for key in list(vars(obj))
                        if key not in self.keys[label] and key not in _RUNTIME_CACHES]
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                out.append(f"sys.modules[{name!r}]")
        now_flags = _flags()
        out += [f"{k}: {v!r} -> {now_flags[k]!r}" for k, v in self.flags.items() if now_flags.get(k) != v]
        return out


_GONE = object()
_RUNTIME_CACHES = {"__slotnames__"}  # what the interpreter itself adds to a class (copyreg, when pickling)

# Audit events refused while any frame of the candidate is on the stack (the candidate can hand the function to a
# library as a callback), and those refused when the candidate's code triggers them itself (libraries use them).
_ANYWHERE = {"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace", "sys.setprofile",
             "sys._current_frames", "sys._current_exceptions", "sys.addaudithook"}
_DIRECT = {"sys._getframe", "sys._getframemodulename", "function.__new__", "code.__new__", "marshal.loads",
           "marshal.load", "ctypes.dlopen", "ctypes.dlsym", "ctypes.addressof", "ctypes.string_at", "ctypes.wstring_at",
           "ctypes.cdata", "ctypes.PyObj_FromPtr", "ctypes.call_function", "os.system", "os.exec", "os.posix_spawn",
           "os.spawn", "os.fork", "os.forkpty", "os.kill", "os.killpg", "subprocess.Popen", "socket.connect",
           "socket.bind", "open", "builtins.input", "object.__getattr__", "object.__setattr__", "object.__delattr__",
           "pickle.find_class"}
_ATTRS = {"__code__", "__globals__", "__closure__", "__defaults__", "__kwdefaults__", "__builtins__", "tb_frame",
          "tb_next", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code", "f_back", "f_globals",
          "f_locals", "f_builtins", "f_code", "__bases__", "__class__", "__dict__", "__subclasses__"}


def _typing_evaluation(event: str, args: tuple, frame: types.FrameType, files: frozenset[str],
                       creation: types.CodeType, forward_ref: type, candidate_file: str) -> tuple[bool, str | None]:
    """(whether this compile/exec event is typing evaluating a string as code, the string where known). typing's
    forward references are strings evaluated in the module they came from: typing.ForwardRef._evaluate runs the code
    its constructor compiled (the constructor's own compile only checks the syntax), typing_extensions evaluates
    strings itself. Only strings evaluated in the candidate's namespace (or one typing was not given) are its own."""
    if frame.f_code.co_filename not in files or frame.f_code is creation:
        return False, None
    namespace = frame.f_locals.get("globalns", frame.f_locals.get("globals"))
    if isinstance(namespace, dict) and namespace.get("__file__") not in (None, candidate_file):
        return False, None  # a library's own annotation, evaluated in its own module
    if event == "compile":
        source = args[0] if args else None
        if isinstance(source, bytes):
            source = source.decode(errors="replace")
        return True, source if isinstance(source, str) else None
    refs: list[Any] = [v for v in frame.f_locals.values() if isinstance(v, forward_ref)]
    return True, refs[0].__forward_arg__ if len(refs) == 1 else None


def guard(candidate_file: str, on_refusal: Callable[[str], None]) -> None:
    """Refuse introspection and process calls from the candidate's code for the rest of this process's life; and any
    string typing evaluates for it (get_type_hints, functools.singledispatch's register) that is not one of its
    annotations, which the static check read as the code they spell (agent.harness.worker.annotations)."""
    import ast
    import typing

    import typing_extensions

    from agent.harness.worker.annotations import annotation_texts

    getframe = sys._getframe
    busy = [False]
    watched = _ANYWHERE | _DIRECT | {"compile", "exec"}
    try:
        with open(candidate_file, encoding="utf-8-sig") as f:
            approved = annotation_texts(ast.parse(f.read()))
    except (OSError, SyntaxError, ValueError, RecursionError):
        approved = frozenset()
    files = frozenset(m.__file__ for m in (typing, typing_extensions) if m.__file__)
    creation = typing.ForwardRef.__init__.__code__

    def hook(event: str, args: tuple) -> None:
        if event not in watched or busy[0]:
            return
        if event.startswith("object.") and not (len(args) > 1 and args[1] in _ATTRS):
            return
        busy[0] = True
        try:
            frame: types.FrameType | None = getframe(1)
            evaluated: str | None = None
            if event in ("compile", "exec"):
                assert frame is not None
                typed, evaluated = _typing_evaluation(event, args, frame, files, creation, typing.ForwardRef,
                                                      candidate_file)
                if not typed or (evaluated is not None and evaluated.strip() in approved):
                    return
            direct = frame is not None and frame.f_code.co_filename == candidate_file
            if (event in _ANYWHERE or event in ("compile", "exec")) and not direct:
                while frame is not None and frame.f_code.co_filename != candidate_file:
                    frame = frame.f_back
                direct = frame is not None
        finally:
            busy[0] = False
        if direct:
            what = f"{event} ({args[1]})" if event.startswith("object.") else event
            if event in ("compile", "exec"):
                what = f"a string typing evaluated as code ({evaluated!r:.80}), not one of the module's annotations"
            on_refusal(what)
            raise RuntimeError(f"the harness refuses {what} from candidate code")

    sys.addaudithook(hook)
