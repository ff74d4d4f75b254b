"""The parsers read the tools' real outputs recorded on an H200 (fixtures/h200/, see its README)
and agree with each other; truncated or foreign files are refused with one line."""

from pathlib import Path

import pytest

from kernelevolve.cli.profile_cmd import print_profile
from kernelevolve.paths import REPO_ROOT
from kernelevolve.profiling.tools import ProfileParseError
from kernelevolve.profiling.tools.ncu import parse_ncu_csv
from kernelevolve.profiling.tools.proton import parse_proton_hatchet
from kernelevolve.profiling.tools.torch import parse_torch_trace
from kernelevolve.profiling.roofline import roofline
from kernelevolve.profiling.schema import ProfileSummary
from kernelevolve.spec import load_spec

H200 = Path(__file__).parent / "fixtures" / "h200"
KERNELS = ["softmax", "rmsnorm", "cross_entropy", "flash_attention", "ikbo_lce", "ikbo_target_attention"]


def _read(kernel: str, name: str) -> str:
    return (H200 / kernel / name).read_text()


def _parsed(kernel: str):
    return (
        parse_torch_trace(_read(kernel, "torch_trace_0.json")),
        parse_ncu_csv(_read(kernel, "ncu_0.csv")),
        parse_proton_hatchet(_read(kernel, "proton_0.hatchet"), calls=3),
    )


@pytest.mark.parametrize("kernel", KERNELS)
def test_three_tools_agree_on_the_kernels_and_their_time(kernel):
    torch, ncu, proton = _parsed(kernel)
    assert torch.calls == proton.calls == 3
    names = {k.name for k in torch.kernels}
    assert names == {k.name for k in proton.kernels} == {k.name for k in ncu}  # the Triton kernels, by name
    assert sum(k.launches for k in torch.kernels) == len(ncu)  # ncu profiles one call: a row per launch
    ncu_ms = sum(k.duration_ms for k in ncu)
    proton_ms = sum(k.gpu_ms for k in proton.kernels)
    assert torch.gpu_ms == pytest.approx(ncu_ms, rel=0.1) and proton_ms == pytest.approx(ncu_ms, rel=0.1)
    assert [s.name for s in proton.scopes] == [f"candidate.{kernel}"]  # the candidate's own proton.scope
    assert proton.scopes[0].gpu_ms == pytest.approx(proton_ms)
    assert torch.host_ms > 0 and torch.launch_api_ms > 0 and torch.peak_allocated_bytes > 0
    for k in ncu:
        for pct in (k.dram_throughput_pct, k.sm_throughput_pct, k.achieved_occupancy_pct, k.l2_hit_rate_pct):
            assert 0 <= pct <= 100
        assert 16 <= k.registers_per_thread <= 255 and k.grid_size > 0 and k.block_size % 32 == 0
        assert len(k.top_stalls) == 3 and k.top_stalls[0].cycles_per_issue >= k.top_stalls[2].cycles_per_issue
        assert not k.spills  # the reference kernels do not spill at these shapes


def test_softmax_moves_what_the_spec_says_at_most_of_dram_bandwidth():
    torch, (k,), _ = _parsed("softmax")
    spec = load_spec(REPO_ROOT / "specs" / "softmax.yaml")
    case = spec.cases("cuda")[0]  # M=524288, N=256: the shape the fixture was recorded at
    nbytes, flops = spec.roofline(case)
    assert (k.dram_read_bytes + k.dram_write_bytes) == pytest.approx(nbytes, rel=0.1)
    assert torch.allocated_bytes_per_call == nbytes // 2  # the output, written once per call
    assert k.dram_throughput_pct > 70 and k.top_stalls[0].reason == "long_scoreboard"  # waiting on DRAM loads
    r = roofline(k.duration_ms, "ncu", nbytes, flops, spec.hardware)
    assert r.bound == "memory" and 0.8 < r.memory_fraction < 1.1


def test_flash_attention_profile_shows_its_register_and_occupancy_limits():
    _, (k,), _ = _parsed("flash_attention")
    assert k.registers_per_thread == 255 and k.achieved_occupancy_pct < 20
    assert k.shared_bytes_per_block > 64 * 1024 and k.l2_hit_rate_pct > 80 and k.dram_throughput_pct < 20


@pytest.mark.parametrize(
    "name,parse",
    [
        ("torch_trace_0.json", parse_torch_trace),
        ("ncu_0.csv", parse_ncu_csv),
        ("proton_0.hatchet", lambda text: parse_proton_hatchet(text, 3)),
    ],
)
def test_truncated_and_foreign_files_are_refused_in_one_line(name, parse):
    text = _read("ikbo_lce", name)
    others = [_read("ikbo_lce", n) for n in ("torch_trace_0.json", "ncu_0.csv", "proton_0.hatchet") if n != name]
    for bad in [text[: len(text) // 2], text[: len(text) - 40], *others, "", "{}", "[1, 2]"]:
        with pytest.raises(ProfileParseError) as e:
            parse(bad)
        message = str(e.value)
        assert "\n" not in message and message.split(":")[0] in ("torch.profiler trace", "ncu CSV", "Proton hatchet")


def test_the_profile_table_reads_at_80_columns(capsys):
    torch, ncu, proton = _parsed("ikbo_lce")
    summary = ProfileSummary(
        label="B=1024,M=433 bfloat16",
        tools=["torch", "ncu", "proton"],
        torch=torch,
        ncu=ncu,
        proton=proton,
        roofline=roofline(0.44, "ncu", 9.0e8, 3.0e11, "h200"),
        seconds=12.0,
    )
    print_profile(summary)
    out = capsys.readouterr().out
    assert "roofline: 0.4400 ms (ncu)" in out and "_compress_gemm" in out and "registers" in out.lower()
    assert "proton scope candidate.ikbo_lce" in out
    assert all(len(line) <= 80 for line in out.splitlines())
    text = summary.prompt_text()
    assert "252 registers/thread" in text and "top stalls: barrier" in text and "3 kernel launches per call" in text
