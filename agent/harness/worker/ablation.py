"""Ablation: did the kernels do the work? One more call, on a trial's inputs, in which what each Triton launch wrote
is destroyed (NaN) as the launch returns, and the forward runs on. Where the output is still right, the kernels did not
compute it, whoever did and through whatever path (an operator, a DLPack alias, per-element Python, a storage the
recorder never linked to the input). Where it is wrong, NaN or the forward raised, what the launches wrote mattered.

This replaces two rules that judged authorship from the outside: "every returned tensor was given to a launch" (a
Linear in Triton followed by a size-1 softmax or a scale in PyTorch is honest and was refused) and "a launch wrote the
output, seen as changed bytes" (a kernel storing what the buffer already held, the saturated output of the previous
call or a zero into torch.zeros, was refused). What PyTorch computes on the data stays bounded by the work-share rule
(agent.harness.judge.rules): a kernel that writes one element of an output PyTorch computed makes that output wrong here.

What is destroyed: CPU mode, exactly the floating elements each launch stored (agent.harness.worker.memrecord). On a GPU, the
launch's floating tensor arguments other than the forward's inputs and the model's weights, over each one's extent (a
kernel's outputs are among its arguments; destroying one it only read costs nothing the rule depends on). Integer
stores (counters, indices) are left alone: a wrong index could crash the process, and no problem returns integers.
After the call, once its outputs are copied, every destroyed byte gets back what the launch wrote (state a candidate
keeps across calls, a workspace its kernel zeroes for the next call, stays as a plain call leaves it); a storage freed
the arguments stay alive until then (a view handed to a launch dies with the call, its storage may not: a workspace
the candidate keeps). The call can be told from the others by the NaN it meets, and by what is kept alive: a forward
that behaves honestly only there is still held to the work-share rule in every call.

The ablated call is placed after a trial the parent chose at random (WorkerJob.ablate, deleted with the job before the
candidate is imported), on that trial's inputs drawn again, so its truth is known and its place in the sequence of
calls is secret.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Ablation:
    """The destroyed bytes of one ablated call, kept to be put back (worker side)."""

    def __init__(self, torch: Any, inference_mode: Any) -> None:
        self.torch = torch
        self.inference_mode = inference_mode  # Trusted's: a tensor made under inference mode is written inside it
        # a tensor's own attributes shadow its class's methods: the candidate's tensors are read through the class
        self.base: Any = torch._C.TensorBase
        self._saved: list[tuple[Any, Any, Any]] = []  # (a tensor on the storage, where, what it held)

    def destroy_stored(self, by_key: dict[int, Any], stored: dict[int, Any], storage_of: Any) -> None:
        """CPU mode: NaN over the floating elements a launch stored (agent.harness.worker.memrecord.Stored)."""
        torch = self.torch
        for key, st in stored.items():
            t = by_key[key]
            whole = torch.empty(0, dtype=torch.uint8).set_(storage_of(t))
            raw = whole.numpy()
            for offsets, pattern in st.float_offsets():
                where = (offsets[:, None] + np.arange(pattern.itemsize)[None, :]).ravel()
                where = where[where < raw.size]
                self._saved.append((t, where, raw[where].copy()))
                raw[where] = np.tile(pattern.view(np.uint8), where.size // pattern.itemsize)

    def destroy_arguments(self, tensors: list[Any], protected: set[int]) -> None:
        """GPU: NaN over every floating argument that is neither an input of the forward nor a weight (asynchronous:
        the caller synchronizes)."""
        torch, base = self.torch, self.base
        for t in tensors:
            if not base.is_floating_point(t) or not base.numel(t):
                continue
            if int(torch._C.StorageBase.data_ptr(base.untyped_storage(t))) in protected:
                continue
            view = base.detach(t)
            self._saved.append((view, None, base.clone(view)))
            with self.inference_mode(True):
                base.fill_(view, float("nan"))
        # the caller synchronizes with Trusted's own (nothing of the candidate's tensors is read to decide it)

    def restore(self) -> None:
        """Put back what the launches wrote, in launch order (the last writer's bytes stay). After the call: a view
        taken inside a forward under @torch.inference_mode is an inference tensor, written only inside that mode."""
        torch, base = self.torch, self.base
        for t, where, held in self._saved:
            if where is None:
                with self.inference_mode(True):
                    base.copy_(t, held)
            else:
                raw = torch.empty(0, dtype=torch.uint8).set_(base.untyped_storage(t)).numpy()
                if where.size and int(where.max()) < raw.size:
                    raw[where] = held
        self._saved = []
