"""The offline `fused` family's kernel (agent/data/kernels/conv2d_gap_fused.py.j2) on KernelBench #67 at full size
(128x8x256x256, Conv2d 8->64 3x3 -> GELU -> mean): device time (triton.testing.do_bench medians) of meta-parameter
and code variants, each checked against the fp64 truth (err: max abs error / max abs truth; the harness's fp32
tolerance is 1e-4), with the kernel's registers and spills; eager and torch.compile for scale. Used to choose the
family's anchor (agent/offline/planner.py). Results: bench/results/fused_h200/.
Usage (GPU machine, repo root): python bench/suite/fused_variants.py PLAN   (PLAN: first | a | b | c | d; JSON in $OUT)
Variants: PRECISION tf32x3 (default on CUDA) / tf32 / ieee; nogelu: the epilogue removed (what the GELU costs);
tap: the gather loop per kernel tap over input-channel blocks instead of flat K chunks; acc2d: a per-tile running
sum reduced once at the end instead of a sum per tile; bk32/bk128: BLOCK_K; p/w/s/split: BLOCK_P, warps, stages,
programs per image."""
import importlib.util, json, os, sys, tempfile
import torch, triton
from agent.catalog import find_gpu
from agent.offline import recognise, render, Variant
from agent.problems import load_problem
torch.manual_seed(0)
prob = load_problem("kb_67_conv2d_gelu_gap")
plan = recognise(prob)
spec = importlib.util.spec_from_file_location("ref", prob.path if hasattr(prob, "path") else "agent/data/kernelbench/kb_67_conv2d_gelu_gap.py")
ref = importlib.util.module_from_spec(spec); spec.loader.exec_module(ref)
model = ref.Model(*ref.get_init_inputs()).cuda()
x = ref.get_inputs()[0].cuda()
with torch.no_grad():
    want = model.double()(x.double()).float(); model.float()
out = {}
def load(code, tag):
    d = tempfile.mkdtemp(dir="/var/tmp"); p = os.path.join(d, f"m_{tag}.py"); open(p, "w").write(code)
    s = importlib.util.spec_from_file_location(f"m_{tag}", p); m = importlib.util.module_from_spec(s); s.loader.exec_module(m); return m
def bench(tag, v, edits=()):
    code = render(plan, v, find_gpu("h100"))
    for a, b in edits:
        assert a in code, a; code = code.replace(a, b)
    try:
        m = load(code, tag)
        mn = m.ModelNew(*ref.get_init_inputs()).cuda(); mn.load_state_dict(model.state_dict())
        with torch.no_grad():
            got = mn(x); err = ((got - want).abs().max() / want.abs().max()).item()
            ms = triton.testing.do_bench(lambda: mn(x), warmup=50, rep=300)
        k = m.conv_gap_kernel
        regs = spills = None
        try:
            cache = next(iter(k.device_caches.values()))[0] if hasattr(k, "device_caches") else k.cache
            ck = next(iter(cache.values())); regs, spills = ck.n_regs, ck.n_spills
        except Exception as e:
            regs = str(e)[:60]
        out[tag] = dict(ms=ms, err=err, regs=regs, spills=spills)
    except Exception as e:
        out[tag] = dict(error=f"{type(e).__name__}: {str(e)[:300]}")
    print(tag, out[tag], flush=True)
OLD = "        for k0 in range(0, K, BLOCK_K):\n            ks = k0 + tl.arange(0, BLOCK_K)\n            km = ks < K\n            ci = ks // (KH * KW)\n            kr = ks % (KH * KW)\n            ih = oh[:, None] * sh - ph + (kr // KW)[None, :] * dh\n            iw = ow[:, None] * sw - pw + (kr % KW)[None, :] * dw\n            m = pm[:, None] & km[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)\n            a = tl.load(x_ptr + x_base + (ci[None, :] * H + ih) * W + iw, mask=m, other=0.0).to(tl.float32)\n            b = tl.load(w_ptr + cs[None, :] * K + ks[:, None], mask=km[:, None] & cm[None, :], other=0.0).to(tl.float32)\n            # 3xTF32 on tensor cores: fp32-accurate (the harness's tolerance is fp32's), unlike plain TF32\n            acc = tl.dot(a, b, acc, input_precision=PRECISION)\n"
NEW = '        for tap in range(KH * KW):\n            ih = oh * sh - ph + (tap // KW) * dh\n            iw = ow * sw - pw + (tap % KW) * dw\n            pos = ih * W + iw\n            pok = pm & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)\n            for c0 in range(0, Cin, BLOCK_K):\n                ci = c0 + tl.arange(0, BLOCK_K)\n                cim = ci < Cin\n                a = tl.load(x_ptr + x_base + ci[None, :] * (H * W) + pos[:, None], mask=pok[:, None] & cim[None, :], other=0.0)\n                b = tl.load(w_ptr + cs[None, :] * K + (ci[:, None] * (KH * KW) + tap), mask=cim[:, None] & cm[None, :], other=0.0)\n                acc = tl.dot(a, b, acc, input_precision=PRECISION)\n'
V = lambda **kw: Variant(**{**dict(family="fused", block=128, warps=4, stages=2, split=16), **kw})
P = ('PRECISION="tf32x3" if x.is_cuda else "ieee"',)
with torch.no_grad():
    e = model(x); ms_e = triton.testing.do_bench(lambda: model(x), warmup=20, rep=300)
    c = torch.compile(model); c(x); ms_c = triton.testing.do_bench(lambda: c(x), warmup=20, rep=300)
print("eager", ms_e, "compile", ms_c, flush=True); out["eager"] = ms_e; out["compile"] = ms_c
rel = lambda got: ((got.float() - want).abs().max() / want.abs().max()).item()
out["eager_err"], out["compile_err"] = rel(e), rel(c(x))
# torch.compile at the numerics an fp32 run holds candidates to: cuDNN's TF32 convolution off (PyTorch's default is
# on, which is why torch.compile's own kb_67 output is outside the fp32 tolerance); a fresh compile under the flag
torch.backends.cudnn.allow_tf32 = False
import torch._dynamo; torch._dynamo.reset()
with torch.no_grad():
    e32 = model(x); ms_e32 = triton.testing.do_bench(lambda: model(x), warmup=20, rep=300)
    c32 = torch.compile(model); y32 = c32(x); ms_c32 = triton.testing.do_bench(lambda: c32(x), warmup=20, rep=300)
out.update(eager_fp32=ms_e32, eager_fp32_err=rel(e32), compile_fp32=ms_c32, compile_fp32_err=rel(y32))
torch.backends.cudnn.allow_tf32 = True; torch._dynamo.reset()
print({k: out[k] for k in out}, flush=True)
A2 = [("    total = tl.zeros([BLOCK_C], dtype=tl.float32)\n", "    total2 = tl.zeros([BLOCK_P, BLOCK_C], dtype=tl.float32)\n"),
      ("        total += tl.sum(v, axis=0)\n", "        total2 += v\n    total = tl.sum(total2, axis=0)\n")]
TF = [(P[0], 'PRECISION="tf32"')]

# flat (stride 1, no padding only): output positions indexed over the input's width (OH x W, the KW - 1 extra columns
# per row masked out), so each K column of the A tile is one contiguous strip of x: one add per element, no div/mod
FLAT = [("        pm = ps < P\n        oh = ps // OW\n        ow = ps % OW\n",
         "        pm = (ps < (P // OW) * W) & (ps % W < OW)\n"),
        (OLD, """        for k0 in range(0, K, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            km = ks < K
            koff = (ks // (KH * KW)) * (H * W) + ((ks % (KH * KW)) // KW) * (dh * W) + (ks % KW) * dw
            a = tl.load(x_ptr + x_base + ps[:, None] + koff[None, :], mask=pm[:, None] & km[None, :], other=0.0).to(tl.float32)
            b = tl.load(w_ptr + cs[None, :] * K + ks[:, None], mask=km[:, None] & cm[None, :], other=0.0).to(tl.float32)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
"""),
        ("    TILES = triton.cdiv(P, BLOCK_P)\n", "    assert (sh, sw, ph, pw) == (1, 1, 0, 0)\n    TILES = triton.cdiv(OH * W, BLOCK_P)\n")]


# outer (stride 1, no padding only): no tensor cores, the conv as K rank-1 updates of the (positions x channels)
# accumulator in fp32 FMAs (exact), one contiguous strip of x and one row of the (K, C) weight per tap
OUTER = [("""        for k0 in range(0, K, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            km = ks < K
            ci = ks // (KH * KW)
            kr = ks % (KH * KW)
            if FLAT:
""", """        for k in range(0, K):
            a = tl.load(x_ptr + x_base + ps + ((k // (KH * KW)) * (H * W) + ((k % (KH * KW)) // KW) * (dh * W)
                        + (k % KW) * dw), mask=pm, other=0.0)
            b = tl.load(w_ptr + k * C + cs, mask=cm, other=0.0)
            acc += a[:, None] * b[None, :]
        if False:
            if FLAT:
"""), ("    wk = conv.weight.reshape(C, K)", "    wk = conv.weight.reshape(C, K).t().contiguous()"),
         ("    TILES = triton.cdiv(OH * W if flat else P, BLOCK_P)\n", "    assert flat\n    TILES = triton.cdiv(OH * W, BLOCK_P)\n")]

def first():
    bench("base", V())
    bench("tf32", V(), [(P[0], 'PRECISION="tf32"')])
    bench("ieee", V(), [(P[0], 'PRECISION="ieee"')])
    bench("nogelu", V(), [("        v = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))\n", "")])
    bench("bk32", V(), [("BLOCK_K = 16 if K <= 128 else 32", "BLOCK_K = 32")])
    bench("bk128", V(), [("BLOCK_K = 16 if K <= 128 else 32", "BLOCK_K = 128")])
    bench("p64", V(block=64)); bench("p256w8", V(block=256, warps=8)); bench("w8", V(warps=8))
    bench("s1", V(stages=1)); bench("s3", V(stages=3)); bench("split4", V(split=4)); bench("split64", V(split=64))
    bench("c32", V(), [("BLOCK_C = min(max(triton.next_power_of_2(C), 16), 64)", "BLOCK_C = 32")])
    bench("tf32_nogelu", V(), [(P[0], 'PRECISION="tf32"'), ("        v = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))\n", "")])
    TAP = [(OLD, NEW), ("BLOCK_K = 16 if K <= 128 else 32", "BLOCK_K = max(16, triton.next_power_of_2(Cin))")]
    bench("tap", V(), TAP)
    bench("tap_tf32", V(), TAP + [(P[0], 'PRECISION="tf32"')])
    bench("tap_nogelu", V(), TAP + [("        v = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))\n", "")])
    bench("tap_w8", V(warps=8), TAP)
    bench("tap_p64", V(block=64), TAP)
    bench("tap_p256w8", V(block=256, warps=8), TAP)


plans = {
 "a": [("s1", V(stages=1), []), ("s1_acc2d", V(stages=1), A2), ("s1_acc2d_w8", V(stages=1, warps=8), A2),
       ("s1_w8", V(stages=1, warps=8), []), ("s1_p256w8", V(stages=1, block=256, warps=8), []),
       ("s1_p256w8_acc2d", V(stages=1, block=256, warps=8), A2), ("s1_tf32", V(stages=1), TF),
       ("s1_acc2d_tf32", V(stages=1), A2 + TF)],
 "b": [("s1_p64", V(stages=1, block=64), []), ("s1_p64_acc2d", V(stages=1, block=64), A2),
       ("s1_split64", V(stages=1, split=64), []), ("s1_split4", V(stages=1, split=4), []),
       ("s1_acc2d_split64", V(stages=1, split=64), A2), ("s1_acc2d_split4", V(stages=1, split=4), A2),
       ("s1_c32_acc2d", V(stages=1), A2 + [("BLOCK_C = min(max(triton.next_power_of_2(C), 16), 64)", "BLOCK_C = 32")]),
       ("s1_acc2d_w2_p64", V(stages=1, block=64, warps=2), A2)],
 # fourth session, H200: flat 3.20 ms vs 3.89 (s1_split64) in the same process; every other flat variant slower,
 # flat with plain TF32 2.15 ms (1.0e-3 wrong). The flat path is in the template since: plans first/a/b/c edit the
 # template as it was at commit c9151e3 (`git show c9151e3:agent/data/kernels/conv2d_gap_fused.py.j2`)
 "c": [("s1_split64", V(stages=1, split=64), []), ("flat_s1_split64", V(stages=1, split=64), FLAT),
       ("flat_s1_split16", V(stages=1, split=16), FLAT), ("flat_s2_split64", V(stages=2, split=64), FLAT),
       ("flat_s1_w8", V(stages=1, warps=8, split=64), FLAT), ("flat_s1_p256w8", V(stages=1, block=256, warps=8, split=64), FLAT),
       ("flat_s1_p64", V(stages=1, block=64, split=64), FLAT), ("flat_tf32", V(stages=1, split=64), FLAT + TF),
       ("flat_nogelu", V(stages=1, split=64), FLAT + [("        v = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))\n", "")])],
 # not yet run on a GPU: the template as it is now (flat built in) against bf16 tensor-core emulations of fp32
 # products (Triton >= 3.6 on NVIDIA: bf16x3 ~ 16 mantissa bits at 1.5x TF32's MMA work, bf16x6 ~ fp32 at 3x) and
 # BLOCK_K 32 (K = 72 padded to 96 in 3 steps instead of 80 in 5); the harness's tolerance decides which count;
 # outer: no tensor cores, exact fp32 FMAs as rank-1 updates (checked in the interpreter: 1.4e-7 at 2x8x19x23)
 "d": [("flat", V(stages=1, split=64), []), ("flat_bf16x3", V(stages=1, split=64), [(P[0], 'PRECISION="bf16x3"')]),
       ("flat_bf16x6", V(stages=1, split=64), [(P[0], 'PRECISION="bf16x6"')]),
       ("flat_bk32", V(stages=1, split=64), [("BLOCK_K = 16 if K <= 128 else 32", "BLOCK_K = 32")]),
       ("flat_bf16x3_bk32", V(stages=1, split=64), [(P[0], 'PRECISION="bf16x3"'),
                                                     ("BLOCK_K = 16 if K <= 128 else 32", "BLOCK_K = 32")]),
       ("outer", V(stages=1, split=64), OUTER), ("outer_p64", V(stages=1, block=64, split=64), OUTER),
       ("outer_p256w8", V(stages=1, block=256, warps=8, split=64), OUTER)],
}
if sys.argv[1] == "first":
    first()
else:
    for tag, v, ed in plans[sys.argv[1]]:
        bench(tag, v, ed)
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), f"fused_variants_{sys.argv[1]}.json"), "w"), indent=1)
