"""The run-time rules, judged in the parent from what the candidate's worker recorded (agent.harness.trace): the
rules are checked where they happen, on what each launch wrote and each operator read, not on names in the source.

Every stage:
- every forward call launches Triton kernels, and every returned tensor comes from them (a Triton launch wrote it);
- PyTorch computes on the data (what derives from the forward's inputs) at most a small fraction of the forward's
  largest tensor (operators.toml's "compute" kind, summed over the forward): a decoy kernel beside torch.mean,
  torch.ops.aten, or the reference Model itself is refused; preparing weights and constants is not the data;
- the problem's heavy layers may stay in PyTorch, fed no more than the problem's own Model feeds them.
A stage may add (StageRules.max_intermediate_write, memory-fusion): no Triton kernel writes more than a fraction
of the largest tensor to anything but the returned tensor, and no kernel reads back a large buffer another wrote.
"""

from __future__ import annotations

from agent.harness.job import Trace, TrialRecord
from agent.harness.settings import settings
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


def traced(trial: TrialRecord, reference: Trace | None, rules: StageRules) -> str | None:
    """The rules on one traced forward (the reference's trace of the same call bounds its heavy layers)."""
    trace = trial.trace
    if trace is None:
        return None
    cfg = settings().rules
    big = _largest(trace)
    storages = {s.id: s for s in trace.storages}
    written = {w.id for launch in trace.launches for w in launch.written}
    for out in trace.outputs:
        if out not in written:
            return (f"the returned tensor ({_where(trial)}) was not written by any Triton kernel: PyTorch computed it "
                    "and the kernels did not")
    compute = [op for op in trace.ops if op.kind == "compute" and op.data_bytes]
    total = sum(op.data_bytes for op in compute)
    if total > cfg.pytorch_compute * big:
        top = sorted(compute, key=lambda o: -o.data_bytes)[:3]
        ops = ", ".join(f"aten.{o.name} x{o.calls} on {_mb(o.data_bytes)}" for o in top)
        return (f"PyTorch computed over {_mb(total)} of this forward ({ops}; the largest tensor is {_mb(big)}): the "
                "work must be done in Triton kernels, PyTorch may only allocate, reshape and copy")
    ref_heavy = {op.name: op.in_bytes for op in (reference.ops if reference else []) if op.kind == "heavy"}
    for op in trace.ops:
        if op.kind == "heavy":
            allowed = cfg.heavy_factor * ref_heavy.get(op.name, 0) + cfg.heavy_slack_bytes
            if op.in_bytes > allowed:
                theirs = f"the problem's Model feeds it {_mb(ref_heavy[op.name])}" if op.name in ref_heavy else \
                    "the problem's Model does not run it"
                return (f"PyTorch runs aten.{op.name} on {_mb(op.in_bytes)} ({theirs}): new work in PyTorch is not an "
                        "answer, write it in Triton")
    if rules.max_intermediate_write is not None:
        return _intermediates(trial, trace, big, rules, storages)
    return None


def _intermediates(trial: TrialRecord, trace: Trace, big: int, rules: StageRules, storages: dict) -> str | None:
    limit = (rules.max_intermediate_write or 0.0) * big
    outputs = set(trace.outputs)
    why = f" ({rules.intermediate_reason})" if rules.intermediate_reason else ""
    for launch in trace.launches:
        for w in launch.written:
            if w.id not in outputs and w.hi - w.lo > limit:
                shape = "x".join(map(str, storages[w.id].shape)) if w.id in storages else "?"
                return (f"kernel `{launch.kernel}` wrote {_mb(w.hi - w.lo)} to a buffer that is not the output (shape "
                        f"{shape}); this stage allows at most {_mb(int(limit))} there{why}")
    for i, first in enumerate(trace.launches):
        for w in first.written:
            if w.hi - w.lo <= limit:
                continue
            for later in trace.launches[i + 1:]:
                if any(a.id == w.id and a.lo < w.hi and w.lo < a.hi for a in later.args):
                    return (f"kernel `{later.kernel}` reads the {_mb(w.hi - w.lo)} that kernel `{first.kernel}` wrote: "
                            f"an intermediate round trip through global memory{why}")
    return None


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
