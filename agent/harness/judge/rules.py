"""The run-time rules, judged in the parent from what the candidate's worker recorded (agent.harness.worker.trace): the
rules are checked where they happen, on what each launch wrote and each operator read, not on names in the source.

Every stage:
- every forward call launches Triton kernels, and they do the work: in one call, what each launch wrote is destroyed
  as it returns, and the output must then be wrong (agent.harness.worker.ablation, judged in agent.harness.judge.verdict);
- a launch is given tensors and plain values, nothing else Triton would take for a pointer (agent.harness.worker.trace);
- nothing tells recorded calls from the others: no operator lets the host watch the GPU's progress (pinned memory,
  copies to the host that do not wait), and no tensor is of a class the candidate made (its dispatch would run
  inside the recorder's);
- PyTorch computes on the data (what derives from the forward's inputs, and any memory the inputs occupy however it
  is reached) at most a small fraction of the forward's largest tensor (operators.toml's "compute" kind, and heavy
  layers of a family the problem's Model does not run, summed over the forward: the bytes of the data they read): a
  decoy kernel beside torch.mean, torch.ops.aten, a torch.mm doing the reduction, or the reference Model itself is
  refused; preparing weights and constants is not the data;
- the problem's heavy layers may stay in PyTorch, fed no more than the problem's own Model feeds them, counted by
  family (operators.toml: a Linear run as mm plus a bias add is the Model's matmul, whatever the call's name), and
  producing as much as the Model's do, call by call (each call returns per byte it reads what the Model's calls
  return): the allowance is for the Model's own layer, not for any work spelled as one (a depthwise convolution with
  whole-image kernels is a global reduction; it reads what the Model's layer reads, and a padded dummy beside it can
  make up the family's output);
- the allowances scale with the problem's largest tensor (the reference's), not with buffers the candidate allocates.
A stage may add (StageRules.max_intermediate_write, memory-fusion): the call's Triton kernels write no more than a
fraction of the largest tensor to anything but the returned tensors (summed over the launches: sixteen launches of a
sixteenth each write the whole), and read back no more than that of what they wrote (see _round_trip_refused).
One buffer larger than that is not an intermediate of the fused ops: an operand a kernel prepared for a heavy layer
that stays in PyTorch (the convolution's input and weight copied to channels-last, as torch.compile does). It is
allowed when the heavy layers are its only readers after the write (no Triton kernel, no other PyTorch operator),
their family runs no more often than in the Model, and it is no larger than what the Model feeds that family.
"""

from __future__ import annotations

from agent.harness.job import Op, Span, Trace, TrialRecord
from agent.harness.settings import settings
from agent.harness.worker.trace import operator_kinds
from agent.schema import StageRules


def _mb(n: int) -> str:
    return f"{n / (1 << 20):.2f} MB" if n >= 1 << 16 else f"{n / 1024:.1f} KB"


def _where(t: TrialRecord) -> str:
    return f"size {t.size}, {t.distribution} inputs, {t.buffer}"


def _largest(trace: Trace) -> int:
    sizes = [s.bytes for s in trace.storages] + [op.largest_bytes for op in trace.ops]
    return max(sizes, default=0)


def _scale(trace: Trace) -> int:
    """The problem's size: its largest tensor, or all the data the forward is handed where that is more (a loss's
    logits and targets; three inputs of a triplet loss): a finishing mean of per-row results reads 1/C of the logits,
    which CPU sizes (C = 7) would otherwise put over the share."""
    by_id = {s.id: s.bytes for s in trace.storages}
    return max(_largest(trace), sum(by_id.get(i, 0) for i in set(trace.inputs)))


def every_call(trials: list[TrialRecord]) -> str | None:
    """Launches on every call. (Whether they did the work is the ablated call's question, not where the returned
    tensor came from: small operators after the kernels are honest.)"""
    for t in trials:
        # an output with no elements needs no kernel (a batch of 1 trimmed by [:-1]: an honest answer skips the launch)
        empty = bool(t.output_shapes) and all(0 in shape for shape in t.output_shapes)
        if t.launches == 0 and not empty:
            return (f"forward launched no Triton kernel ({_where(t)}): the candidate's kernels must do the work on "
                    "every call, not once in __init__ or beside a PyTorch forward [every-call]")
    return None


def traced(trial: TrialRecord, reference: Trace | None, rules: StageRules) -> str | None:
    """The rules on one traced forward (the reference's trace of the same call bounds its heavy layers)."""
    trace = trial.trace
    if trace is None:
        return None
    cfg = settings().rules
    # The allowances scale with the problem's largest tensor, never with the candidate's own: an empty buffer of any
    # size costs nothing to allocate, and would otherwise buy room for PyTorch's work or for an intermediate.
    big = min(_scale(trace), _scale(reference)) if reference is not None else _scale(trace)
    if trace.watching:
        return (f"the forward used {', '.join(sorted(set(trace.watching)))} ({_where(trial)}): each tells the calls "
                "the harness records from the others (pinned memory or a copy to the host that does not wait shows "
                "whether the GPU has finished; a tensor subclass's dispatch runs deeper inside the recorder) [watched-calls]")
    if trace.flags:
        return (f"the forward changed PyTorch's backend flags while it ran ({'; '.join(trace.flags)}; {_where(trial)}): "
                "results and timings use the defaults, as the baseline's do (put back before it returned, a flag is "
                "read where each operator runs) [flags-while-running]")
    for launch in trace.launches:
        if launch.foreign:
            return (f"kernel `{launch.kernel}` was given {', '.join(sorted(set(launch.foreign)))} ({_where(trial)}): "
                    "a launch's arguments are tensors and plain values; an object Triton takes for a pointer runs "
                    "its own code inside the launch, where no operator is recorded, and hands the kernel memory "
                    "nobody checks [launch-arguments]")
    storages = {s.id: s for s in trace.storages}
    ref_heavy = _families(reference.ops if reference else [])
    kinds = operator_kinds()
    # a heavy layer of a family the Model does not run is new work, not the Model's layer: PyTorch's share
    compute = [op for op in trace.ops if op.data_bytes and (op.kind == "compute" or (
        op.kind == "heavy" and reference is not None and kinds.family(op.name) not in ref_heavy))]
    total = sum(op.data_bytes for op in compute)
    if total > cfg.pytorch_compute * big:
        top = sorted(compute, key=lambda o: -o.data_bytes)[:3]
        ops = ", ".join(f"aten.{o.name} x{o.calls} on {_mb(o.data_bytes)}" for o in top)
        return (f"PyTorch computed over {_mb(total)} of this forward ({ops}; the largest tensor is {_mb(big)}): the "
                "work must be done in Triton kernels, PyTorch may only allocate, reshape and copy [work-share]")
    ref_out = _heavy_out(reference.ops if reference else [])
    mine_out = _heavy_out(trace.ops)
    slack = cfg.heavy_slack * big  # the problem's scale, never a byte count (64 KB held all the data at CPU sizes)
    for family, (names, calls, in_bytes) in _families(trace.ops).items():
        if reference is not None and family not in ref_heavy:
            continue  # counted with PyTorch's compute above
        allowed = cfg.heavy_factor * ref_heavy.get(family, ([], 0, 0))[2] + slack
        ops = ", ".join(f"aten.{n}" for n in names)
        thin = _thin_call(family, trace.ops, reference.ops if reference else [])
        if thin:  # first: the more telling of the two where both hold
            return thin
        if in_bytes > allowed:
            theirs = f"the problem's Model feeds its {family} layers {_mb(ref_heavy[family][2])}" \
                if family in ref_heavy else f"the problem's Model does not run it: no {family} layer"
            return (f"PyTorch runs {ops} on {_mb(in_bytes)} ({theirs}): new work in PyTorch is not an "
                    "answer, write it in Triton [heavy-layers]")
        # the floor follows what the answer feeds the family, at the Model's least yield: one of the Model's two
        # convolutions kept (a depthwise-separable pair, the other in Triton) returns less than both together
        yields = [op.least_yield for op in (reference.ops if reference else []) if op.kind == "heavy" and
                  kinds.family(op.name) == family and op.least_yield is not None]
        fed = in_bytes * min(yields) if yields else ref_out.get(family, 0)
        least = min(ref_out.get(family, 0), fed) / cfg.heavy_factor - slack
        if mine_out.get(family, 0) < least:
            return (f"PyTorch's {ops} returns {_mb(mine_out.get(family, 0))} where the problem's Model's {family} "
                    f"layers return {_mb(ref_out[family])}: that is not the Model's layer but other work spelled as "
                    "one (a reduction?); only the Model's own heavy layers may stay in PyTorch, write the rest in "
                    "Triton [heavy-layers]")
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
                    "write the rest in Triton [heavy-layers]")
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
            if w.id not in outputs and w.size > limit:
                refused = _operand_refused(i, w, trace, ref_heavy)
                if refused is None:
                    continue  # the operand of a heavy layer: the round trip below still applies to it
                shape = "x".join(map(str, storages[w.id].shape)) if w.id in storages else "?"
                return (f"kernel `{launch.kernel}` wrote {_mb(w.size)} to a buffer that is not the output (shape "
                        f"{shape}); this stage allows at most {_mb(int(limit))} there{why}; nor is it an operand "
                        f"prepared for a heavy layer left in PyTorch: {refused} [stage-intermediate]")
    for i, first in enumerate(trace.launches):
        for w in first.written:
            if w.size <= limit:
                continue
            for later in trace.launches[i + 1:]:
                if any(a.id == w.id and a.lo < w.hi and w.lo < a.hi for a in later.args):
                    return (f"kernel `{later.kernel}` reads the {_mb(w.hi - w.lo)} that kernel `{first.kernel}` wrote: "
                            f"an intermediate round trip through global memory{why} [stage-intermediate]")
    return _summed_refused(trace, limit, storages, ref_heavy, why)


def _operands(trace: Trace, ref_heavy: dict[str, tuple[list[str], int, int]]) -> set[int]:
    """The storages a launch wrote as an operand of a heavy layer left in PyTorch (see _operand_refused)."""
    return {w.id for i, launch in enumerate(trace.launches) for w in launch.written
            if _operand_refused(i, w, trace, ref_heavy) is None}


def _outside(trace: Trace, operands: set[int]) -> dict[int, int]:
    """Per storage, the bytes the call's launches wrote outside the returned tensors, each byte once: measured where
    every store was recorded, else the union of each storage's changed spans; either way the returned tensors' own
    storages count beyond the bytes the returned views cover (an intermediate parked past the output's end)."""
    if trace.measured:
        return {t.id: t.written for t in trace.traffic if t.written and t.id not in operands}
    spans: dict[int, list[tuple[int, int]]] = {}
    for launch in trace.launches:
        for w in launch.written:
            if w.id not in operands:
                spans.setdefault(w.id, []).append((w.lo, w.hi))
    out = {}
    for sid, parts in spans.items():
        covered = _union(parts)
        if sid in trace.outputs:
            if not trace.output_spans:  # a record from before output_spans: the whole storage was the output
                continue
            covered -= _overlap(_merged(parts), _merged([(e.lo, e.hi) for e in trace.output_spans if e.id == sid]))
        if covered:
            out[sid] = covered
    return out


def _merged(parts: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Disjoint, sorted intervals covering the same bytes."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(parts):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        elif hi > lo:
            out.append((lo, hi))
    return out


def _union(parts: list[tuple[int, int]]) -> int:
    return sum(hi - lo for lo, hi in _merged(parts))


def _overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Bytes in both of two sets of disjoint intervals."""
    return sum(max(0, min(h1, h2) - max(l1, l2)) for l1, h1 in a for l2, h2 in b)


def _summed_refused(trace: Trace, limit: float, storages: dict, ref_heavy: dict[str, tuple[list[str], int, int]],
                    why: str) -> str | None:
    """Memory-fusion's prescription on the call as a whole: what its launches wrote outside the output, and (where
    every load was recorded) what they read back of what they had written, each at most the stage's limit. Split
    into sixteen launches of a sixteenth, or parked in the returned tensor's own storage beyond its extent and read
    back within one launch, an intermediate is as large as ever.

    Refused, not only reported, above the limit: no honest fused answer comes near it (a split reduction's partials,
    an accumulator reloaded once per tile, the last block reading the others' sums: a few bytes per output element,
    against an eighth of the largest tensor), while the prescription evaded costs the stage its meaning. Below the
    limit the bytes are reported in the verdict and the next prompt (round_trips)."""
    outside = _outside(trace, _operands(trace, ref_heavy))
    total = sum(outside.values())
    if total > limit:
        top = max(outside, key=lambda k: outside[k])
        shape = "x".join(map(str, storages[top].shape)) if top in storages else "?"
        writers = sum(1 for launch in trace.launches if any(w.id in outside for w in launch.written))
        return (f"the kernels wrote {_mb(total)} outside the returned tensor in {writers} launches (the most, "
                f"{_mb(outside[top])}, to a buffer of shape {shape}); this stage allows at most {_mb(int(limit))} "
                f"there, summed over the call{why} [stage-intermediate]")
    reloaded = sum(t.reloaded for t in trace.traffic)
    if trace.measured and reloaded > limit:
        return (f"the kernels read back {_mb(reloaded)} of what they had written earlier in the call (a round trip "
                f"through global memory, every load recorded); this stage allows at most {_mb(int(limit))}{why} "
                "[stage-intermediate]")
    return None


def round_trips(trials: list[TrialRecord], rules: StageRules) -> str:
    """For the verdict and the next prompt, where the stage prescribes no intermediate round trip: the most any
    traced call's kernels wrote outside the output and read back of what they wrote ('' where none did)."""
    if rules.max_intermediate_write is None:
        return ""
    worst = (0, 0)
    for t in trials:
        if t.trace is not None and t.trace.measured:
            worst = max(worst, (sum(x.written for x in t.trace.traffic), sum(x.reloaded for x in t.trace.traffic)))
    if worst == (0, 0):
        return ""
    return (f"memory traffic of the kernels: {_mb(worst[0])} written outside the output, {_mb(worst[1])} read back "
            "after being written (the most in one call; fused, both are 0)")


def judge(trials: list[TrialRecord], reference: dict[int, Trace], rules: StageRules) -> str | None:
    """The first run-time rule the recorded calls break, as one message for the verdict; None when none."""
    found = every_call(trials)
    if found:
        return found
    for t in trials:
        if t.trace is not None:
            found = traced(t, reference.get(t.id), rules)
            if found:
                return found
    return None


def floor_ms(input_bytes: int, bandwidth_gbs: float) -> float:
    """The least device time a correct forward can take: its inputs and weights read once at peak bandwidth."""
    return input_bytes / (bandwidth_gbs * 1e9) * 1e3 * settings().rules.floor_factor
