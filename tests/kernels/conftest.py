"""Reference kernels run under the Triton interpreter on CPU: set it up before any kernel is defined."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
from triton.runtime import interpreter  # noqa: E402

# triton 3.6's interpreter turns a loop bound into a Python int with int(array) on a 1-element
# array, which numpy >= 2.3 refuses ("only 0-dimensional arrays can be converted"): every
# `for i in range(0, runtime_value)` in a kernel fails. Re-patch __index__ with .item().
_original_patch = interpreter._patch_lang_tensor


def _patch_lang_tensor(tensor, scope):
    _original_patch(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))


if getattr(interpreter._patch_lang_tensor, "__name__", "") != "_patch_lang_tensor" or interpreter._patch_lang_tensor is _original_patch:
    interpreter._patch_lang_tensor = _patch_lang_tensor


@pytest.fixture(autouse=True, scope="session")
def _interpreter_on():
    assert os.environ.get("TRITON_INTERPRET") == "1"
