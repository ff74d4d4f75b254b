"""Every reference kernel passes `kernelevolve eval specs/<spec>.yaml knowledge_base/kernels/<name>.py`
under the interpreter, in the evaluator's sandbox (kernels found by convention, not listed).

One correctness trial per case (eval's default is three) and the harness's repeated calls: each
kernel's own tests in this folder check it on many more random inputs, cheaper than the sandbox."""

import pytest

from kernelevolve.evaluation.evaluator import Evaluator
from kernelevolve.knowledge import KnowledgeBase
from kernelevolve.languages import LANGUAGES, of_document
from kernelevolve.paths import SPECS
from kernelevolve.spec import load_spec

KERNELS = sorted((doc.name, doc.spec) for doc in KnowledgeBase.load().documents if doc.kind == "kernels")


def test_every_reference_kernel_has_a_spec():
    assert {"rmsnorm", "softmax", "cross_entropy", "flash_attention", "ikbo_lce", "ikbo_target_attention"} <= {
        k for k, _ in KERNELS
    }
    for name, spec in KERNELS:
        assert (SPECS / f"{spec}.yaml").exists(), name


@pytest.mark.parametrize("name, spec_name", KERNELS)
def test_reference_kernel_passes_the_evaluator(name, spec_name):
    spec = load_spec(SPECS / f"{spec_name}.yaml")
    result = Evaluator(device="interpret", timeout_s=120, trials=1).evaluate(
        spec, KnowledgeBase.load().reference_kernel(name).source
    )
    if not LANGUAGES[of_document(KnowledgeBase.load().reference_kernel(name))].interpretable:
        # A CuTe DSL kernel cannot run on the CPU: the evaluator says so instead of failing it.
        assert result.failure == "needs_gpu" and result.message.startswith("needs a GPU"), result.message
        return
    seed = result.diagnostics.seed  # the evaluator draws its trials' inputs from it
    assert result.correct, f"evaluator seed {seed}: {result.failure}: {result.message}\n{result.log[-2000:]}"
    assert [s.correct for s in result.shapes] == [True] * len(spec.cases("interpret"))  # shapes x dtypes
