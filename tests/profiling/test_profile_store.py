"""Profiles are stored per node in the experiment database (SQLite and PostgreSQL), replaced when
a node is profiled again, read back into the schema, and deleted with their run's nodes."""

from sqlalchemy import delete

from kernelevolve.memory import Repository
from kernelevolve.memory.models import NodeRow, RunRow
from kernelevolve.memory.profiles import load_profile, load_profiles, save_profile
from kernelevolve.profiling.roofline import roofline
from kernelevolve.profiling.schema import ProfileSummary
from kernelevolve.profiling.tools.base import KernelTime
from kernelevolve.profiling.tools.torch import TorchProfile


def _summary(ms: float) -> ProfileSummary:
    torch = TorchProfile(
        calls=3,
        kernels=[KernelTime(name="_softmax_tile_kernel", launches=1, gpu_ms=ms)],
        gpu_ms=ms,
        host_ms=0.02,
        launch_api_ms=0.005,
    )
    return ProfileSummary(
        label="M=32768,N=4096 bfloat16",
        tools=["torch"],
        torch=torch,
        roofline=roofline(ms, "torch", 2 * 32768 * 4096 * 2, 5 * 32768 * 4096, "h200"),
    )


def test_profiles_round_trip_per_node_and_go_with_their_run(db_url):
    repo = Repository(db_url)
    with repo.Session.begin() as s:
        s.add(
            RunRow(
                id="r1",
                spec_name="softmax",
                spec_path="specs/softmax.yaml",
                spec_fingerprint="f" * 16,
                spec_snapshot="{}",
                family="softmax",
                hardware="h200",
                policy="greedy",
                device="cuda",
                settings={},
                status="running",
                elapsed_s=0.0,
                owner="",
            )
        )
    with repo.Session.begin() as s:
        s.add_all([NodeRow(run_id="r1", id=i, source="x", note="", state="evaluated") for i in (1, 2)])
    save_profile(repo, "r1", 1, [_summary(0.2).model_dump()], seconds=21.5)
    save_profile(repo, "r1", 2, [_summary(0.5).model_dump()], seconds=30.0)
    save_profile(repo, "r1", 1, [_summary(0.1).model_dump()], seconds=19.0)  # profiled again: replaced
    row = load_profile(repo, "r1", 1)
    back = ProfileSummary.model_validate(row.summaries[0])
    assert row.seconds == 19.0 and back.parts["torch"].gpu_ms == 0.1
    assert back.roofline.bound == "memory" and back.roofline.latency_source == "torch"
    assert back.prompt_text() == _summary(0.1).prompt_text()
    assert sorted(load_profiles(repo, "r1")) == [1, 2] and load_profile(repo, "r1", 3) is None
    with repo.Session.begin() as s:
        s.execute(delete(RunRow).where(RunRow.id == "r1"))
    assert load_profiles(repo, "r1") == {}
    repo.close()
