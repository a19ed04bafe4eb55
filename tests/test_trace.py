"""agent.harness.worker.trace: what a forward does, recorded where it happens. Each case runs in a fresh interpreter
(TRITON_INTERPRET=1), as a worker does: the tracker hooks Triton's classes for the rest of the process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

PRELUDE = '''
import json, torch, triton, triton.language as tl
from agent.harness.worker.trace import Tracker
from agent.harness.worker.trusted import Trusted

@triton.jit
def scale(x, y, n, s, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y + o, tl.load(x + o, mask=o < n) * s, mask=o < n)

@triton.jit
def rowsum(x, out, L, B: tl.constexpr):
    r = tl.program_id(0)
    acc = tl.zeros((B,), dtype=tl.float32)
    for start in range(0, L, B):
        o = start + tl.arange(0, B)
        acc += tl.load(x + r * L + o, mask=o < L, other=0.0)
    tl.store(out + r, tl.sum(acc, axis=0))

tracker = Tracker(Trusted("cpu"))
tracker.install()

def record(fn, inputs, trace=True):
    tracker.begin(trace, inputs)
    with tracker.dispatch_mode() if trace else __import__("contextlib").nullcontext():
        out = fn(*inputs)
    launched, tr = tracker.end([out])
    print(json.dumps({"launches": tracker.launches, "launched": launched, "trace": tr.model_dump() if tr else None}))
'''


def run(body: str, last: int = 1) -> Any:
    """The record printed last (`last` > 1: the last `last` of them, in order)."""
    code = PRELUDE + textwrap.dedent(body)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                       env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr
    records = [json.loads(line) for line in r.stdout.strip().splitlines()[-last:]]
    return records[0] if last == 1 else records


def test_a_launch_records_what_it_was_given_and_the_bytes_it_changed():
    got = run('''
        def fwd(x):
            y = torch.zeros(4, 8)
            scale[(1,)](x[1], y[2], 8, 2.0, B=8)   # views: row 1 of x read, row 2 of y written
            return y
        record(fwd, [torch.ones(4, 8)])
    ''')
    [launch] = got["trace"]["launches"]
    assert launch["kernel"] == "scale" and got["launches"] == 1 and got["launched"]
    x_span, y_span = launch["args"]
    assert (x_span["lo"], x_span["hi"]) == (32, 64)
    assert launch["written"] == [{"id": y_span["id"], "lo": 64, "hi": 96, "bytes": 32}]  # every store recorded
    assert got["trace"]["outputs"] == [y_span["id"]]


def test_operators_on_the_data_are_told_from_operators_on_weights():
    got = run('''
        w = torch.randn(8)
        def fwd(x):
            scaled = w * 2.0                      # weights only: not the data
            m = x.mean(dim=1)                     # on the data
            out = torch.empty(4)
            rowsum[(4,)](x, out, 8, B=8)
            return out + m * 0
        record(fwd, [torch.ones(4, 8)])
    ''')
    ops = {op["name"]: op for op in got["trace"]["ops"]}
    assert ops["mean"]["kind"] == "compute" and ops["mean"]["data_bytes"] == 4 * 8 * 4
    assert ops["mul"]["calls"] == 2 and ops["mul"]["data_bytes"] == 4 * 4  # w * 2 (weights) and m * 0 (data)
    assert ops["empty"]["kind"] == "free"


def test_an_untraced_call_only_counts_launches_and_their_storages():
    got = run('''
        def fwd(x):
            y = torch.empty_like(x)
            scale[(1,)](x, y, 8, 1.0, B=8)
            scale[(1,)](y, y, 8, 1.0, B=8)
            return torch.zeros(3)
        record(fwd, [torch.ones(8)], trace=False)
    ''')
    assert got["launches"] == 2 and got["trace"] is None
    assert got["launched"] is False  # the returned zeros were never handed to a kernel


def test_kernels_defined_anywhere_are_seen():
    got = run('''
        def make():
            @triton.jit
            def inner(x, y, B: tl.constexpr):
                o = tl.arange(0, B)
                tl.store(y + o, tl.load(x + o))
            return inner
        k = make()
        def fwd(x):
            y = torch.empty_like(x)
            k[(1,)](x, y, B=8)
            return y
        record(fwd, [torch.ones(8)])
    ''')
    assert [l["kernel"] for l in got["trace"]["launches"]] == ["inner"]


def test_each_call_records_which_storages_already_met_it_read_and_after_how_many_launches():
    got = run('''
        w = torch.randn(2, 2, 1, 1)
        def fwd(x):
            xc = torch.empty_like(x)                 # metadata only: reads nothing
            scale[(1,)](x, xc, 8, 1.0, B=8)
            view = xc.view(2, 2, 2, 1)               # a view: the same storage, nothing read
            conv = torch.nn.functional.conv2d(view, w)  # a heavy layer reads the buffer
            copy = xc.clone()                        # a copy reads it too
            out = torch.empty(2)
            rowsum[(2,)](conv.reshape(2, -1), out, 4, B=4)
            return out + copy.sum() * 0
        record(fwd, [torch.ones(8)])
    ''')
    trace = got["trace"]
    xc = trace["launches"][0]["written"][0]["id"]
    reads = [(r["op"], r["kind"], r["after"]) for r in trace["reads"] if xc in r["storages"]]
    assert reads == [("convolution", "heavy", 1), ("clone", "free", 1)]
    assert not any(r["op"] in ("empty_like", "view") for r in trace["reads"])



def test_after_a_launch_any_older_storage_may_hold_the_data_not_only_those_it_was_given():
    """A kernel reaches memory by address: given only a fresh buffer (and an offset to x), it fills the buffer with
    the data. What PyTorch then computes on that buffer, or on any storage older than the launch, is on the data;
    a weight read before the first launch, and a tensor made after the last one, are not."""
    got = run('''
        @triton.jit
        def gather(dst, delta, n, B: tl.constexpr):
            o = tl.arange(0, B)
            tl.store(dst + o, tl.load(dst + delta + o, mask=o < n), mask=o < n)

        w = torch.randn(8)
        def fwd(x):
            early = w * 2.0                            # before any launch: a weight
            stage = torch.empty(32)
            gather[(1,)](stage, (x.data_ptr() - stage.data_ptr()) // 4, 32, B=32)
            laundered = stage.sum()                    # the data, through an address offset
            late = w - 1.0                             # w may have been written by the launch
            fresh = torch.ones(4) * 3.0                # made after the launch: not the data
            out = torch.empty(4)
            rowsum[(4,)](x, out, 8, B=8)
            return out
        record(fwd, [torch.arange(32.0).reshape(4, 8)])
    ''')
    ops = {op["name"]: op for op in got["trace"]["ops"]}
    assert ops["sum"]["data_bytes"] == 32 * 4
    assert ops["sub"]["data_bytes"] == 8 * 4
    assert ops["mul"]["calls"] == 2 and ops["mul"]["data_bytes"] == 0  # w * 2 (before), ones * 3 (fresh)


def test_a_weight_whose_bytes_are_those_the_call_began_with_is_not_the_data_after_a_launch():
    """The model's weights are kept when a traced call begins: one folded after a launch (an algebraic answer summing
    the conv's taps after its first kernel) still has those bytes and is not the data; one a kernel wrote the data
    into (by an address offset) has other bytes and is. Weights the tracker was not given stay the data after a
    launch."""
    got = run('''
        @triton.jit
        def gather(dst, delta, n, B: tl.constexpr):
            o = tl.arange(0, B)
            tl.store(dst + o, tl.load(dst + delta + o, mask=o < n), mask=o < n)

        kept, written, other = torch.randn(8), torch.zeros(32), torch.randn(6)
        tracker.weights = [kept, written]
        def fwd(x):
            out = torch.empty(4)
            rowsum[(4,)](x, out, 8, B=8)
            folded = kept * 2.0                        # a weight, untouched by the launch
            gather[(1,)](written, (x.data_ptr() - written.data_ptr()) // 4, 32, B=32)
            laundered = written.sum()                  # the data, through an address offset
            again = kept - 1.0                         # still untouched after the second launch
            unknown = other.exp()                      # not a weight the tracker was given
            return out
        record(fwd, [torch.arange(32.0).reshape(4, 8)])
    ''')
    ops = {op["name"]: op for op in got["trace"]["ops"]}
    assert ops["mul"]["data_bytes"] == 0 and ops["sub"]["data_bytes"] == 0
    assert ops["sum"]["data_bytes"] == 32 * 4
    assert ops["exp"]["data_bytes"] == 6 * 4


def test_tracing_keeps_nothing_of_the_forward_alive():
    """A forward that frees scratch and allocates again gets the same block back in a call nobody records; it must in
    a recorded one too (else the block that does not come back says the call is checked). A buffer the allocator
    hands out at a freed storage's address is another storage (the dispatch mode sees every allocation)."""
    got = run('''
        import gc, weakref

        def fwd(x):
            scratch = torch.empty(64)
            scale[(1,)](x, scratch, 32, 1.0, B=32)
            freed = weakref.ref(scratch.untyped_storage())  # torch keeps one Python object per storage
            del scratch
            gc.collect()  # the interpreter's launch leaves a reference cycle; a GPU launch does not
            assert freed() is None, "the recorder kept the freed scratch alive"
            again = torch.empty(64)
            out = torch.empty(4)
            rowsum[(4,)](again, out, 8, B=8)
            return out
        record(fwd, [torch.ones(4, 8)])
    ''')
    ids = [[a["id"] for a in launch["args"]] for launch in got["trace"]["launches"]]
    assert ids[0][1] != ids[1][0] and len(got["trace"]["storages"]) == 4


def test_a_launch_argument_triton_would_take_for_a_pointer_must_be_a_tensor():
    found = run('''
        import enum
        from agent.harness.worker.launchargs import foreign_arguments
        from triton.tools.tensor_descriptor import TensorDescriptor

        class Pointer:  # Triton asks it for data_ptr (GPU) or untyped_storage (interpreter) inside the launch
            def __getattr__(self, name):
                raise AttributeError(name)

        class Level(enum.IntEnum):
            HIGH = 2

        class Address(int):
            def data_ptr(self):
                return int(self)

        t = torch.zeros(16, 16)
        wrapped = TensorDescriptor.from_tensor(t, [8, 8])
        wrapped.base = Pointer()
        plain = ((t, torch.nn.Parameter(t), 3, 2.5, True, None, "relu", torch.float32, tl.float32, tl.constexpr(4),
                  t.shape, Level.HIGH, TensorDescriptor.from_tensor(t, [8, 8])), {"B": 64})
        print(json.dumps([foreign_arguments(plain, tracker.known, tracker.before), foreign_arguments(([Pointer()], {}), tracker.known, tracker.before),
                          foreign_arguments((Address(0),), tracker.known, tracker.before),
                          foreign_arguments((wrapped,), tracker.known, tracker.before),
                          foreign_arguments((torch.FloatStorage(4), torch.UntypedStorage(4)), tracker.known,
                                            tracker.before)]))
    ''')
    assert found == [[], ["Pointer"], ["Address"], ["TensorDescriptor of a Pointer"],
                     ["UntypedStorage", "TypedStorage"]]


def test_a_traced_launch_records_the_arguments_it_cannot_copy():
    found = run('''
        class Staged:  # what the interpreter asks a pointer for, answered with a storage made inside the launch
            def __init__(self, src):
                self.src, self.kept, self.dtype = src, [], torch.float32

            def __getattr__(self, name):
                if name == "untyped_storage":
                    return lambda: self.kept[0] if self.kept else self.kept.append(self.src.clone().untyped_storage()) or self.kept[0]
                answers = {"data_ptr": lambda: 0, "storage_offset": lambda: 0, "size": lambda: (8,), "stride": lambda: (1,),
                           "new_empty": lambda *a, **k: torch.empty(0)}
                if name in answers:
                    return answers[name]
                raise AttributeError(name)

        x, y = torch.arange(8.0), torch.empty(8)
        def fn(x):
            scale[(1,)](Staged(x), y, 8, 2.0, B=8)
            return y
        record(fn, [x])
    ''')
    assert [launch["foreign"] for launch in found["trace"]["launches"]] == [["Staged"]]


def test_a_callable_grid_and_pre_run_hooks_run_where_the_gpu_runs_them_before_the_launch():
    found = run('''
        x, y = torch.arange(8.0), torch.empty(8)
        staged = torch.empty(8)

        def hook(*args, **kwargs):
            staged.add_(x)

        scale.add_pre_run_hook(hook)
        def fn(x):
            def grid(meta):
                staged.copy_(x * 3.0)
                return (triton.cdiv(meta["n"], meta["B"]),)
            scale[grid](staged, y, 8, 1.0, B=8)
            return y
        record(fn, [x])
    ''')
    assert {op["name"] for op in found["trace"]["ops"] if op["kind"] == "compute"} == {"mul", "add_"}


COMPARES_INSIDE = '''
    x, y, staged = torch.arange(8.0), torch.empty(8), torch.empty(8)
    def fn(x):
        class Count(int):  # Triton's interpreter compares an int argument inside the launch
            def __lt__(self, other):
                torch.mul(x, 3.0, out=staged)
                return int(self) < other
        scale[(1,)](staged, y, Count(8), 1.0, B=8)
        return y
    tracker.candidate = CANDIDATE
    record(fn, [x])
'''


def test_the_candidates_code_run_inside_a_launch_is_recorded_as_the_forwards():
    """An argument's own methods run inside the launch (the interpreter compares an int, the GPU's launcher converts
    a descriptor's shape), as a finalizer does where the garbage collector runs: the operators of the candidate's
    code are the forward's wherever they run; the tracker's own copies there are not."""
    found = run("CANDIDATE = '<string>'\n" + textwrap.dedent(COMPARES_INSIDE))
    assert {op["name"] for op in found["trace"]["ops"] if op["kind"] == "compute"} == {"mul"}
    unset = run("CANDIDATE = ''\n" + textwrap.dedent(COMPARES_INSIDE))  # no candidate file: the launch's own
    assert {op["name"] for op in unset["trace"]["ops"] if op["kind"] == "compute"} == set()


def test_a_programmatic_dependent_launch_is_recorded_however_it_was_asked_for():
    """launch_pdl lets the next kernel start before this one ends (a tell on the GPU): the compiled kernel's metadata
    says so at the launcher, whatever spelling of the option reached it (a computed **options dict)."""
    found = run('''
        x = torch.zeros(4)
        tracker.begin(True, [x])
        tracker._launch("k", ((x,), {}), lambda: None, pdl=True)
        tracker._launch("j", ((x,), {}), lambda: None)
        _, tr = tracker.end([x])
        print(json.dumps({"trace": tr.model_dump()}))
    ''')
    assert len(found["trace"]["watching"]) == 1 and "launch_pdl on kernel `k`" in found["trace"]["watching"][0]


def test_pinned_memory_in_a_forward_is_recorded_before_it_runs():
    found = run('''
        x, y = torch.arange(8.0), torch.empty(8)
        def fn(x):
            try:
                torch.empty(4, pin_memory=True)  # no GPU here: it fails after the recorder has seen it
            except RuntimeError:
                pass
            scale[(1,)](x, y, 8, 2.0, B=8)
            return y
        record(fn, [x])
    ''')
    assert found["trace"]["watching"] == ["aten.empty: pinned host memory"]


def test_only_copies_to_the_host_that_do_not_wait_watch_the_gpu():
    found = run('''
        from agent.harness.worker.trace import watches_the_gpu
        aten = torch.ops.aten
        device, host = torch.empty(4, device="meta"), torch.empty(4)
        cpu = torch.device("cpu")
        print(json.dumps([
            watches_the_gpu(aten._to_copy.default, (device,), {"device": cpu, "non_blocking": True}),
            watches_the_gpu(aten.copy_.default, (host, device, True), {}),
            watches_the_gpu(aten._to_copy.default, (device,), {"device": cpu}),
            watches_the_gpu(aten._to_copy.default, (host,), {"device": torch.device("meta"), "non_blocking": True}),
            watches_the_gpu(aten.copy_.default, (device, host), {"non_blocking": True}),
        ]))
    ''')
    assert found == ["aten._to_copy(non_blocking=True) to the host", "aten.copy_(non_blocking=True) to the host",
                     None, None, None]


def test_a_tensor_class_made_by_the_candidate_is_recorded_its_dispatch_runs_inside_the_recorder():
    found = run('''
        def dispatch(cls, func, types, args=(), kwargs=None):
            return torch.zeros(1)  # here a recursion probe finds the recorder's frames on the stack

        Probe = type(torch.Tensor)("Probe", (torch.nn.Parameter,), {"__torch_dispatch__": classmethod(dispatch)})
        probe = Probe(torch.zeros(1), requires_grad=False)
        x, y = torch.arange(8.0), torch.empty(8)
        def fn(x):
            probe.neg()
            torch.nn.Parameter(x).neg()  # torch's own subclass is not the candidate's
            scale[(1,)](x, y, 8, 2.0, B=8)
            return y
        record(fn, [x])
    ''')
    assert found["trace"]["watching"] == ["Probe, a tensor subclass of its own"]


def test_the_tracker_reads_tensors_through_their_class_never_their_own_attributes():
    """A tensor's own namespace shadows its class's methods: an operator's argument carrying `numel`, or the returned
    tensor carrying `untyped_storage`, would run the candidate's code inside the recorder's dispatch (its mode off) or
    in end() (after the mode closed), computing there unrecorded."""
    got = run('''
        calls = []

        def sneak(method, name):
            return lambda: calls.append(name) or method()

        def fwd(x):
            y = x * 2.0
            y.numel = sneak(y.numel, "numel")  # read by the recorder for the next operator's bytes
            z = y + 1.0
            out = torch.empty(4)
            rowsum[(4,)](z, out, 8, B=8)
            out.untyped_storage = sneak(out.untyped_storage, "untyped_storage")  # read by end() for the output's
            return out
        record(fwd, [torch.ones(4, 8)])
        print(json.dumps(calls))
    ''')
    assert got == []


def test_a_tensor_with_attributes_of_its_own_is_a_foreign_launch_argument():
    found = run('''
        from agent.harness.worker.launchargs import foreign_arguments
        from triton.tools.tensor_descriptor import TensorDescriptor

        t, u = torch.zeros(16, 16), torch.zeros(16, 16)
        t.data_ptr = lambda: 0  # Triton's launcher asks the argument itself for its address
        described = TensorDescriptor.from_tensor(torch.zeros(16, 16), [8, 8])
        described.base.note = "x"
        print(json.dumps([foreign_arguments((t, u), tracker.known, tracker.before),
                          foreign_arguments((described,), tracker.known, tracker.before)]))
    ''')
    assert found == [["a Tensor with attributes of its own (data_ptr)"], ["a Tensor with attributes of its own (note)"]]


def test_an_operator_run_at_the_edge_of_the_recursion_limit_is_recorded_as_a_tell():
    """There the recorder's own frames fail and an unrecorded call's do not: a forward that recursed to the edge first
    could tell the calls apart."""
    found = run('''
        x, y = torch.arange(8.0), torch.empty(8)

        def room(n=0):
            try:
                return room(n + 1)
            except RecursionError:
                return n

        def at(k):
            return at(k - 1) if k else torch.zeros(1)

        def fn(x):
            at(room() - 20)
            scale[(1,)](x, y, 8, 2.0, B=8)
            return y
        record(fn, [x])
    ''')
    assert found["trace"]["watching"] == [
        "an operator run within 100 frames of the recursion limit (where the recorder's own frames fail)"]


def test_a_numeric_flag_set_around_an_operator_and_put_back_is_recorded_where_the_operator_runs():
    got = run('''
        from agent.harness.worker.trusted import numeric_flags
        tracker.flags = numeric_flags()
        cudnn, w = torch.backends.cudnn, torch.ones(4, 4, 1)
        def fwd(x):
            cudnn.benchmark = True                # where the convolution runs: faster than the baseline's
            y = torch.nn.functional.conv1d(x, w)
            cudnn.benchmark = False               # put back: nothing to see after the call
            out = torch.empty(4, 8)
            scale[(4,)](y.reshape(-1), out, 32, 1.0, B=8)
            return out
        record(fwd, [torch.ones(1, 4, 8)])
        def honest(x):
            out = torch.empty(4, 8)
            scale[(4,)](x.reshape(-1), out, 32, 1.0, B=8)
            return out
        record(honest, [torch.ones(1, 4, 8)])
    ''', last=2)
    assert got[0]["trace"]["flags"] == ["cudnn.benchmark False -> True at aten.convolution"]
    assert got[1]["trace"]["flags"] == []


# ---------------------------------------------------------------- issue 34: what a launch stored, destroyed, measured


def test_a_store_of_the_bytes_a_buffer_already_held_is_a_write():
    """A saturated output equal, byte for byte, to what the buffer held after the previous call; zeros stored into
    torch.zeros: no byte changes, yet the launch wrote them (was: no write seen, "not written by any Triton kernel")."""
    got = run('''
        out = torch.full((8,), 2.0)
        def fwd(x):
            scale[(1,)](x, out, 8, 2.0, B=8)   # 1.0 * 2.0 into a buffer of 2.0s
            return out
        record(fwd, [torch.ones(8)])
    ''')
    [launch] = got["trace"]["launches"]
    assert launch["written"] == [{"id": got["trace"]["outputs"][0], "lo": 0, "hi": 32, "bytes": 32}]


def test_an_ablated_call_sees_nan_where_each_launch_stored_and_the_stores_come_back_after():
    got = run('''
        keep = torch.zeros(8)
        def fwd(x):
            y = torch.empty(8)
            scale[(1,)](x, y, 8, 3.0, B=8)            # y = 3x, destroyed as the launch returns
            scale[(1,)](x, keep, 4, 0.0, B=8)         # a workspace the kernel zeroes (first half): kept across calls
            return y + 1.0, (y + 1.0).isnan().all().item(), keep.isnan().sum().item()
        x = torch.ones(8)
        tracker.begin(True, [x], ablate=True)
        with tracker.dispatch_mode():
            out, all_nan, keep_nan = fwd(x)
        tracker.end([out])
        tracker.restore()
        print(json.dumps({"all_nan": all_nan, "keep_nan": keep_nan, "keep": keep.tolist(), "x": x.tolist()}))
    ''')
    assert got["all_nan"] and got["keep_nan"] == 4  # exactly the four elements stored, nothing else
    assert got["keep"] == [0.0] * 8 and got["x"] == [1.0] * 8  # put back: the state a plain call leaves


def test_traffic_counts_writes_past_the_returned_view_and_every_reload_of_a_stored_location():
    got = run('''
        @triton.jit
        def park(x, buf, n, B: tl.constexpr):
            o = tl.arange(0, B)
            tl.store(buf + n + o, tl.load(x + o, mask=o < n), mask=o < n)   # parked past the returned view
            v = tl.load(buf + n + o, mask=o < n, other=0.0)                  # read back in the same launch
            tl.store(buf + tl.arange(0, 1), tl.sum(v, axis=0) + tl.zeros((1,), dtype=tl.float32))
        def fwd(x):
            buf = torch.empty(16)
            park[(1,)](x, buf, 8, B=8)
            park[(1,)](x, buf, 8, B=8)   # again: the parked bytes are counted once, every reload each time
            return buf[:1]
        record(fwd, [torch.ones(8)])
    ''')
    trace = got["trace"]
    assert trace["measured"]
    [traffic] = trace["traffic"]
    assert traffic["id"] == trace["outputs"][0] and traffic["written"] == 32  # the parked bytes; the returned 4 are not
    assert traffic["reloaded"] == 2 * 32


def test_pytorch_reading_the_inputs_memory_through_another_storage_counts_as_the_data():
    """An alias through DLPack (another storage object, one element in) and a storage resize_ moved: the recorder
    linked neither to the input; what it compares now is the memory they reach."""
    got = run('''
        def fwd(x):
            flat = x.view(-1)
            alias = torch.from_dlpack(flat[1::6]).as_strided((7,), (1,), 0)   # x[1:], at another address
            a = alias.sum()
            x.view(-1).resize_(64)                                             # x's storage moves
            b = (x * 2.0).sum()
            out = torch.empty(1)
            scale[(1,)](out, out, 1, 1.0, B=1)
            return out + a * 0 + b * 0
        record(fwd, [torch.ones(8)])
    ''')
    ops = {op["name"]: op for op in got["trace"]["ops"]}
    assert ops["sum"]["data_bytes"] == 7 * 4 + 8 * 4 and ops["mul"]["data_bytes"] >= 8 * 4
