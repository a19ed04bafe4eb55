"""The run-time rules, judged in the parent from what the candidate's worker recorded (agent.harness.trace): the
rules are checked where they happen, on what each launch wrote and each operator read, not on names in the source.

Every stage:
- every forward call launches Triton kernels, and every returned tensor comes from them (a Triton launch wrote it);
- a launch is given tensors and plain values, nothing else Triton would take for a pointer (agent.harness.trace);
- nothing tells recorded calls from the others: no operator lets the host watch the GPU's progress (pinned memory,
  copies to the host that do not wait), and no tensor is of a class the candidate made (its dispatch would run
  inside the recorder's);
- PyTorch computes on the data (what derives from the forward's inputs) at most a small fraction of the forward's
  largest tensor (operators.toml's "compute" kind, summed over the forward): a decoy kernel beside torch.mean,
  torch.ops.aten, or the reference Model itself is refused; preparing weights and constants is not the data;
- the problem's heavy layers may stay in PyTorch, fed no more than the problem's own Model feeds them, counted by
  family (operators.toml: a Linear run as mm plus a bias add is the Model's matmul, whatever the call's name), and
  producing as much as the Model's do, call by call (each call returns per byte it reads what the Model's calls
  return): the allowance is for the Model's own layer, not for any work spelled as one (a depthwise convolution with
  whole-image kernels is a global reduction; it reads what the Model's layer reads, and a padded dummy beside it can
  make up the family's output);
- the allowances scale with the problem's largest tensor (the reference's), not with buffers the candidate allocates.
A stage may add (StageRules.max_intermediate_write, memory-fusion): no Triton kernel writes more than a fraction
of the largest tensor to anything but the returned tensor, and no kernel reads back a large buffer another wrote.
One buffer larger than that is not an intermediate of the fused ops: an operand a kernel prepared for a heavy layer
that stays in PyTorch (the convolution's input and weight copied to channels-last, as torch.compile does). It is
allowed when the heavy layers are its only readers after the write (no Triton kernel, no other PyTorch operator),
their family runs no more often than in the Model, and it is no larger than what the Model feeds that family.
"""

from __future__ import annotations

from agent.harness.job import Op, Span, Trace, TrialRecord
from agent.harness.settings import settings
from agent.harness.trace import operator_kinds
from agent.schema import StageRules


def _mb(n: int) -> str:
    return f"{n / (1 << 20):.2f} MB" if n >= 1 << 16 else f"{n / 1024:.1f} KB"


def _where(t: TrialRecord) -> str:
    return f"size {t.size}, {t.distribution} inputs, {t.buffer}"


def _largest(trace: Trace) -> int:
    sizes = [s.bytes for s in trace.storages] + [op.largest_bytes for op in trace.ops]
    return max(sizes, default=0)


def every_call(trials: list[TrialRecord]) -> str | None:
    """Launches on every call, and the returned tensors handed to a launch."""
    for t in trials:
        if t.launches == 0:
            return (f"forward launched no Triton kernel ({_where(t)}): the candidate's kernels must do the work on "
                    "every call, not once in __init__ or beside a PyTorch forward")
        if not t.output_launched and t.output_shapes:
            return (f"the tensor forward returned ({_where(t)}) was never given to a Triton kernel: it was computed "
                    "by PyTorch")
    return None


def traced(trial: TrialRecord, reference: Trace | None, rules: StageRules, zero_output: bool = False) -> str | None:
    """The rules on one traced forward (the reference's trace of the same call bounds its heavy layers).

    `zero_output`: every returned tensor is all zeros. A write is seen as changed bytes, so a kernel that stores
    zeros into a zeroed buffer (an atomic_add accumulator; KernelBench #23's numerically-zero mean) leaves none; and
    zeros carry nothing PyTorch could have computed for the kernels (an answer can store them into torch.empty)."""
    trace = trial.trace
    if trace is None:
        return None
    cfg = settings().rules
    # The allowances scale with the problem's largest tensor, never with the candidate's own: an empty buffer of any
    # size costs nothing to allocate, and would otherwise buy room for PyTorch's work or for an intermediate.
    big = min(_largest(trace), _largest(reference)) if reference is not None else _largest(trace)
    if trace.watching:
        return (f"the forward used {', '.join(sorted(set(trace.watching)))} ({_where(trial)}): each tells the calls "
                "the harness records from the others (pinned memory or a copy to the host that does not wait shows "
                "whether the GPU has finished; a tensor subclass's dispatch runs deeper inside the recorder)")
    if trace.flags:
        return (f"the forward changed PyTorch's backend flags while it ran ({'; '.join(trace.flags)}; {_where(trial)}): "
                "results and timings use the defaults, as the baseline's do (put back before it returned, a flag is "
                "read where each operator runs)")
    for launch in trace.launches:
        if launch.foreign:
            return (f"kernel `{launch.kernel}` was given {', '.join(sorted(set(launch.foreign)))} ({_where(trial)}): "
                    "a launch's arguments are tensors and plain values; an object Triton takes for a pointer runs "
                    "its own code inside the launch, where no operator is recorded, and hands the kernel memory "
                    "nobody checks")
    storages = {s.id: s for s in trace.storages}
    written = {w.id for launch in trace.launches for w in launch.written}
    for out in trace.outputs:
        if out not in written and not zero_output:
            return (f"the returned tensor ({_where(trial)}) was not written by any Triton kernel: PyTorch computed it "
                    "and the kernels did not")
    compute = [op for op in trace.ops if op.kind == "compute" and op.data_bytes]
    total = sum(op.data_bytes for op in compute)
    if total > cfg.pytorch_compute * big:
        top = sorted(compute, key=lambda o: -o.data_bytes)[:3]
        ops = ", ".join(f"aten.{o.name} x{o.calls} on {_mb(o.data_bytes)}" for o in top)
        return (f"PyTorch computed over {_mb(total)} of this forward ({ops}; the largest tensor is {_mb(big)}): the "
                "work must be done in Triton kernels, PyTorch may only allocate, reshape and copy")
    ref_heavy = _families(reference.ops if reference else [])
    ref_out = _heavy_out(reference.ops if reference else [])
    mine_out = _heavy_out(trace.ops)
    for family, (names, calls, in_bytes) in _families(trace.ops).items():
        allowed = cfg.heavy_factor * ref_heavy.get(family, ([], 0, 0))[2] + cfg.heavy_slack_bytes
        ops = ", ".join(f"aten.{n}" for n in names)
        if in_bytes > allowed:
            theirs = f"the problem's Model feeds its {family} layers {_mb(ref_heavy[family][2])}" \
                if family in ref_heavy else f"the problem's Model does not run it: no {family} layer"
            return (f"PyTorch runs {ops} on {_mb(in_bytes)} ({theirs}): new work in PyTorch is not an "
                    "answer, write it in Triton")
        thin = _thin_call(family, trace.ops, reference.ops if reference else [])
        if thin:
            return thin
        least = ref_out.get(family, 0) / cfg.heavy_factor - cfg.heavy_slack_bytes
        if mine_out.get(family, 0) < least:
            return (f"PyTorch's {ops} returns {_mb(mine_out.get(family, 0))} where the problem's Model's {family} "
                    f"layers return {_mb(ref_out[family])}: that is not the Model's layer but other work spelled as "
                    "one (a reduction?); only the Model's own heavy layers may stay in PyTorch, write the rest in "
                    "Triton")
    if rules.max_intermediate_write is not None:
        return _intermediates(trial, trace, big, rules, storages, ref_heavy)
    return None


def _families(ops: list[Op]) -> dict[str, tuple[list[str], int, int]]:
    """The heavy layers by family: (operator names, calls, bytes fed)."""
    kinds = operator_kinds()
    out: dict[str, tuple[list[str], int, int]] = {}
    for op in ops:
        if op.kind == "heavy":
            names, calls, in_bytes = out.get(kinds.family(op.name), ([], 0, 0))
            out[kinds.family(op.name)] = ([*names, op.name], calls + op.calls, in_bytes + op.in_bytes)
    return out


def _thin_call(family: str, mine: list[Op], theirs: list[Op]) -> str | None:
    """Each call of a heavy layer must be the Model's layer, or a piece of it: it returns, per byte it reads, about
    what the Model's calls of that family return (a batch split re-reads the weights: heavy_factor covers it). A
    convolution spent on a reduction returns almost nothing per byte, whatever other call beside it (a padded dummy)
    makes the family's totals look like the Model's."""
    kinds, cfg = operator_kinds(), settings().rules
    ref = [op.least_yield for op in theirs if op.kind == "heavy" and kinds.family(op.name) == family
           and op.least_yield is not None]
    if not ref:
        return None
    for op in mine:
        if op.kind == "heavy" and kinds.family(op.name) == family and op.least_yield is not None and \
                op.least_yield * cfg.heavy_factor < min(ref):
            return (f"a call of PyTorch's aten.{op.name} returns {op.least_yield:.3g} bytes per byte it reads where "
                    f"the problem's Model's {family} layers return {min(ref):.3g}: that is not the Model's layer but "
                    "other work spelled as one (a reduction?); only the Model's own heavy layers may stay in PyTorch, "
                    "write the rest in Triton")
    return None


def _heavy_out(ops: list[Op]) -> dict[str, int]:
    """What the heavy layers return, by family (bytes, over every call)."""
    kinds = operator_kinds()
    out: dict[str, int] = {}
    for op in ops:
        if op.kind == "heavy":
            out[kinds.family(op.name)] = out.get(kinds.family(op.name), 0) + op.out_bytes
    return out


def _operand_refused(i: int, w: Span, trace: Trace, ref_heavy: dict[str, tuple[list[str], int, int]]) -> str | None:
    """Why the buffer launch i wrote is not an operand prepared for a heavy layer (None: it is one)."""
    kinds, cfg = operator_kinds(), settings().rules
    readers = [r for r in trace.reads if r.after > i and w.id in r.storages]
    other = next((r for r in readers if r.kind != "heavy"), None)
    if other is not None:
        return f"aten.{other.op} reads it afterwards"
    if not readers:
        return "no heavy layer reads it afterwards"
    mine = _families(trace.ops)
    for family in dict.fromkeys(kinds.family(r.op) for r in readers):
        _, ref_calls, ref_bytes = ref_heavy.get(family, ([], 0, 0))
        if mine[family][1] > ref_calls:
            return f"the {family} layers run {mine[family][1]} times, the problem's Model {ref_calls}"
        if w.hi - w.lo > cfg.heavy_factor * ref_bytes:
            return f"it is larger than what the problem's Model feeds its {family} layers ({_mb(ref_bytes)})"
    return None


def _intermediates(trial: TrialRecord, trace: Trace, big: int, rules: StageRules, storages: dict,
                   ref_heavy: dict[str, tuple[list[str], int, int]]) -> str | None:
    limit = (rules.max_intermediate_write or 0.0) * big
    outputs = set(trace.outputs)
    why = f" ({rules.intermediate_reason})" if rules.intermediate_reason else ""
    for i, launch in enumerate(trace.launches):
        for w in launch.written:
            if w.id not in outputs and w.hi - w.lo > limit:
                refused = _operand_refused(i, w, trace, ref_heavy)
                if refused is None:
                    continue  # the operand of a heavy layer: the round trip below still applies to it
                shape = "x".join(map(str, storages[w.id].shape)) if w.id in storages else "?"
                return (f"kernel `{launch.kernel}` wrote {_mb(w.hi - w.lo)} to a buffer that is not the output (shape "
                        f"{shape}); this stage allows at most {_mb(int(limit))} there{why}; nor is it an operand "
                        f"prepared for a heavy layer left in PyTorch: {refused}")
    for i, first in enumerate(trace.launches):
        for w in first.written:
            if w.hi - w.lo <= limit:
                continue
            for later in trace.launches[i + 1:]:
                if any(a.id == w.id and a.lo < w.hi and w.lo < a.hi for a in later.args):
                    return (f"kernel `{later.kernel}` reads the {_mb(w.hi - w.lo)} that kernel `{first.kernel}` wrote: "
                            f"an intermediate round trip through global memory{why}")
    return None


def judge(trials: list[TrialRecord], reference: dict[int, Trace], rules: StageRules,
          zero_outputs: frozenset[int] = frozenset()) -> str | None:
    """The first run-time rule the recorded calls break, as one message for the verdict; None when none.
    `zero_outputs`: the trials whose returned tensors are all zeros (see traced)."""
    found = every_call(trials)
    if found:
        return found
    for t in trials:
        if t.trace is not None:
            found = traced(t, reference.get(t.id), rules, t.id in zero_outputs)
            if found:
                return found
    return None


def floor_ms(input_bytes: int, bandwidth_gbs: float) -> float:
    """The least device time a correct forward can take: its inputs and weights read once at peak bandwidth."""
    return input_bytes / (bandwidth_gbs * 1e9) * 1e3 * settings().rules.floor_factor
