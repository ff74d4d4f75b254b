"""Marks for results nobody should believe before a person looked: implausible speedups or
throughput above the hardware's datasheet peak, and re-evaluations that disagree."""

from kernelevolve.evaluation.plausibility import disagreement, hardware_peaks, suspicious
from kernelevolve.evaluation.result import EvalResult, ShapeResult


def _timed(latency_ms: float, baseline_ms: float = 1.0, gbps: float | None = None, tflops: float | None = None):
    shape = ShapeResult(
        label="M=4096,N=8192 float32",
        params={},
        dtype="float32",
        correct=True,
        latency_ms=latency_ms,
        baseline_ms=baseline_ms,
        gbps=gbps,
        tflops=tflops,
    )
    return EvalResult(correct=True, timed=True, device="cuda", shapes=[shape])


def test_the_h200_document_gives_its_peaks():
    assert hardware_peaks("h200") == (4800.0, 989.0)
    assert hardware_peaks("no-such-gpu") == (None, None)


def test_a_61x_speedup_is_suspicious_and_a_2x_one_is_not():
    assert "61.0x" in suspicious(_timed(1 / 61), "h200")
    assert suspicious(_timed(0.5), "h200") is None
    assert suspicious(_timed(1 / 11), "h200", bound=12.0) is None  # the bound is configurable


def test_bandwidth_or_throughput_above_the_peak_is_suspicious():
    assert "above the h200 peak of 4800 GB/s" in suspicious(_timed(0.5, gbps=5200.0), "h200")
    assert "TFLOP/s" in suspicious(_timed(0.5, tflops=1200.0), "h200")
    assert suspicious(_timed(0.5, gbps=4100.0, tflops=700.0), "h200") is None


def test_failed_or_untimed_results_are_never_marked():
    failed = _timed(1 / 61)
    failed.correct = False
    assert suspicious(failed, "h200") is None
    untimed = _timed(1 / 61)
    untimed.timed = False
    assert suspicious(untimed, "h200") is None


def test_re_evaluations_agree_within_noise_and_disagree_beyond_it():
    assert disagreement(_timed(0.100), _timed(0.110)) is None
    assert "apart" in disagreement(_timed(0.100), _timed(0.200))
    # A few-microsecond call: 0.6 us of launch jitter is 16% but not a disagreement; 3 us is.
    assert disagreement(_timed(0.0046), _timed(0.0040)) is None
    assert "apart" in disagreement(_timed(0.0131), _timed(0.0165))
    second = _timed(0.1)
    second.correct, second.failure, second.message = False, "inconsistent", "timed call 3 was wrong"
    assert "re-evaluation failed (inconsistent)" in disagreement(_timed(0.1), second)


def test_an_honest_20x_kernel_within_the_hardware_is_not_held():
    """Block-diagonal attention against a dense-mask SDPA: 20x faster, at a throughput the GPU can do."""
    assert suspicious(_timed(1 / 20, tflops=450.0), "h200") is None
    assert suspicious(_timed(1 / 20, gbps=3000.0), "h200") is None
    assert "20.0x" in suspicious(_timed(1 / 20), "h200")  # no bytes/flops in the spec: the flat bound
