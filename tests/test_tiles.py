"""agent.harness.judge.tiles: the widest tile an answer's code allows, and the one size that reaches just past it."""

from __future__ import annotations

from agent.harness.cache import DiskCache
from agent.harness.judge.tiles import MAX_TILE, Widths, extent, largest_tile
from agent.problems import load_problem


def test_the_largest_constant_a_tile_could_be_is_read_where_a_tiles_width_is_written():
    assert largest_tile("BLOCK = min(triton.next_power_of_2(n), 8192)") == 8192  # a cap
    assert largest_tile("def k(x, BLOCK: tl.constexpr = 4096):\n    o = tl.arange(0, 2048)") == 4096
    assert largest_tile("configs = [triton.Config({'BLOCK': 16384}, num_warps=8)]") == 16384
    assert largest_tile("B = 2 ** 13\nk[grid](x, BLOCK=B)") == 8192  # folded, and read by the launch
    assert largest_tile("cap = 5000\nBLOCK = min(n, cap)") == 8192  # a tile is a power of two: 5000 rounds up
    assert largest_tile("self.block = 1 << 12\nk[g](x, BLOCK=self.block)") == 4096
    assert largest_tile("seed = 2 ** 31\nk[g](x, BLOCK=256)") == 256  # wider than any Triton tensor: not a tile
    # a problem's size baked into an answer specialised to it (Inductor's kernels) is no tile
    assert largest_tile("xnumel = 262144\nk[g](x, xnumel, XBLOCK=32)\nassert x.shape == (16, 64, 128, 128)") == 32
    assert largest_tile("x = 1") == 0 and largest_tile("def (") == 0 and largest_tile("N = 8192") == 0
    assert largest_tile(f"k[g](x, B={MAX_TILE})") == MAX_TILE


def test_extent_is_what_a_kernel_reduces_one_row_or_plane_of():
    assert extent((2, 65, 66, 64)) == 4224 and extent((1, 3, 5, 6, 7)) == 210
    assert extent((8, 8192)) == 8192 and extent((7,)) == 7 and extent(()) == 1


def test_a_tile_no_size_reaches_gets_the_smallest_size_past_it():
    problem = load_problem("gap44", "cpu")
    widths = Widths()
    assert max(widths.widest(problem.path, s.overrides) for s in problem.cpu_sizes) == 4224  # cpu-wide's plane
    assert widths.past(problem.path, problem.cpu_sizes, 4096) is None  # cpu-wide already reaches past 4096
    wide = widths.past(problem.path, problem.cpu_sizes, 8192)
    assert wide is not None and wide.label == "cpu-wide-past-tile-8192" and wide.distributions == ["randn"]
    assert wide.overrides["batch_size"] == 1 and wide.overrides["out_channels"] == 65  # cpu-wide, one image
    assert widths.widest(problem.path, wide.overrides) > 8192
    grown = next(k for k, v in wide.overrides.items() if v != problem.cpu_sizes[1].overrides[k] and k != "batch_size")
    smaller = {**wide.overrides, grown: wide.overrides[grown] - 1}
    assert widths.widest(problem.path, smaller) <= 8192  # the smallest growth past the tile: the CPU cost stays bounded


def test_a_linear_problems_reduced_features_grow_past_the_tile():
    problem = load_problem("kb_51_gemm_sub_gap_lse_gelu_residual", "cpu")
    wide = Widths().past(problem.path, problem.cpu_sizes, 2048)
    assert wide is not None and wide.overrides["in_features"] == 2049  # the GEMM's reduction: K


def test_widths_kept_on_disk_are_measured_once_per_problem_file_and_size(tmp_path, monkeypatch):
    # the meta device's first call costs seconds in the parent, before a run's first worker: a second process (a
    # warm run) reads the widths its first measured; an edited problem file is measured again
    import shutil

    import agent.harness.judge.tiles as tiles

    src = load_problem("gap44", "cpu")
    copy = tmp_path / "gap44.py"
    shutil.copyfile(src.path, copy)
    measured: list[dict] = []
    real = tiles.widest_extent
    monkeypatch.setattr(tiles, "widest_extent", lambda p, o, d="meta": measured.append(o) or real(p, o, d))
    sizes = src.cpu_sizes

    def disk() -> DiskCache:
        return DiskCache(tmp_path / "widths", 64)

    first = Widths(disk()).past(copy, sizes, 8192)
    n = len(measured)
    assert n > 0 and first is not None
    again = Widths(disk()).past(copy, sizes, 8192)  # a new process: nothing in memory
    assert again == first and len(measured) == n
    copy.write_text(copy.read_text() + "\n# an edit\n")
    Widths(disk()).past(copy, sizes, 8192)
    assert len(measured) == 2 * n
