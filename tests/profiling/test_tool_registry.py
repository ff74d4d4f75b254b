"""Profiling tools are records in one registry: a tool written in one module (toy_tool.py) and added to
TOOLS runs in the sandbox through the one template, and its part reaches the stored summary, the prompt,
`kernelevolve profile`'s output, the roofline line and `run --profile`, with no other file edited; and
summaries stored before tools had modules of their own load as they were."""

import json
from pathlib import Path

from kernelevolve.cli.profile_cmd import print_profile, profile_settings_or_fail
from kernelevolve.paths import KNOWLEDGE_BASE, REPO_ROOT
from kernelevolve.profiling.collect import profile_candidate
from kernelevolve.profiling.schema import ProfileSummary
from kernelevolve.profiling.tools import TOOLS
from kernelevolve.profiling.tools.ncu import NcuKernel
from kernelevolve.profiling.tools.torch import TorchProfile
from kernelevolve.spec import load_spec
from tests.profiling import toy_tool

SPEC = load_spec(REPO_ROOT / "specs" / "softmax.yaml")
KERNEL = (KNOWLEDGE_BASE / "kernels" / "softmax.py").read_text()
STORED = json.loads((Path(__file__).parent / "fixtures" / "stored_summaries.json").read_text())


def test_a_tool_of_one_module_runs_through_the_registry(monkeypatch, capsys):
    monkeypatch.setitem(TOOLS, "wallclock", toy_tool.TOOL)
    cases = SPEC.cases("interpret")[:1]
    (summary,) = profile_candidate(SPEC, KERNEL, cases, ["wallclock"], device="interpret", timeout_s=120)
    assert summary.tools == ["wallclock"] and not summary.errors, summary.errors
    part = summary.parts["wallclock"]
    assert isinstance(part, toy_tool.WallClock) and part.calls == 3 and part.ms_per_call > 0
    assert part.note == "within 120 s"  # its own config key reached its harness in the sandbox
    assert summary.roofline.latency_source == "wallclock" and summary.roofline.latency_ms == part.ms_per_call
    assert f"- wall clock: {part.ms_per_call:.3f} ms per call over 3 calls" in summary.prompt_text()

    stored = json.loads(json.dumps(summary.model_dump()))  # as the profiles table keeps it
    assert list(stored)[:6] == ["label", "tools", "torch", "ncu", "proton", "wallclock"]
    assert stored["torch"] is None and stored["wallclock"]["ms_per_call"] == part.ms_per_call
    back = ProfileSummary.model_validate(stored)
    assert back.parts["wallclock"] == part and back.prompt_text() == summary.prompt_text()

    print_profile(back)
    out = capsys.readouterr().out
    assert f"wall clock: {part.ms_per_call:.3f} ms per call (within 120 s)" in out
    assert profile_settings_or_fail("wallclock", "interpret", 0.05, 60.0, None)["tools"] == ["wallclock"]
    # a tool named twice is profiled once
    assert profile_settings_or_fail("wallclock,wallclock", "interpret", 0.05, 60.0, None)["tools"] == ["wallclock"]

    monkeypatch.undo()  # a stored key of a tool no longer registered is left aside, as unknown keys always were
    gone = ProfileSummary.model_validate(stored)
    assert gone.parts == {} and "wall clock" not in gone.prompt_text()


def test_summaries_stored_before_load_and_store_as_they_were():
    for data, text in zip(STORED["summaries"], STORED["prompt_texts"]):
        summary = ProfileSummary.model_validate(data)
        assert summary.prompt_text() == text
        assert json.dumps(summary.model_dump()) == json.dumps(data)  # same keys, same order, same values
    softmax, torch_only, ncu_empty, _ = (ProfileSummary.model_validate(d) for d in STORED["summaries"])
    assert isinstance(softmax.parts["torch"], TorchProfile) and isinstance(softmax.parts["ncu"][0], NcuKernel)
    assert set(softmax.parts) == {"torch", "ncu", "proton"} and set(torch_only.parts) == {"torch"}
    assert ncu_empty.parts == {"ncu": []}  # an empty ncu part stays (and prints nothing)
