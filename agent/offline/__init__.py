"""The offline proposer: deterministic, no network, no LLM. It reads the ncu metrics of the current best and
rewrites the kernel from templates (agent/data/kernels/*.py.j2).

It knows one problem family well: a PyTorch op producing an N, C, spatial tensor (a convolution, ...), then
elementwise ops (scale, bias, activations) and a global average pool over the spatial dims: `gap44` and its
kin; after the pool, optionally, a reduction over the channels (logsumexp, sum, amax, ...) and per-row ops, which a
second, tiny kernel writes (`conv2d_gap_bias_lse`, KernelBench #42). `recognise()` reads the problem's Model with
torch.fx (traced on the meta device at the timed size) into a `Plan`; `render()` writes one `Variant` of it as a
complete KernelBench-style ModelNew file:

- `row`: one program per (n, c) row; rows are contiguous, so flat 1D offsets (no div/mod) vectorise;
- `split` / `atomic`: S programs per row (partial sums + a tiny combine kernel, or tl.atomic_add into a zeroed
  fp32 output), for when N*C is small against the SM count;
- `persistent`: a grid of a few programs per SM looping over the rows;
- `algebraic` (the `algebraic` stage, ConvTranspose2d only): the spatial mean of a transposed convolution's
  output in closed form from window sums of its input, so the conv output is never written or read;
- `fused` (an nn.Conv2d producer, groups 1): the convolution itself in the kernel as an implicit GEMM with 3xTF32
  tensor-core products (fp32-accurate), bias and epilogue per element, the mean in registers, so the conv output
  (the largest tensor of these forwards) is never written; partial sums per (n, split, channel) and a combine kernel.
  First where the conv's reduction length Cin*KH*KW is short (FUSED_MAX_K), else last;
- `nhwc` (a zero-padded 2D/3D convolution producer): torch.compile's remedies for the layer left in PyTorch: the
  convolution in channels-last (input and weight converted: cuDNN's fast layout), called without its bias, the bias
  and the epilogue folded into the reduction (mean(conv + b) = mean(conv) + b), which reads the channels-last output
  with coalesced channel vectors, as a split reduction (partials per (n, c), then a small combine kernel) where the
  images and channel blocks are too few for the GPU. First wherever the diagnosis finds the forward's time outside
  its kernels (remedy `library-layout`), and in the memory-fusion stage before any profile.
- `pool` / `pool_fused` (a max-pool with non-overlapping windows before the mean, KernelBench #8 and #96; the only
  families for such a plan): each window's maximum taken as the producer's output is read and summed for the mean,
  the pooled tensor never written; `pool_fused` (an nn.ConvTranspose3d whose stride divides the window) computes the
  transposed conv window by window in the kernel, generating only the taps that reach each window element, so the
  conv output is never written either. First where it applies.

What to try first follows the metrics (a grid small against the SM count or few warps active: more
programs; DRAM near peak: meta-parameter search around the current best); every answer's first line says
what changed and which figures led to it. No variant is proposed twice in a run: the instance remembers what it
emitted, and the run's memory (ProposalContext.memory, whose ideas are the variants' own `Variant.idea()`) says
what any earlier process of the run tried and how it went, so a resumed run goes on where it stopped. The same
observations give the same proposals.

Modules, one job each:
    models     Plan (what the problem computes), Variant (one point of the search), Unsupported
    ops        the op vocabulary (agent/data/kernels/ops.toml) and its lookup tables
    recognise  recognise(): the problem's Model, traced with torch.fx, into a Plan
    planner    the figures an answer cites (Reading), the search space and its walks; what to restructure
               for comes from the findings (agent.diagnosis) the loop hands over
    render     render(): one Variant of a Plan as a ModelNew file, from agent/data/kernels/*.py.j2
    tail       a reduction over the channels after the pool (Plan.rowwise): a second, tiny kernel in that file
    __init__   OfflineProposer, which ranks the variants and keeps the run's state
"""

from __future__ import annotations

import logging
import math

from agent.diagnosis.graph import kinds
from agent.diagnosis.model import Finding
from agent.offline.models import Family, Op, Operand, Plan, Unsupported, Variant
from agent.offline.ops import _ops
from agent.offline.planner import (
    ANCHORS,
    DRAM,
    DURATION,
    GRID,
    SM,
    SMALL_GRID_WAVES,
    SPACE,
    SPLIT_PROGRAMS_PER_SM,
    WARPS,
    FUSED_MAX_K,
    Reading,
    fused_split,
    _around,
    nhwc_split,
    _change,
    _interleave,
    _pow2_at_least,
)
from agent.offline.recognise import recognise
from agent.offline.render import TEMPLATES, render
from agent.memory import MemoryEntry
from agent.protocols import Proposal, ProposalContext
from agent.runconfig import DEFAULT_STAGE
from agent.schema import (
    Answer,
    EvalResult,
    GPUSpec,
    ProblemSpec,
    Profile,
    Usage,
    Verdict,
)

__all__ = [
    "ANCHORS", "DRAM", "DURATION", "GRID", "MODEL", "SM", "SMALL_GRID_WAVES",
    "SPACE", "SPLIT_PROGRAMS_PER_SM", "TEMPLATES", "WARPS", "Family", "OfflineProposer", "Op", "Operand", "Plan",
    "Reading", "Unsupported", "Variant", "recognise", "render",
]

log = logging.getLogger(__name__)

MODEL = "offline"


# ---------------------------------------------------------------- the proposer


def _reason(plan: Plan, v: Variant, figures: str, *, contiguous: bool, outside: bool, sms: int) -> str:
    """Why the offline proposer tries variant `v` of a GAP family, in words with the plan's figures."""
    rows = plan.rows
    if v.family == "row":
        what = f"one program per (n, c) row ({rows} programs), flat contiguous loads, no div/mod"
        what = f"uncoalesced loads: {what}" if contiguous else what
    elif v.family in ("split", "atomic"):
        how = "partial sums + a combine kernel" if v.family == "split" else \
            "tl.atomic_add into a zeroed fp32 output (no tl.store)"
        what = f"split each (n, c) row over {v.split} programs ({rows * v.split} programs), {how}"
    elif v.family == "persistent":
        what = f"persistent grid of {v.split}×{sms} SMs = {min(rows, v.split * sms)} programs looping over {rows} rows"
    elif v.family == "nhwc":
        what = (f"{plan.producer_kind} in channels-last without its bias (torch.compile's layout), bias and "
                f"epilogue folded into the mean, " + ("one launch" if v.split == 1 else
                                                     f"{v.split} programs per (n, channel block) + a combine kernel"))
        what = f"most of the forward is outside the kernels: {what}" if outside else what
    elif v.family == "fused":
        mb = plan.mid_bytes / 1e6
        what = (f"{plan.producer_kind} computed in the kernel (implicit GEMM over K = {plan.conv_k}, 3xTF32 "
                f"tensor-core products, fp32-accurate), bias and epilogue per element, the mean in registers: "
                f"the {mb:.0f} MB conv output is never written or read; {v.split} programs per (n, channels) "
                "+ a combine kernel")
    elif v.family == "pool":
        what = (f"the max-pool's window maxima and their mean in one pass over the conv output (the pooled "
                f"tensor never written), {v.split} programs per (n, c) row + a combine kernel")
    elif v.family == "pool_fused":
        mb = plan.mid_bytes / 1e6
        what = (f"{plan.producer_kind} computed in the kernel window by window inside the max-pool: the "
                f"{mb:.0f} MB conv output is never written or read; only the taps that reach each window "
                "element are generated")
    else:
        what = v.family
    return f"{figures}: {what} ({v.params()})"


class OfflineProposer:
    """Deterministic, metric-driven proposals for the GAP family (see the module docstring)."""

    name = "offline"

    def __init__(self, problem: ProblemSpec, gpu: GPUSpec) -> None:
        self.problem, self.gpu = problem, gpu
        self._plan: Plan | None = None
        self._unsupported: str | None = None
        self._emitted: dict[tuple, str] = {}  # variant key -> code, in proposal order
        self._by_code: dict[str, Variant] = {}
        self._failed: dict[str, int] = {}  # family -> failed candidates
        self._tried: set[tuple] = set()  # variant keys the run's memory holds (earlier processes of the run included)
        self._parent: Variant | None = None  # the parent's variant, as the memory names it
        self._stage = DEFAULT_STAGE
        self._code = ""
        self._profile: Profile | None = None
        self._findings: list[Finding] = []  # agent.diagnosis's reading of the current best: what to restructure for

    # -- the loop's side

    def propose(self, ctx: ProposalContext) -> Proposal:
        """k new variants for the context's state (fewer when the space is spent or the problem is not of a known
        family). The prompt itself is not read: the current best, its metrics and the last results are."""
        self._observe(ctx.stage, ctx.code, ctx.profile, ctx.results)
        self._parent = None
        if ctx.memory:
            self._recall(ctx.memory, ctx.parent)
        self._findings = list(ctx.findings)
        return Proposal(answers=self._propose(ctx.k))

    def _observe(self, stage: str, code: str, profile: Profile | None, results: list[EvalResult]) -> None:
        self._stage, self._code, self._profile = stage, code or "", profile
        for r in results:
            v = self.variant_of(r.code or "")
            if v is not None and r.verdict.failed:
                self._failed[v.family] = self._failed.get(v.family, 0) + 1
                log.info("offline: %s variant %s failed (%s)", v.family, v.params(), r.verdict)

    def _recall(self, memory: list[MemoryEntry], parent: str | None) -> None:
        """What the run tried (all of it: the failures per family are counted from here, not from the last
        round's results), and the parent's variant where the parent is one of ours."""
        plan = self.plan()
        if plan is None:
            return
        known = {v.idea(): v for family in SPACE for v in _around(family, None)}  # type: ignore[arg-type]
        self._failed = {}
        for m in memory:
            v = known.get(m.idea)
            if v is None:
                continue
            self._tried.add(v.key)
            if m.verdict.failed:
                self._failed[v.family] = self._failed.get(v.family, 0) + 1
            if m.candidate == parent:
                self._parent = v

    def _propose(self, k: int) -> list[Answer]:
        plan = self.plan()
        if plan is None:
            log.warning("offline proposer: %s", self._unsupported)
            return []
        answers: list[Answer] = []
        for variant, why in self.ranked(plan):
            if len(answers) == k:
                break
            if variant.key in self._emitted or variant.key in self._tried:
                continue
            code = render(plan, variant, self.gpu)
            self._emitted[variant.key] = code
            self._by_code[code.strip()] = variant
            answers.append(Answer(text=f"{why}\n\n```python\n{code}```\n", model=MODEL, usage=Usage(),
                                  idea=variant.idea()))
        return answers

    def plan(self) -> Plan | None:
        if self._plan is None and self._unsupported is None:
            try:
                self._plan = recognise(self.problem)
            except Unsupported as e:
                self._unsupported = f"{self.problem.name} is not a family it can rewrite: {e}"
        return self._plan

    # -- choosing

    def current(self) -> Variant | None:
        """The current best (the parent whose code the context shows), when it is one of ours."""
        return self.variant_of(self._code) or self._parent

    def variant_of(self, code: str) -> Variant | None:
        """The variant this proposer rendered as `code`, if it did."""
        return self._by_code.get(code.strip())

    def ranked(self, plan: Plan) -> list[tuple[Variant, str]]:
        """Every variant in the order to try it now, each with its one-line reason."""
        sms = self.gpu.sms
        figures = Reading.of(self._profile).figures(sms)
        current = self.current()
        out: list[tuple[Variant, str]] = []
        # The closed form in its own stage, and in any later stage once it is the current best.
        if plan.algebraic and (self._stage == "algebraic" or (current is not None and current.family == "algebraic")):
            mb_in, mb_mid = plan.in_bytes / 1e6, plan.mid_bytes / 1e6
            head = (f"{figures}: algebraic rewrite — the spatial mean of {plan.producer_kind}(x) is bias + "
                    f"sum W·(window sums of x) / (Hout·Wout): read x once ({mb_in:.0f} MB) instead of writing and "
                    f"reading the {mb_mid:.0f} MB conv output")
            anchor = current if current is not None and current.family == "algebraic" else None
            for v in _around("algebraic", anchor):
                out.append((v, f"{head} ({v.params()})" if anchor is None else
                            f"{figures}: tune the algebraic rewrite around the current best — {_change(anchor, v)}"))
        out += self._gap_order(plan, figures, current)
        return out

    def _gap_order(self, plan: Plan, figures: str, current: Variant | None) -> list[tuple[Variant, str]]:
        sms, rows = self.gpu.sms, plan.rows
        # What to restructure for comes from the findings (agent.diagnosis), the same ones the LLM's prompt shows.
        found = kinds(self._findings)  # the causes and the symptoms folded under them
        small = bool(found & {"small-grid", "tail"})
        starved = "low-occupancy" in found
        near_peak = "at-dram-peak" in found
        # loads that waste most of each sector: the flat row kernel (neighbouring threads, neighbouring addresses)
        contiguous = any(f.remedy == "contiguous-loads" for f in self._findings)
        families = self._families(plan)
        # host-bound (the two clocks): one launch per call first; a split reduction's combine kernel goes last
        one_launch = any(f.remedy == "fewer-launches" for f in self._findings)
        # the heavy layer left in PyTorch takes most of the time: its layout and bias first (torch.compile's remedies);
        # so too in memory-fusion before any profile (the layer, not the reduction, is most of these forwards)
        outside = any(f.remedy == "library-layout" for f in self._findings)
        unprofiled = self._profile is None or not self._profile.kernels
        layout_first = "nhwc" in families and (outside or (self._stage == "memory-fusion" and unprofiled))
        if one_launch:
            families = [f for f in families if f != "split"] + [f for f in families if f == "split"]
        split_s = _pow2_at_least(math.ceil(SPLIT_PROGRAMS_PER_SM * sms / max(rows, 1)))

        def reason(v: Variant) -> str:
            return _reason(plan, v, figures, contiguous=contiguous, outside=outside, sms=sms)

        tuning = near_peak or self._stage == "tuning" or not (small or starved or contiguous)
        if current is not None and current.family in families and tuning:
            # Our own kernel, bandwidth-bound (or no profile): meta-parameter search around it, then other layouts.
            why = "near DRAM peak" if near_peak else "tuning stage" if self._stage == "tuning" else "grid and warps fine"
            order = [(v, f"{figures} ({why}): meta-parameter search around the current best — {_change(current, v)}")
                     for v in _around(current.family, current)]
            others = [f for f in families if f != current.family]
            order += [(v, reason(v)) for v in self._spread([_around(f, None) for f in others], others)]
            return order
        # The seed (or a latency-bound kernel of ours): restructure for more programs in flight.
        order_of: list[Family] = (["row", "split", "persistent", "atomic"] if rows >= SMALL_GRID_WAVES * sms
                                  else ["split", "atomic", "persistent", "row"])
        if one_launch:
            order_of = [f for f in order_of if f != "split"] + ["split"]
        if contiguous:
            order_of = ["row", *(f for f in order_of if f != "row")]
        order_of = ["nhwc", *order_of] if layout_first else [*order_of, "nhwc"]
        # the conv's output round trip is most of these forwards: computing the conv in the kernel removes it
        short_k = plan.conv_k is not None and plan.conv_k <= FUSED_MAX_K
        order_of = ["fused", *order_of] if short_k else [*order_of, "fused"]
        # a max-pool before the mean: only the window families read it; the conv in the kernel first (its output,
        # written and read back, is what the forward spends its bytes on)
        order_of = ["pool_fused", "pool", *order_of]
        primary = sorted([f for f in order_of if f in families], key=self._broken)
        splits = {"split": split_s, "atomic": split_s, "pool": split_s, "nhwc": nhwc_split(plan.batch, plan.channels, sms),
                  "fused": fused_split(plan.batch, plan.channels, sms)}
        anchors = {f: Variant(family=f, **{**ANCHORS[f], **({"split": splits[f]} if f in splits else {})})
                   for f in primary}
        lists = [_around(f, anchors[f]) for f in primary]
        # the primary family gets two turns per round: the first batch already spans the layouts
        return [(v, reason(v)) for v in self._spread(lists, primary, double_first=True)]

    def _broken(self, family: str) -> bool:
        """A family whose candidates failed twice (compile errors, wrong results) is tried only after the rest."""
        return self._failed.get(family, 0) >= 2

    def _spread(self, lists: list[list[Variant]], families: list[Family], double_first: bool = False) -> list[Variant]:
        """Round robin over the working families' lists, then the broken families' ones."""
        ok = [lst for lst, f in zip(lists, families) if not self._broken(f)]
        broken = [lst for lst, f in zip(lists, families) if self._broken(f)]
        if double_first and ok:
            ok = [ok[0], *ok[1:2], ok[0], *ok[2:]]
        return _interleave(ok) + _interleave(broken)

    def _families(self, plan: Plan) -> list[Family]:
        """The GAP families this plan allows (atomics only where the epilogue is a pure scale; a max-pool before the
        mean: the window families only)."""
        if plan.window is not None:
            return ["pool", "pool_fused"] if plan.window_fused else ["pool"]
        scale_only = all(op.operand is not None and _ops()["binary"][op.name]["scale"] for op in plan.post)
        families: list[Family] = ["row", "split", "persistent"]
        return (families + (["atomic"] if scale_only else []) + (["nhwc"] if plan.conv_fn else [])
                + (["fused"] if plan.conv_k is not None else []))
