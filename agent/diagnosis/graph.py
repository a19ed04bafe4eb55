"""Causes before symptoms: which finding explains which, as data, and the ranking that follows from it.

A finding's node is its kind, or kind:detail where the detail matters (what limits occupancy: a resource is a cause
of its own, too few programs in flight a symptom of the grid). A cause found on a
kernel folds the symptoms it explains on the same kernel (or on the whole forward) under itself: they leave the
list and the cause names them. A symptom two causes explain goes to the first of them in rank, so nothing is
counted twice. Each remaining finding carries one gain: its own, or the largest of what it folded (the symptom
measures what the cause costs: a small grid's idle SMs show as DRAM left unused). Roots are ranked by that gain,
most first, those without one after; where the kernel sits (the roofline, DRAM at its peak) comes after every root
and claims no gain; ncu's own rules come last.
"""

from __future__ import annotations

from agent.diagnosis.model import Finding

# The launch is too small for the GPU: slots, SMs and DRAM stay idle, warps wait.
_STARVED = ("low-dram", "low-occupancy:launch", "low-occupancy", "stalls", "imbalance")
# cause -> the symptoms it explains ("low-occupancy" bare: a report without the limits, which cannot say why)
EXPLAINS: dict[str, tuple[str, ...]] = {
    "launch-bound": ("host-bound", "small-grid", "tail", *_STARVED),
    "unfused": ("host-bound",),
    "small-grid": _STARVED,
    "tail": _STARVED,
    # values that do not fit the registers: local-memory traffic through L1 and L2, its waits, the instructions that
    # move it, and the register pressure that limits occupancy
    "spills": ("l2-bound", "stalls", "low-dram", "low-occupancy:registers", "issue-bound"),
    "uncoalesced-load": ("l2-bound", "low-dram", "stalls"),
    "uncoalesced-store": ("l2-bound", "low-dram", "stalls"),
    "bank-conflicts": ("stalls", "low-dram"),
    "issue-bound": ("stalls", "low-dram"),
    # a resource that caps the warps in flight: too few to hide memory latency
    "low-occupancy:programs per SM": ("stalls", "low-dram"),
    "low-occupancy:registers": ("stalls", "low-dram"),
    "low-occupancy:shared memory": ("stalls", "low-dram"),
    "low-occupancy:block size": ("stalls", "low-dram"),
    "low-occupancy:barriers": ("stalls", "low-dram"),
    # uneven work with no grid to blame (a serial tail): the idle SMs leave DRAM and warp slots unused
    "imbalance": ("low-dram", "low-occupancy:launch", "stalls"),
}
POSITIONS = ("memory-bound", "compute-bound", "at-dram-peak")


def node(f: Finding) -> str:
    return f"{f.kind}:{f.detail}" if f.detail else f.kind


def _explains(cause: Finding, symptom: Finding) -> bool:
    if cause is symptom or symptom.kind in POSITIONS or symptom.source != "agent":
        return False
    if cause.kernel and symptom.kernel and cause.kernel != symptom.kernel:
        return False
    return node(symptom) in EXPLAINS.get(node(cause), ())


def _gain(f: Finding) -> float:
    return f.gain_pct if f.gain_pct is not None else -1.0


def rank(found: list[Finding]) -> list[Finding]:
    """The findings with symptoms folded under their causes, roots by gain, then positions, then ncu's rules."""
    agent = [f for f in found if f.source == "agent" and f.kind not in POSITIONS]
    # causes claim symptoms in the order of their own gain; a cause folded under another claims nothing itself
    order = sorted(agent, key=lambda f: (node(f) not in EXPLAINS, -_gain(f)))
    folded: dict[int, list[Finding]] = {}
    taken: set[int] = set()
    for cause in order:
        if id(cause) in taken or node(cause) not in EXPLAINS:
            continue
        mine = [s for s in agent if id(s) not in taken and _explains(cause, s)]
        for s in mine:
            taken.add(id(s))
            # what the symptom had folded moves up with it
            mine += [x for x in folded.pop(id(s), []) if x not in mine]
        if mine:
            folded[id(cause)] = mine
    roots = []
    for f in agent:
        if id(f) in taken:
            continue
        under = folded.get(id(f), [])
        gains = [g for g in (f.gain_pct, *(s.gain_pct for s in under)) if g is not None]
        roots.append(f.model_copy(update={
            "gain_pct": max(gains) if gains else None,
            "folded": [*f.folded, *(s.model_copy(update={"gain_pct": None}) for s in under)]}))
    roots.sort(key=lambda f: -_gain(f))
    positions = [f.model_copy(update={"gain_pct": None}) for f in found if f.source == "agent" and f.kind in POSITIONS]
    return [*roots, *positions, *(f for f in found if f.source != "agent")]


def kinds(findings: list[Finding]) -> set[str]:
    """Every kind among the findings and what they folded (what a proposer keys its remedies on)."""
    return {k for f in findings for k in (f.kind, *(s.kind for s in f.folded))}
