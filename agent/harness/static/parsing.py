"""One parse of an answer at a time in the parent process.

CPython 3.11's AST constructor keeps its recursion depth in state its threads share: a garbage collection in the
middle of one parse that lets another thread parse ends one of them in "SystemError: AST constructor recursion depth
mismatch" (python/cpython#106905). The parent reads answers in several threads at once: a round's verdicts in the
evaluation pool, the next round's static checks, a profile started ahead of need (agent.profileahead). Each holds
PARSING while it reads an answer's tree; the sandboxed worker is one thread and needs none of it.
"""

from __future__ import annotations

import threading

PARSING = threading.RLock()  # re-entrant: a static check that asks another (kernel_names inside a check) holds it once
