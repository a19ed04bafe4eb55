"""The GPU catalog (agent/data/gpus.toml, validated into GPUSpec), detection, and name matching.

`resolve_gpu("auto")` asks torch which GPU is running and maps its name to the closest entry. With no CUDA device
(this CPU machine, CI) it falls back to the seed's target, the RTX 4090, and logs a warning: prompts rendered on a
CPU-only machine then match the seed document exactly. Pass `--gpu NAME` to target another GPU.
"""

from __future__ import annotations

import difflib
import logging
import re
import tomllib
from functools import lru_cache
from importlib import resources

from pydantic import ValidationError

from agent.errors import UserError, unknown
from agent.schema import GPUSpec

log = logging.getLogger(__name__)

# The seed prompt's target: what "auto" means where no GPU can be detected.
FALLBACK = "4090"

# Tokens that describe a variant (memory size, form factor), not the model: "A100-SXM4-40GB" is an A100.
_VARIANT = re.compile(r"^(\d+gb|sxm\d*|pcie\d*|hbm\d\w*|nvl|d)$")
_NOISE = ("nvidia", "geforce", "tesla", "quadro")


def _data_text() -> str:
    return resources.files("agent").joinpath("data", "gpus.toml").read_text(encoding="utf-8")


def parse_catalog(text: str) -> list[GPUSpec]:
    """Validate catalog TOML text (`[gpus.KEY]` tables) into GPUSpecs; a malformed entry is a UserError."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"GPU catalog is not valid TOML: {e}") from e
    gpus = data.get("gpus")
    if not isinstance(gpus, dict) or not gpus:
        raise UserError("GPU catalog has no [gpus.KEY] entries")
    specs = []
    for key, fields in gpus.items():
        try:
            specs.append(GPUSpec(key=str(key), **fields))
        except (ValidationError, TypeError) as e:
            first = e.errors()[0] if isinstance(e, ValidationError) else {"loc": (), "msg": str(e)}
            where = ".".join(str(p) for p in first["loc"])
            raise UserError(f"GPU catalog entry {key!r} is invalid: {where}: {first['msg']}") from e
    return specs


@lru_cache(maxsize=1)
def _catalog() -> tuple[GPUSpec, ...]:
    return tuple(parse_catalog(_data_text()))


def load_catalog() -> list[GPUSpec]:
    """Every catalog entry, in file order (copies: callers may not change the cache)."""
    return [g.model_copy(deep=True) for g in _catalog()]


def _norm(s: str) -> str:
    s = s.lower()
    for word in _NOISE:
        s = s.replace(word, " ")
    return re.sub(r"[^a-z0-9]", "", s)


def _tokens(s: str) -> set[str]:
    """Model tokens of a name: alphanumeric words with a digit that don't just name a variant ('h100', '4090')."""
    words = re.split(r"[^a-z0-9]+", s.lower())
    return {w for w in words if re.search(r"\d", w) and not _VARIANT.match(w)}


def _names(g: GPUSpec) -> list[str]:
    return [g.key, g.name, *g.aliases]


def find_gpu(name: str) -> GPUSpec | None:
    """The entry whose key, name or alias equals `name` (case, spaces and punctuation ignored), else None."""
    wanted = _norm(name)
    for g in _catalog():
        if any(_norm(n) == wanted for n in _names(g)):
            return g.model_copy(deep=True)
    return None


def closest_gpu(device_name: str) -> GPUSpec:
    """Map a device name as torch reports it to a catalog entry: exact alias, else shared model token, else the
    most similar name (difflib). Anything but an exact alias is logged, since the numbers may then be off."""
    exact = find_gpu(device_name)
    if exact is not None:
        return exact
    catalog = _catalog()
    device_tokens = _tokens(device_name)
    by_token = [g for g in catalog if device_tokens & set().union(*(_tokens(n) for n in _names(g)))]
    if by_token:
        chosen = by_token[0]
    else:
        wanted = _norm(device_name)

        def score(g: GPUSpec) -> float:
            return max(difflib.SequenceMatcher(None, wanted, _norm(n)).ratio() for n in _names(g))

        chosen = max(catalog, key=score)
    log.warning("GPU %r is not in the catalog; using the closest entry, %s (%s)", device_name, chosen.name, chosen.key)
    return chosen.model_copy(deep=True)


def cuda_driver_loads() -> bool:
    """Whether the CUDA driver's library loads here (no torch import): the cheap first half of "is there a GPU"."""
    return not _no_cuda_driver()


def _no_cuda_driver() -> bool:
    """True where the CUDA driver's library cannot be loaded (this CPU machine, CI): torch could not see a GPU
    either, and asking it costs an import of torch (seconds) in commands that need nothing else of it. Any doubt
    (another system, a library that loads) leaves the question to torch."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        ctypes.CDLL("libcuda.so.1")  # what the CUDA runtime under torch loads, found the same way (dlopen)
    except OSError:
        return True
    return False


def detect_device_name() -> str | None:
    """torch's name for CUDA device 0, or None where there is none (torch imported here, not at import time)."""
    if _no_cuda_driver():
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name(0)


def resolve_gpu(name: str = "auto", warn: bool = True) -> GPUSpec:
    """A target GPU: "auto" detects the running one (no GPU: the seed's 4090, with a warning unless `warn` is False:
    a CPU-mode run names its target in its own header), else by NAME."""
    if name.strip().lower() == "auto":
        device = detect_device_name()
        if device is None:
            if warn:
                log.warning("no CUDA device detected; targeting the seed's GPU (%s). Pass --gpu NAME to choose.",
                            FALLBACK)
            return find_gpu(FALLBACK)  # type: ignore[return-value]
        return closest_gpu(device)
    found = find_gpu(name)
    if found is None:
        raise unknown("GPU", name, [g.key for g in _catalog()] + ["auto"])
    return found
