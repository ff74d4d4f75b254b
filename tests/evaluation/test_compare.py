"""The harness's output comparison: chunked, references kept in float32 for 16-bit outputs."""

import torch

from kernelevolve.harness.runtime import compare as cmp
from kernelevolve.harness.runtime.configs import Tolerance

TOL = Tolerance(atol=1e-3, rtol=1e-2)


class Softmax(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x.float(), dim=-1).to(x.dtype)


def test_references_of_16_bit_outputs_are_kept_in_float32_and_shapes_as_meta():
    x = torch.randn(4, 300, dtype=torch.bfloat16)
    expected, refs = cmp.reference_outputs(Softmax(), [x])
    assert expected[0].is_meta and expected[0].dtype == torch.bfloat16 and tuple(expected[0].shape) == (4, 300)
    assert refs[0].dtype == torch.float32
    want = torch.softmax(x.double(), dim=-1)
    assert torch.allclose(refs[0].double(), want, rtol=1e-6, atol=0)
    _, refs32 = cmp.reference_outputs(Softmax(), [x.float()])
    assert refs32[0].dtype == torch.float64  # float32 outputs keep the float64 reference


def test_references_of_16_bit_outputs_are_computed_in_float32_without_tf32():
    """A 16-bit case's reference runs in float32 (what is kept anyway; float64 cost flash attention's judges
    seconds on the GPU), with TF32 off while it runs and the process's settings restored after."""
    seen = []

    class Probe(torch.nn.Module):
        def forward(self, x):
            seen.append((x.dtype, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32))
            return x * 2

    torch.backends.cudnn.allow_tf32 = True
    x = torch.randn(3, 5, dtype=torch.float16)
    _, refs = cmp.reference_outputs(Probe(), [x])
    assert seen == [(torch.float16, False, True), (torch.float32, False, False)]
    assert refs[0].dtype == torch.float32 and torch.equal(refs[0], x.float() * 2)
    assert torch.backends.cudnn.allow_tf32 is True
    seen.clear()
    cmp.reference_outputs(Probe(), [x.float()])
    assert [dtype for dtype, *_ in seen] == [torch.float32, torch.float64]
    assert cmp.precise_dtype([torch.empty(2, dtype=torch.bfloat16, device="meta")]) == torch.float32
    assert cmp.precise_dtype([torch.empty(2, dtype=torch.int64, device="meta")]) == torch.float64


def test_a_wrong_element_is_found_in_any_chunk_with_its_index(monkeypatch):
    monkeypatch.setattr(cmp, "CHUNK", 7)  # many chunks, the bad element in a late one
    x = torch.randn(5, 9, dtype=torch.float16)
    expected, refs = cmp.reference_outputs(Softmax(), [x])
    out = Softmax()(x)
    ok, message, abs_err, _ = cmp.compare([out], expected, refs, TOL)
    assert ok and message == "" and abs_err < 1e-3
    bad = out.clone()
    bad[3, 4] += 0.5
    bad[4, 8] -= 0.5
    ok, message, abs_err, _ = cmp.compare([bad], expected, refs, TOL)
    assert not ok
    assert message.startswith("2 of 45 elements outside atol=0.001 rtol=0.01")
    assert "first at [3, 4]" in message and abs_err > 0.4


def test_unwritten_elements_are_counted_over_all_chunks(monkeypatch):
    monkeypatch.setattr(cmp, "CHUNK", 4)
    x = torch.randn(3, 10, dtype=torch.bfloat16)
    expected, refs = cmp.reference_outputs(Softmax(), [x])
    out = Softmax()(x)
    out[0, 1] = float("nan")
    out[2, 9] = float("nan")
    ok, message, _, _ = cmp.compare([out], expected, refs, TOL)
    assert not ok and message.startswith("2 of 30 elements are NaN/Inf")


def test_integer_outputs_must_match_exactly_and_outputs_are_named(monkeypatch):
    monkeypatch.setattr(cmp, "CHUNK", 3)

    class Both(torch.nn.Module):
        def forward(self, x):
            return x * 2, x.argmax(dim=-1)

    x = torch.randn(6, 5)
    expected, refs = cmp.reference_outputs(Both(), [x])
    y, idx = Both()(x)
    assert cmp.compare([y, idx], expected, refs, TOL)[0]
    wrong = idx.clone()
    wrong[5] = (wrong[5] + 1) % 5
    ok, message, _, _ = cmp.compare([y, wrong], expected, refs, TOL)
    assert not ok and message == "output 1: 1 of 6 elements differ (integer output, exact match required)"
    ok, message, _, _ = cmp.compare([y.half(), idx], expected, refs, TOL)
    assert not ok and message == "output 0: dtype torch.float16, expected torch.float32"
    ok, message, _, _ = cmp.compare([y[:5], idx], expected, refs, TOL)
    assert not ok and message == "output 0: shape (5, 5), expected (6, 5)"


def test_non_finite_values_where_the_reference_has_them_too_are_not_compared(monkeypatch):
    monkeypatch.setattr(cmp, "CHUNK", 5)
    ref = torch.linspace(-1, 1, 12, dtype=torch.float32)
    ref[7] = float("inf")
    ref[9] = float("nan")
    out = ref.to(torch.bfloat16)
    meta = [out.to("meta")]
    ok, message, abs_err, _ = cmp.compare([out], meta, [ref], TOL)
    assert ok and abs_err < 1e-2
    out = out.clone()
    out[2] = float("inf")
    ok, message, _, _ = cmp.compare([out], meta, [ref], TOL)
    assert not ok and message.startswith("1 of 12 elements are NaN/Inf where the reference is finite")
    out[2] = ref[2] + 0.5
    ok, message, _, _ = cmp.compare([out], meta, [ref], TOL)
    assert not ok and "first at [2]" in message
