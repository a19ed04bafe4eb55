"""The GPU catalog: data validated into GPUSpec, lookup by name, detection of real device names."""

from __future__ import annotations

import logging

import pytest

from agent.catalog import closest_gpu, load_catalog, parse_catalog, resolve_gpu
from agent.errors import UserError

REQUIRED = {"4090", "3090", "l4", "l40s", "a100", "h100", "h200"}


def test_catalog_has_every_required_gpu():
    assert REQUIRED <= {g.key for g in load_catalog()}


def test_4090_is_exactly_the_seeds_target_gpu_block():
    g = resolve_gpu("4090")
    assert (g.name, g.architecture, g.compute_capability, g.sms) == ("4090", "Ada Lovelace", "8.9", 128)
    assert (g.memory_bandwidth_gbs, g.tf32_tflops, g.bf16_tflops, g.fp16_tflops) == (1008, 82.6, 165.2, 165.2)
    assert (g.max_registers_per_thread, g.max_threads_per_block, g.max_threads_per_sm, g.warp_size) == (255, 1024, 1536, 32)
    assert (g.max_warps_per_sm, g.smem_per_sm_kb, g.smem_per_block_kb, g.l2_mb) == (48, 100, 99, 72)


def test_datasheet_numbers_of_the_datacenter_gpus():
    h100, h200, a100 = resolve_gpu("h100"), resolve_gpu("h200"), resolve_gpu("a100")
    assert (h100.sms, h100.memory_bandwidth_gbs, h100.bf16_tflops, h100.smem_per_block_kb, h100.l2_mb) == (132, 3350, 989.4, 227, 50)
    assert (h200.sms, h200.memory_bandwidth_gbs) == (132, 4800)
    # plain FP32 (non-tensor): 132 SMs x 128 lanes x 2 FLOP x 1.98 GHz boost = 66.9 on the H100 and H200 SXM
    assert (h100.fp32_tflops, h200.fp32_tflops, a100.fp32_tflops, resolve_gpu("4090").fp32_tflops) == (67, 67, 19.5, 82.6)
    assert (a100.sms, a100.memory_bandwidth_gbs, a100.tf32_tflops, a100.smem_per_sm_kb, a100.l2_mb) == (108, 2039, 156, 164, 40)


def test_every_entry_is_internally_consistent():
    for g in load_catalog():
        assert g.max_warps_per_sm * g.warp_size == g.max_threads_per_sm, g.key
        assert g.smem_per_block_kb <= g.smem_per_sm_kb, g.key
        assert g.bf16_tflops >= g.tf32_tflops >= g.fp32_tflops, g.key  # tensor cores never slower than CUDA cores


@pytest.mark.parametrize("name,key", [
    ("4090", "4090"), ("rtx4090", "4090"), ("RTX 4090", "4090"), ("h100", "h100"), ("H100 SXM", "h100"),
    ("H200", "h200"), ("l40s", "l40s"), ("L4", "l4"), ("a100", "a100"), ("A100 80GB", "a100"),
])
def test_resolves_a_name_by_key_name_or_alias_case_insensitively(name, key):
    assert resolve_gpu(name).key == key


def test_unknown_gpu_names_the_choices():
    with pytest.raises(UserError, match=r"unknown GPU 'v100'; choose from: 4090, .*h200"):
        resolve_gpu("v100")


@pytest.mark.parametrize("device,key", [
    ("NVIDIA GeForce RTX 4090", "4090"),
    ("NVIDIA GeForce RTX 3090", "3090"),
    ("NVIDIA L4", "l4"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA A100-SXM4-80GB", "a100"),
    ("NVIDIA A100-SXM4-40GB", "a100"),
    ("NVIDIA A100 80GB PCIe", "a100"),
    ("NVIDIA H100 80GB HBM3", "h100"),
    ("NVIDIA H100 PCIe", "h100"),
    ("NVIDIA H100 NVL", "h100"),
    ("NVIDIA H200", "h200"),
    ("NVIDIA L40", "l40s"),
])
def test_maps_real_device_names_to_the_closest_entry(device, key):
    assert closest_gpu(device).key == key


def test_an_inexact_match_is_logged(caplog):
    with caplog.at_level(logging.WARNING, logger="agent.catalog"):
        closest_gpu("NVIDIA H100 PCIe")
    assert "closest entry" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="agent.catalog"):
        closest_gpu("NVIDIA H100 80GB HBM3")
    assert caplog.text == ""


def test_auto_without_a_gpu_falls_back_to_the_seeds_4090_with_a_warning(caplog):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: auto detects it")
    with caplog.at_level(logging.WARNING, logger="agent.catalog"):
        assert resolve_gpu("auto").key == "4090"
    assert "no CUDA device" in caplog.text


GOOD = """
[gpus.x]
name = "X"
architecture = "A"
compute_capability = "9.0"
sms = 1
memory_bandwidth_gbs = 1
fp32_tflops = 1
tf32_tflops = 1
bf16_tflops = 1
fp16_tflops = 1
max_threads_per_sm = 2048
max_warps_per_sm = 64
smem_per_sm_kb = 1
smem_per_block_kb = 1
l2_mb = 1
"""


def test_a_wellformed_entry_validates():
    [g] = parse_catalog(GOOD)
    assert (g.key, g.name, g.warp_size) == ("x", "X", 32)


@pytest.mark.parametrize("text,why", [
    (GOOD.replace("sms = 1", 'sms = "many"'), "sms"),
    (GOOD.replace("l2_mb = 1", ""), "l2_mb"),
    (GOOD + "colour = 'green'\n", "colour"),
    ("[gpus.x\n", "TOML"),
    ("", "no \\[gpus.KEY\\]"),
])
def test_a_malformed_entry_fails_with_one_line(text, why):
    with pytest.raises(UserError, match=why) as e:
        parse_catalog(text)
    assert "\n" not in e.value.message
