"""CPU mode: every address an interpreted launch loads and stores, resolved to the storages the launch was given.

Triton's interpreter runs each tl.load, tl.store and atomic as a numpy gather or scatter over an array of addresses
(InterpreterBuilder.create_masked_load / create_masked_store / create_atomic_rmw / create_atomic_cas; descriptor
loads and stores, atomic loads and polls pass through the first two). Hooked there, the record is exact: what a
launch wrote is what it stored, whether or not the bytes changed (a kernel that stores the value a buffer already
held, a zero into torch.zeros, still wrote it), and a load of a location a launch of this call stored earlier (the
same launch included) is a round trip through memory, however the launches were split.

An address outside every storage the launch was given is not attributed (the static policy refuses addresses made
from data_ptr; agent.harness.static.policy).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# NaN's bit pattern per floating type the interpreter stores (bf16 travels as uint16 there)
_NAN_BITS: dict[str, np.ndarray] = {"fp16": np.array([0x7E00], np.uint16), "bf16": np.array([0x7FC0], np.uint16),
             "fp32": np.array([0x7FC00000], np.uint32), "fp64": np.array([0x7FF8000000000000], np.uint64)}


@dataclass
class Stored:
    """What one launch stored into one storage: its bytes, and the floating elements (offset, NaN pattern) among them."""

    bitmap: np.ndarray
    floats: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def float_offsets(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """(unique byte offsets, NaN pattern) per floating type stored."""
        return [(np.unique(np.concatenate(offs)), _NAN_BITS[name]) for name, offs in self.floats.items()]


def _hooked(original: Any, seen: Any, record: "MemoryRecord") -> Any:
    """`original` with `seen` told its arguments by name first, while a launch is recorded."""
    import functools
    import inspect

    signature = inspect.signature(original)

    @functools.wraps(original)
    def hook(*args: Any, **kwargs: Any) -> Any:
        if record.active:
            seen(signature.bind(*args, **kwargs).arguments)
        return original(*args, **kwargs)

    return hook


class MemoryRecord:
    """The loads and stores of the launches of one recorded call (begin_call), launch by launch (begin_launch)."""

    def __init__(self) -> None:
        self.active = False
        self._regions: list[tuple[int, int, int]] = []  # (lo, hi, storage key) of the running launch's storages
        self._written: dict[int, np.ndarray] = {}  # key -> bytes some launch of this call stored
        self.stored: dict[int, Stored] = {}  # the running launch's stores, by storage key
        self.reloaded: dict[int, int] = {}  # key -> bytes loaded this call from locations a launch had stored

    def install(self) -> None:
        """Hook the interpreter's memory operations (under TRITON_INTERPRET=1 only). Their arguments are read by
        name: Triton 3.0-3.6 pass cache_modifier and eviction_policy where 3.7+ pass one cache_policy."""
        from triton.runtime.interpreter import InterpreterBuilder, _get_np_dtype

        record = self

        def size_of(ptr: Any) -> int:
            return int(np.dtype(_get_np_dtype(ptr.get_element_ty())).itemsize)

        def on_load(a: dict[str, Any]) -> None:
            record.load(a["ptrs"].data, a["mask"].data, size_of(a["ptrs"]))

        def on_store(a: dict[str, Any]) -> None:
            record.store(a["ptrs"].data, a["mask"].data, a["ptrs"].get_element_ty(), size_of(a["ptrs"]))

        def on_rmw(a: dict[str, Any]) -> None:  # read, then written: an accumulator's earlier value is read back
            record.load(a["ptr"].data, a["mask"].data, size_of(a["ptr"]))
            record.store(a["ptr"].data, a["mask"].data, a["ptr"].get_element_ty(), size_of(a["ptr"]))

        def on_cas(a: dict[str, Any]) -> None:
            everywhere = np.ones(np.shape(a["ptr"].data), dtype=bool)
            record.load(a["ptr"].data, everywhere, size_of(a["ptr"]))
            record.store(a["ptr"].data, everywhere, a["ptr"].get_element_ty(), size_of(a["ptr"]))

        for name, seen in (("create_masked_load", on_load), ("create_masked_store", on_store),
                           ("create_atomic_rmw", on_rmw), ("create_atomic_cas", on_cas)):
            setattr(InterpreterBuilder, name, _hooked(getattr(InterpreterBuilder, name), seen, record))

    # ---------------------------------------------------------------- one call, one launch

    def begin_call(self) -> None:
        self._written, self.reloaded, self.stored = {}, {}, {}

    def forget(self, key: int) -> None:
        """The storage at `key` was freed and the address handed to a new one: nothing there was written this call."""
        self._written.pop(key, None)

    def begin_launch(self, regions: list[tuple[int, int, int]]) -> None:
        self._regions, self.stored, self.active = regions, {}, True

    def end_launch(self) -> dict[int, Stored]:
        self.active = False
        stored, self.stored = self.stored, {}
        return stored

    def written_bytes(self, key: int) -> np.ndarray | None:
        """The bytes of the storage at `key` some launch of this call stored (None: none)."""
        return self._written.get(key)

    # ---------------------------------------------------------------- the hooks' bookkeeping

    def _located(self, addrs: Any, mask: Any, size: int) -> list[tuple[int, int, np.ndarray]]:
        """(key, storage bytes, byte offsets) of the masked addresses, per storage of the launch."""
        flat = np.asarray(addrs).astype(np.int64).ravel()
        on = np.broadcast_to(np.asarray(mask, dtype=bool), np.shape(addrs)).ravel()
        flat = flat[on]
        out = []
        for lo, hi, key in self._regions:
            inside = flat[(flat >= lo) & (flat + size <= hi)]
            if inside.size:
                out.append((key, hi - lo, inside - lo))
        return out

    def load(self, addrs: Any, mask: Any, size: int) -> None:
        for key, _, offsets in self._located(addrs, mask, size):
            written = self._written.get(key)
            if written is not None:
                again = int(np.count_nonzero(written[offsets]))
                if again:
                    self.reloaded[key] = self.reloaded.get(key, 0) + again * size

    def store(self, addrs: Any, mask: Any, dtype: Any, size: int) -> None:
        span = np.arange(size)
        for key, nbytes, offsets in self._located(addrs, mask, size):
            where = (offsets[:, None] + span[None, :]).ravel()
            mine = self.stored.get(key)
            if mine is None or mine.bitmap.size != nbytes:
                mine = self.stored[key] = Stored(bitmap=np.zeros(nbytes, dtype=bool))
            mine.bitmap[where] = True
            written = self._written.get(key)
            if written is None or written.size != nbytes:
                written = self._written[key] = np.zeros(nbytes, dtype=bool)
            written[where] = True
            name = getattr(dtype, "name", "")
            if name in _NAN_BITS:
                mine.floats.setdefault(name, []).append(offsets)
