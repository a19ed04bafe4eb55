"""Static checks for what could tell the harness's recorded calls from the others (part of agent.harness.static.policy).

The harness traces some forward calls (every buffer a launch is given copied before and after, the stream
synchronized, operators recorded) and not the others; it checks some timed calls' outputs and not the others. A
forward that can tell which calls those are can do the work only there. Whatever differs between them is a tell:
a clock (host or device: inline assembly reading a clock register), the allocator's addresses and statistics, the
GPU's progress (a stream's query(), pinned host memory a copy fills while the host runs on, kernels that overlap and
signal each other), the file and line that called the forward (a warning's place). Each function
here reads one node of the candidate's AST and returns (rule, message) for what it refuses, None for what it allows.
The run-time side of the same fence: agent.harness.worker.trusted's audit hook and the tracer (agent.harness.worker.trace).
"""

from __future__ import annotations

import ast
import re

from agent.harness.static.names import chain_root

INLINE_ASM = "inline_asm_elementwise"
ADDRESS = "data_ptr"
MAX_ALIGNMENT = 512  # bytes: PyTorch's CUDA caching allocator rounds every block to 512
# PTX's clock registers, read by inline assembly (tl.inline_asm_elementwise): %clock, %clock64, %globaltimer(_lo/_hi)
_PTX_CLOCK = re.compile(r"%(clock|globaltimer)")
_SELF = {"self", "cls"}
# Forbidden names honest code also gives its own things: attention's `self.query = nn.Linear(...)`, a softmax's
# `self.temperature`. Refused where they read the GPU's state: Stream/Event.query() takes no argument; NVML's
# readings are calls (torch.cuda.temperature() ...), and torch's own paths are judged as paths.
_LAYER_NAMES = {"query"}
_VALUE_NAMES = {"temperature", "utilization", "clock_rate", "power_draw"}

Refusal = tuple[str, str]  # (rule, message)


def inline_asm(node: ast.Attribute) -> Refusal | None:
    """Inline assembly only as a direct call with a literal string: what the check cannot read (a string built in
    pieces, the function passed around or reached by getattr) it cannot clear of a clock register."""
    call = getattr(node, "_parent", None)
    asm = None
    if isinstance(call, ast.Call) and call.func is node:
        asm = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "asm"), None)
    if isinstance(asm, ast.Constant) and isinstance(asm.value, str):
        return None
    return "clock", ("inline assembly must be called directly with a string literal (the check reads it for clock "
                     "registers)")


def clock_register(text: str) -> str | None:
    """The PTX clock register a string names (the string may be inline assembly), or None."""
    found = _PTX_CLOCK.search(text)
    return found.group(0) if found else None


def address(node: ast.Attribute) -> Refusal | None:
    """A tensor's address only for its alignment (`x.data_ptr() % 16`): compared or subtracted it tells the
    harness's recorded calls from the others (the tracer's own buffers change what the allocator hands out) and
    reaches memory by offset that no launch argument names. The modulus is an alignment: a power of two no coarser
    than the caching allocator's own block alignment, below which every address it hands out agrees (a remainder
    modulo 2**64 is the whole address)."""
    call = getattr(node, "_parent", None)
    mod = getattr(call, "_parent", None)
    if isinstance(call, ast.Call) and call.func is node and isinstance(mod, ast.BinOp) and \
            isinstance(mod.op, ast.Mod) and mod.left is call and _alignment(mod.right):
        return None
    return "escape", ("a tensor's address may be read only for its alignment (`x.data_ptr() % 16`, a power of two up "
                      f"to {MAX_ALIGNMENT}): an address "
                      "compared, kept or offset tells the harness's checked calls from the others and reaches memory "
                      "no launch argument names")


def _alignment(node: ast.expr) -> bool:
    value = node.value if isinstance(node, ast.Constant) else None
    return type(value) is int and 0 < value <= MAX_ALIGNMENT and value & (value - 1) == 0


def callers(node: ast.Call) -> Refusal | None:
    """A warning raised `stacklevel` frames up names the file and line of whoever called the forward (the
    harness's checked calls come from other lines than the rest): raising one is fine (`stacklevel=2` is common
    in honest code, and its place goes to stderr), reading it back is not: catch_warnings(record=...), in any
    spelling on any object (the module may have been passed in). Replacing showwarning is refused by name."""
    fn = node.func
    name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
    if name == "catch_warnings" and (node.args or any(k.arg in ("record", None) for k in node.keywords)):
        return "escape", ("`catch_warnings(record=...)`: a recorded warning's place names the forward's callers, "
                          "which a kernel module may not learn")
    return None


def pinned(node: ast.Call) -> Refusal | None:
    """Pinned host memory asked for by keyword (`torch.empty(n, pin_memory=True)`; `.pin_memory()` is refused by
    name): a copy fills it while the host runs on, so reading it at once shows whether the GPU has finished (it has,
    in a call the harness records). The run-time check (agent.harness.worker.trace.watches_the_gpu) sees every spelling."""
    for k in node.keywords:
        if k.arg == "pin_memory" and not (isinstance(k.value, ast.Constant) and not k.value.value):
            return "observe", ("`pin_memory=`: pinned host memory lets the host watch the GPU's progress, which tells "
                               "the harness's recorded calls from the others")
    return None


def overlapped(node: ast.Call) -> Refusal | None:
    """Programmatic dependent launch (`launch_pdl=True`): a kernel starts before the previous one has finished, so
    the two can signal each other through memory; the recorder's copies between the launches of a recorded call stop
    that overlap, and the kernels can tell the call apart on the GPU alone (the gdc_* functions: by path)."""
    for k in node.keywords:
        if k.arg == "launch_pdl" and not (isinstance(k.value, ast.Constant) and not k.value.value):
            return "stream", ("`launch_pdl=`: kernels that overlap can tell, on the GPU, the calls the harness records "
                              "(its copies run between launches) from the others: launch them one after another")
    return None


def own_name(node: ast.Attribute, own_classes: set[str]) -> bool:
    """A forbidden attribute name ("observe": query, temperature...) that is the candidate's own thing here, not the
    GPU's state: assigned, a layer called with its input (self.query(x)), or a value of the module's read and not
    called (self.temperature)."""
    if node.attr not in _LAYER_NAMES | _VALUE_NAMES:
        return False
    if isinstance(node.ctx, ast.Store):
        return True
    parent = getattr(node, "_parent", None)
    called = isinstance(parent, ast.Call) and parent.func is node
    if node.attr in _LAYER_NAMES:
        return called and bool(parent.args or parent.keywords)  # type: ignore[union-attr]
    root = chain_root(node)
    return not called and isinstance(root, ast.Name) and (root.id in _SELF or root.id in own_classes) and \
        node.value is root
