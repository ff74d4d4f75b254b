"""Reference kernels run under the Triton interpreter on CPU: set it up before any kernel is defined."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

from kernelevolve.evaluation.interpreter_compat import patch_triton_interpreter  # noqa: E402

patch_triton_interpreter()


@pytest.fixture(autouse=True, scope="session")
def _interpreter_on():
    assert os.environ.get("TRITON_INTERPRET") == "1"
