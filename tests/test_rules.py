"""agent.harness.judge.rules: the run-time rules, judged on recorded traces (synthetic here; trace.py records real ones)."""

from __future__ import annotations

from agent.harness.job import Launch, Op, Read, Span, Storage, Trace, Traffic, TrialRecord
from agent.harness.judge.rules import floor_ms, judge, round_trips, traced
from agent.schema import StageRules

MB = 1 << 20
FUSION = StageRules(forbid_store_then_load=True, max_intermediate_write=0.125, intermediate_reason="why")
# storages: 0 the input x (4 MB), 1 the conv output (32 MB), 2 the returned tensor (8 KB), 3 partials (64 KB)
STORAGES = [Storage(id=0, bytes=4 * MB), Storage(id=1, bytes=32 * MB, shape=[2, 64, 256, 256]),
            Storage(id=2, bytes=8192), Storage(id=3, bytes=65536)]
CONV = Op(name="convolution", kind="heavy", calls=1, in_bytes=4 * MB + 4096, data_bytes=4 * MB, largest_bytes=32 * MB)
REFERENCE = Trace(ops=[CONV, Op(name="mean", kind="compute", calls=2, in_bytes=32 * MB, data_bytes=32 * MB)],
                  storages=STORAGES[:3], inputs=[0], outputs=[2])


def trial(launches: list[Launch], ops: list[Op] | None = None, outputs: list[int] | None = None) -> TrialRecord:
    trace = Trace(launches=launches, ops=[CONV] if ops is None else ops, storages=STORAGES, inputs=[0],
                  outputs=[2] if outputs is None else outputs)
    return TrialRecord(id=0, size="full", distribution="problem", buffer="fresh", launches=len(launches),
                       output_launched=True, output_shapes=[[2, 64, 1, 1]], trace=trace)


def span(sid: int, lo: int = 0, hi: int | None = None) -> Span:
    return Span(id=sid, lo=lo, hi=next(s.bytes for s in STORAGES if s.id == sid) if hi is None else hi)


def test_a_single_fused_kernel_that_writes_only_the_output_is_legal():
    fused = Launch(kernel="gap", args=[span(1), span(2)], written=[span(2)])
    assert traced(trial([fused]), REFERENCE, FUSION) is None


def test_partial_sums_read_back_by_a_second_kernel_are_legal():
    partial = Launch(kernel="partial", args=[span(1), span(3)], written=[span(3)])
    combine = Launch(kernel="combine", args=[span(3), span(2)], written=[span(2)])
    assert traced(trial([partial, combine]), REFERENCE, FUSION) is None


def test_an_intermediate_as_large_as_the_data_is_refused_with_its_kernel_and_size():
    scale = Launch(kernel="scale", args=[span(1), span(1)], written=[span(1)])
    reduce = Launch(kernel="reduce", args=[span(1), span(2)], written=[span(2)])
    msg = traced(trial([scale, reduce]), REFERENCE, FUSION)
    assert msg and "kernel `scale` wrote 32.00 MB" in msg and "2x64x256x256" in msg and "why" in msg
    assert traced(trial([scale, reduce]), REFERENCE, StageRules()) is None  # other stages allow it


def test_launches_writing_disjoint_parts_of_the_output_are_not_a_round_trip():
    out = Storage(id=2, bytes=32 * MB)
    halves = [Launch(kernel="k", args=[span(1), Span(id=2, lo=i * 16 * MB, hi=(i + 1) * 16 * MB)],
                     written=[Span(id=2, lo=i * 16 * MB, hi=(i + 1) * 16 * MB)]) for i in range(2)]
    t = trial(halves)
    t.trace.storages = [*STORAGES[:2], out]
    assert traced(t, REFERENCE, FUSION) is None
    reread = Launch(kernel="again", args=[Span(id=2, lo=0, hi=32 * MB)], written=[])
    t.trace.launches.append(reread)
    assert "reads the 16.00 MB that kernel `k` wrote" in (traced(t, REFERENCE, FUSION) or "")


def test_where_the_output_came_from_is_the_ablated_calls_question_not_a_rule_on_the_trace():
    """A dummy kernel beside an output PyTorch wrote, or an accumulator whose zeros change no byte: neither is judged
    here any more (was: "not written by any Triton kernel"); the ablated call tells them apart
    (agent.harness.worker.ablation): the first is still right with the launches' writes destroyed, the second is NaN."""
    dummy = Launch(kernel="touch", args=[span(3)], written=[span(3)])
    assert traced(trial([dummy]), REFERENCE, StageRules()) is None
    accumulate = Launch(kernel="accumulate", args=[span(1), span(2)], written=[])
    assert traced(trial([accumulate]), REFERENCE, FUSION) is None


def test_an_intermediate_written_in_sixteen_launches_is_summed_over_the_call():
    """Sixteen launches of 2 MB each (each under the 4 MB limit), the 32 MB intermediate read back by a last kernel
    that was given only the output (its pointer reached the buffer another way): 32 MB written outside the output."""
    pieces = [Launch(kernel="piece", args=[span(0), Span(id=1, lo=i * 2 * MB, hi=(i + 1) * 2 * MB)],
                     written=[Span(id=1, lo=i * 2 * MB, hi=(i + 1) * 2 * MB)]) for i in range(16)]
    reduce = Launch(kernel="reduce", args=[span(2)], written=[span(2)])
    msg = traced(trial([*pieces, reduce]), REFERENCE, FUSION)
    assert msg and "wrote 32.00 MB outside the returned tensor in 16 launches" in msg and "2x64x256x256" in msg
    assert traced(trial([*pieces[:1], reduce]), REFERENCE, FUSION) is None  # one sixteenth alone is allowed


def test_on_a_gpu_a_write_past_the_returned_view_in_its_own_storage_is_outside_the_output():
    """No per-store record there: the changed spans of the returned tensor's storage beyond the view it returned
    (an intermediate parked past the output's end) count; the view's own bytes do not."""
    parked = Launch(kernel="parked", args=[span(1), Span(id=2, lo=0, hi=8192 + 32 * MB)],
                    written=[Span(id=2, lo=0, hi=8192 + 32 * MB)])
    t = trial([parked])
    t.trace.storages = [*STORAGES[:2], Storage(id=2, bytes=8192 + 32 * MB)]
    t.trace.output_spans = [Span(id=2, lo=0, hi=8192)]
    assert "wrote 32.00 MB outside the returned tensor in 1 launches" in (traced(t, REFERENCE, FUSION) or "")
    t.trace.launches = [parked.model_copy(update={"written": [Span(id=2, lo=0, hi=8192)]})]
    assert traced(t, REFERENCE, FUSION) is None


def test_measured_traffic_counts_the_outputs_own_storage_beyond_its_extent_and_every_reload():
    """CPU mode records every store and load: an intermediate parked in the returned tensor's storage past the
    returned view, and read back within the same launch, is 32 MB written outside the output; a reload alone (the
    same bytes rewritten and reread in one buffer of 2 MB, sixteen times) is a round trip of 32 MB."""
    one = Launch(kernel="parked", args=[span(0), Span(id=2, lo=0, hi=8192)], written=[Span(id=2, lo=0, hi=8192)])
    t = trial([one])
    t.trace.measured = True
    t.trace.traffic = [Traffic(id=2, written=32 * MB, reloaded=32 * MB)]
    assert "wrote 32.00 MB outside the returned tensor in 1 launches" in (traced(t, REFERENCE, FUSION) or "")
    t.trace.traffic = [Traffic(id=3, written=2 * MB, reloaded=32 * MB)]
    assert "read back 32.00 MB of what they had written" in (traced(t, REFERENCE, FUSION) or "")
    t.trace.traffic = [Traffic(id=3, written=2 * MB, reloaded=3 * MB)]
    assert traced(t, REFERENCE, FUSION) is None
    assert round_trips([t], FUSION) == ("memory traffic of the kernels: 2.00 MB written outside the output, 3.00 MB "
                                        "read back after being written (the most in one call; fused, both are 0)")
    assert round_trips([t], StageRules()) == ""  # reported where the stage prescribes fusion
    assert traced(t, REFERENCE, StageRules()) is None


def test_pytorch_computing_on_the_data_is_refused_but_preparing_weights_is_not():
    gap = Launch(kernel="gap", args=[span(1), span(2)], written=[span(2)])
    on_data = Op(name="mean", kind="compute", calls=1, in_bytes=32 * MB, data_bytes=32 * MB, largest_bytes=32 * MB)
    msg = traced(trial([gap], ops=[CONV, on_data]), REFERENCE, StageRules())
    assert msg and "aten.mean x1 on 32.00 MB" in msg
    on_weights = Op(name="sum", kind="compute", calls=1, in_bytes=8 * MB, data_bytes=0, largest_bytes=8 * MB)
    assert traced(trial([gap], ops=[CONV, on_weights]), REFERENCE, StageRules()) is None


def test_heavy_layers_may_stay_in_pytorch_up_to_what_the_model_feeds_them():
    gap = Launch(kernel="gap", args=[span(1), span(2)], written=[span(2)])
    channels_last = Op(name="convolution", kind="heavy", calls=1, in_bytes=CONV.in_bytes, data_bytes=4 * MB)
    assert traced(trial([gap], ops=[channels_last]), REFERENCE, StageRules()) is None
    pooling_conv = Op(name="convolution", kind="heavy", calls=2, in_bytes=CONV.in_bytes + 32 * MB, data_bytes=36 * MB)
    assert "aten.convolution" in (traced(trial([gap], ops=[pooling_conv]), REFERENCE, StageRules()) or "")
    matmul = Op(name="mm", kind="heavy", calls=1, in_bytes=32 * MB, data_bytes=32 * MB)
    assert "PyTorch computed over 32.00 MB" in (traced(trial([gap], ops=[CONV, matmul]), REFERENCE, StageRules()) or "")


def test_a_heavy_layer_the_model_does_not_run_is_pytorchs_compute_on_the_data_it_reads():
    """A (16 x 576) @ (576 x 128) matmul finishing per-tap sums a kernel took: 36 KB of data (the weight is not the
    data) against the 4 MB the work share allows: honest. The same mm over the whole input: refused, at any size (was:
    a fixed 64 KB heavy-layer allowance, which held all the data at CPU sizes)."""
    gap = Launch(kernel="taps", args=[span(0), span(3)], written=[span(3)])
    finish = Op(name="mm", kind="heavy", calls=1, in_bytes=36 * 1024 + 288 * 1024, data_bytes=36 * 1024)
    assert traced(trial([gap], ops=[finish]), REFERENCE, StageRules()) is None
    whole = Op(name="mm", kind="heavy", calls=1, in_bytes=4 * MB + 4096, data_bytes=4 * MB + 4096)
    small = REFERENCE.model_copy(update={"storages": [Storage(id=0, bytes=60_000)],
                                         "ops": [Op(name="convolution", kind="heavy", largest_bytes=60_000)]})
    t = trial([gap], ops=[whole.model_copy(update={"in_bytes": 40_000, "data_bytes": 40_000})])
    t.trace.storages = [Storage(id=0, bytes=60_000)]
    assert "aten.mm" in (traced(t, small, StageRules()) or "")


def test_every_call_must_launch_but_may_finish_with_pytorch():
    idle = TrialRecord(id=3, size="odd", distribution="randn", buffer="same buffer, new values", launches=0,
                       output_shapes=[[1]])
    assert "launched no Triton kernel (size odd, randn inputs" in (judge([idle], {}, StageRules()) or "")
    beside = idle.model_copy(update={"launches": 2, "output_launched": False})  # a softmax of a size-1 dim after
    assert judge([beside], {}, StageRules()) is None
    # an output with no elements (a batch of 1 trimmed by [:-1]) needs no kernel; one element more does
    assert judge([idle.model_copy(update={"output_shapes": [[0, 1000]]})], {}, StageRules()) is None
    assert judge([idle.model_copy(update={"output_shapes": [[0, 1000], [1]]})], {}, StageRules())


def test_the_physical_floor_is_the_input_read_once_at_peak_bandwidth():
    assert abs(floor_ms(64 * MB, 3350.0) - 0.9 * 64 * MB / 3350e9 * 1e3) < 1e-9  # 0.9: the settings' floor_factor


# ---------------------------------------------------------------- heavy layers by family


def test_a_heavy_layer_is_bounded_by_its_family_whatever_name_the_call_has():
    """torch.compile runs the Model's Linear (aten.addmm) as aten.mm plus a Triton bias add."""
    addmm = Op(name="addmm", kind="heavy", calls=1, in_bytes=40 * MB, data_bytes=8 * MB)
    reference = Trace(ops=[addmm], storages=STORAGES[:3], inputs=[0], outputs=[2])
    gap = Launch(kernel="bias_gap", args=[span(1), span(2)], written=[span(2)])
    mm = Op(name="mm", kind="heavy", calls=1, in_bytes=40 * MB - 4096, data_bytes=8 * MB)
    assert traced(trial([gap], ops=[mm]), reference, StageRules()) is None
    twice = Op(name="mm", kind="heavy", calls=2, in_bytes=80 * MB, data_bytes=16 * MB)
    msg = traced(trial([gap], ops=[twice, addmm.model_copy(update={"in_bytes": 0})]), reference, StageRules())
    assert msg and "aten.mm, aten.addmm on 80.00 MB" in msg and "feeds its matmul layers 40.00 MB" in msg
    conv = Op(name="cudnn_convolution", kind="heavy", calls=1, in_bytes=CONV.in_bytes)
    assert traced(trial([gap], ops=[conv]), REFERENCE, StageRules()) is None  # the convolution family


# ---------------------------------------------------------------- memory-fusion: operands of a heavy layer

# 4 the channels-last copy of x (4 MB, over the 4 MB limit of 1/8 of the 32 MB conv output by a little)
XC = Storage(id=4, bytes=4 * MB + 4096, shape=[2, 32, 128, 128])
COPY = Launch(kernel="to_channels_last", args=[span(0), Span(id=4, lo=0, hi=XC.bytes)],
              written=[Span(id=4, lo=0, hi=XC.bytes)])
REDUCE = Launch(kernel="gap", args=[span(1), span(2)], written=[span(2)])


def operand_trial(reads: list[Read], launches: list[Launch] | None = None, ops: list[Op] | None = None) -> TrialRecord:
    t = trial(launches or [COPY, REDUCE], ops=ops)
    t.trace.storages = [*STORAGES, XC]
    t.trace.reads = reads
    return t


def test_a_buffer_over_the_limit_that_only_the_heavy_layer_reads_is_its_operand_not_an_intermediate():
    conv_reads = Read(op="convolution", kind="heavy", after=1, storages=[4])
    assert traced(operand_trial([conv_reads]), REFERENCE, FUSION) is None


def test_an_operand_any_other_operator_reads_afterwards_is_an_intermediate():
    reads = [Read(op="convolution", kind="heavy", after=1, storages=[4]), Read(op="clone", kind="free", after=1, storages=[4])]
    msg = traced(operand_trial(reads), REFERENCE, FUSION)
    assert msg and "kernel `to_channels_last` wrote 4.00 MB" in msg and "aten.clone reads it afterwards" in msg


def test_what_read_it_before_the_write_does_not_count_but_nothing_reading_it_after_is_refused():
    before = Read(op="clone", kind="free", after=0, storages=[4])
    assert traced(operand_trial([before, Read(op="convolution", kind="heavy", after=1, storages=[4])]),
                  REFERENCE, FUSION) is None
    assert "no heavy layer reads it afterwards" in (traced(operand_trial([before]), REFERENCE, FUSION) or "")


def test_an_operand_read_back_by_a_triton_kernel_is_a_round_trip():
    peek = Launch(kernel="peek", args=[span(1), Span(id=4, lo=0, hi=XC.bytes), span(2)], written=[span(2)])
    msg = traced(operand_trial([Read(op="convolution", kind="heavy", after=1, storages=[4])], [COPY, peek]),
                 REFERENCE, FUSION)
    assert msg and "kernel `peek` reads the 4.00 MB that kernel `to_channels_last` wrote" in msg


def test_an_operand_needs_the_heavy_layer_no_more_often_and_no_larger_than_the_model_runs_it():
    reads = [Read(op="convolution", kind="heavy", after=1, storages=[4])]
    twice = CONV.model_copy(update={"calls": 2})
    msg = traced(operand_trial(reads, ops=[twice]), REFERENCE, FUSION)
    assert msg and "the convolution layers run 2 times, the problem's Model 1" in msg
    matmul = Op(name="mm", kind="heavy", calls=1, in_bytes=4096)
    msg = traced(operand_trial([Read(op="mm", kind="heavy", after=1, storages=[4])], ops=[CONV, matmul]), REFERENCE,
                 FUSION)
    assert msg and "the matmul layers run 1 times, the problem's Model 0" in msg
    im2col = Launch(kernel="im2col", args=[span(0), Span(id=4, lo=0, hi=9 * 4 * MB)], written=[Span(id=4, lo=0, hi=9 * 4 * MB)])
    msg = traced(operand_trial(reads, [im2col, REDUCE]), REFERENCE, FUSION)
    assert msg and "larger than what the problem's Model feeds its convolution layers (4.00 MB)" in msg


def test_a_heavy_layer_must_return_what_the_models_returns_not_a_reduction_spelled_as_one():
    """The allowance is for the Model's own layer: a depthwise convolution with whole-image kernels reads x (no more
    than the Model's layer reads) but returns per-channel sums, the stage's whole reduction done by PyTorch."""
    model_conv = CONV.model_copy(update={"out_bytes": 32 * MB})
    reference = REFERENCE.model_copy(update={"ops": [model_conv, *REFERENCE.ops[1:]]})
    combine = Launch(kernel="combine", args=[span(3), span(2)], written=[span(2)])
    pooling = Op(name="convolution", kind="heavy", calls=1, in_bytes=CONV.in_bytes + MB, data_bytes=4 * MB,
                 largest_bytes=4 * MB, out_bytes=4096)
    msg = traced(trial([combine], ops=[pooling]), reference, StageRules()) or ""
    assert "returns 4.0 KB" in msg and "32.00 MB" in msg and "not the Model's layer" in msg
    bias_folded = model_conv.model_copy(update={"name": "mkldnn_convolution"})  # the same layer under another name
    gap = Launch(kernel="gap", args=[span(1), span(2)], written=[span(2)])
    assert traced(trial([gap], ops=[bias_folded]), reference, StageRules()) is None


def test_a_heavy_call_is_the_models_layer_call_by_call_not_only_by_the_familys_totals():
    """A depthwise convolution taking the four sums the mean needs (a reduction: almost nothing returned per byte
    read), beside a strided dummy convolution writing zeros the size of the Model's output: the family's totals are
    the Model's, each call's yield is not. The Model's layer split by image still yields what the Model's does."""
    model_conv = CONV.model_copy(update={"out_bytes": 32 * MB, "least_yield": 32 * MB / CONV.in_bytes})
    reference = REFERENCE.model_copy(update={"ops": [model_conv, *REFERENCE.ops[1:]]})
    gap = Launch(kernel="gap", args=[span(1), span(2)], written=[span(2)])
    sums = 4096 / (CONV.in_bytes + MB)
    reduction = Op(name="convolution", kind="heavy", calls=2, in_bytes=CONV.in_bytes + MB + 4096,
                   data_bytes=4 * MB, largest_bytes=32 * MB, out_bytes=32 * MB + 4096, least_yield=sums)
    msg = traced(trial([gap], ops=[reduction]), reference, StageRules()) or ""
    assert "bytes per byte it reads" in msg and "not the Model's layer" in msg
    per_image = model_conv.model_copy(update={"calls": 2, "in_bytes": CONV.in_bytes + 4096,
                                              "least_yield": 16 * MB / (2 * MB + 4096)})
    assert traced(trial([gap], ops=[per_image]), reference, StageRules()) is None


def test_the_allowances_scale_with_the_problems_largest_tensor_not_with_a_buffer_the_candidate_allocates():
    """An empty buffer (or an expanded view) eight times the conv output costs nothing and would raise the largest
    tensor eightfold: PyTorch's compute allowance and the intermediate limit with it."""
    room = Op(name="empty", kind="free", calls=1, largest_bytes=8 * 32 * MB)
    mean = Op(name="mean", kind="compute", calls=1, in_bytes=32 * MB, data_bytes=32 * MB)
    copy = Launch(kernel="copy", args=[span(3), span(2)], written=[span(2)])
    msg = traced(trial([copy], ops=[CONV, room, mean]), REFERENCE, StageRules()) or ""
    assert "PyTorch computed over 32.00 MB" in msg and "the largest tensor is 32.00 MB" in msg
    scale = Launch(kernel="scale", args=[span(1), span(1)], written=[span(1)])
    reduce = Launch(kernel="reduce", args=[span(1), span(2)], written=[span(2)])
    assert "kernel `scale` wrote 32.00 MB" in (traced(trial([scale, reduce], ops=[CONV, room]), REFERENCE, FUSION) or "")


def test_a_launch_given_an_object_that_is_not_a_tensor_or_a_plain_value_is_refused():
    duck = Launch(kernel="copy", args=[span(2)], written=[span(2)], foreign=["Staged"])
    found = traced(trial([duck]), REFERENCE, FUSION)
    assert found is not None and "`copy` was given Staged" in found


def test_a_forward_that_watches_the_gpus_progress_from_the_host_is_refused():
    watched = trial([Launch(kernel="gap", args=[span(1), span(2)], written=[span(2)])])
    assert watched.trace is not None
    watched.trace.watching = ["aten.empty: pinned host memory"]
    found = traced(watched, REFERENCE, FUSION)
    assert found is not None and "pinned host memory" in found


def test_a_numeric_flag_that_differed_where_an_operator_ran_is_refused_naming_it():
    fused = Launch(kernel="gap", args=[span(1), span(2)], written=[span(2)])
    flagged = trial([fused])
    assert flagged.trace is not None
    flagged.trace.flags = ["cudnn.benchmark False -> True at aten.convolution"]
    msg = traced(flagged, REFERENCE, StageRules())
    assert msg and "backend flags" in msg and "cudnn.benchmark False -> True at aten.convolution" in msg
    assert traced(trial([fused]), REFERENCE, StageRules()) is None


def test_a_finishing_mean_is_measured_against_all_the_data_the_forward_is_handed():
    """A cross-entropy answer: per-row losses in Triton, their mean in PyTorch. At CPU sizes (7 classes) the mean
    reads 12 B against 84 B of logits (over 1/8), but the forward is handed logits and targets, 108 B: the mean is a
    finishing op (was: refused at the cpu-odd size, 2 public answers). PyTorch doing the reduction itself still is."""
    logits, targets, losses, out = (Storage(id=0, bytes=84), Storage(id=1, bytes=24), Storage(id=2, bytes=12),
                                    Storage(id=3, bytes=4))
    ce = Launch(kernel="ce_rows", args=[Span(id=0, lo=0, hi=84), Span(id=1, lo=0, hi=24), Span(id=2, lo=0, hi=12)],
                written=[Span(id=2, lo=0, hi=12)])
    ref = Trace(ops=[Op(name="_log_softmax", kind="compute", calls=1, in_bytes=84, data_bytes=84, largest_bytes=84)],
                storages=[logits, targets, out], inputs=[0, 1], outputs=[3])

    def judged(ops: list[Op]) -> str | None:
        trace = Trace(launches=[ce], ops=ops, storages=[logits, targets, losses, out], inputs=[0, 1], outputs=[3])
        return traced(TrialRecord(id=0, size="cpu-odd", distribution="problem", buffer="fresh", launches=1,
                                  output_launched=False, output_shapes=[[]], trace=trace), ref, StageRules())

    assert judged([Op(name="mean", kind="compute", calls=1, in_bytes=12, data_bytes=12, largest_bytes=12)]) is None
    assert "aten.log" in (judged([Op(name="log", kind="compute", calls=1, in_bytes=84, data_bytes=84,
                                     largest_bytes=84)]) or "")


def test_index_only_copies_are_not_compute():
    """F.unfold before a Triton GEMM, the Model's own torch.cat before a Triton scan: each output element is one input
    element, at a position the shapes alone fix (was: refused as PyTorch computing over the whole input). A pool,
    a gather by computed index or col2im (which sums) still compute."""
    from agent.harness.worker.trace import operator_kinds

    kinds = operator_kinds()
    for name in ("im2col", "cat", "stack", "constant_pad_nd", "repeat", "flip", "slice_scatter"):
        assert kinds.kind(name) == "free", name
    for name in ("col2im", "max_pool2d_with_indices", "gather", "mean", "cumsum"):
        assert kinds.kind(name) == "compute", name


def test_one_of_the_models_two_layers_of_a_family_kept_in_pytorch_is_the_models_layer():
    """A depthwise-separable convolution: the Model runs a depthwise then a pointwise convolution; an answer keeps
    the depthwise one (the Model's own layer, fed what the Model feeds it) and writes the pointwise in Triton. The
    family returns less than both of the Model's layers together, and as much per byte fed as the Model's least
    (was: refused, 'returns 21.1 KB where the Model's convolution layers return 0.08 MB')."""
    depthwise = Op(name="convolution", kind="heavy", calls=1, in_bytes=25 * 1024, data_bytes=24 * 1024,
                   largest_bytes=24 * 1024, out_bytes=21 * 1024, least_yield=0.84)
    pointwise = Op(name="convolution", kind="heavy", calls=1, in_bytes=21 * 1024 + 512, data_bytes=21 * 1024,
                   largest_bytes=56 * 1024, out_bytes=56 * 1024, least_yield=2.6)
    ref = REFERENCE.model_copy(update={"ops": [Op(name="convolution", kind="heavy", calls=2,
                                                  in_bytes=depthwise.in_bytes + pointwise.in_bytes,
                                                  data_bytes=45 * 1024, largest_bytes=56 * 1024,
                                                  out_bytes=77 * 1024, least_yield=0.84)]})
    x, mid, out = Storage(id=0, bytes=24 * 1024), Storage(id=1, bytes=21 * 1024), Storage(id=2, bytes=56 * 1024)
    ref = ref.model_copy(update={"storages": [x, out], "inputs": [0], "outputs": [2]})
    point = Launch(kernel="pointwise", args=[Span(id=1, lo=0, hi=mid.bytes), Span(id=2, lo=0, hi=out.bytes)],
                   written=[Span(id=2, lo=0, hi=out.bytes)])

    def judged(op: Op) -> str | None:
        trace = Trace(launches=[point], ops=[op], storages=[x, mid, out], inputs=[0], outputs=[2])
        return traced(TrialRecord(id=0, size="cpu", distribution="problem", buffer="fresh", launches=1,
                                  output_launched=True, output_shapes=[[1]], trace=trace), ref, StageRules())

    assert judged(depthwise) is None
    reduction = depthwise.model_copy(update={"out_bytes": 64, "least_yield": 64 / depthwise.in_bytes})
    assert "not the Model's layer" in (judged(reduction) or "")
