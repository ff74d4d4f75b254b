"""Taking the kernel out of a model's reply."""

from kernelevolve.llm.extract import extract_kernel

MODULE = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x
"""


def test_single_fenced_block():
    reply = f"Change: copy kernel\n\n```python\n{MODULE}```\nThat is all."
    assert extract_kernel(reply).source == MODULE


def test_takes_the_full_module_not_a_trailing_excerpt():
    excerpt = "class ModelNew(nn.Module):\n    ...\n"
    reply = f"```python\n{MODULE}```\n\nThe key part:\n\n```python\n{excerpt}```\n"
    assert extract_kernel(reply).source == MODULE


def test_takes_the_last_of_two_complete_versions():
    fixed = MODULE.replace("return x", "return x * 1")
    reply = f"First try:\n```python\n{MODULE}```\nBetter:\n```py\n{fixed}```"
    assert extract_kernel(reply).source == fixed


def test_block_cut_off_by_the_token_limit_is_still_code():
    reply = "```python\n" + MODULE + "    def more(self):\n        return ("
    found = extract_kernel(reply)
    assert found.source is not None and found.source.startswith("import torch")
    assert found.source.rstrip().endswith("return (")


def test_unfenced_code_after_prose():
    reply = "Here is the kernel.\n" + MODULE
    assert extract_kernel(reply).source == MODULE


def test_syntax_error_is_still_code_for_the_evaluator_to_classify():
    broken = MODULE.replace("def forward(self, x):", "def forward(self, x)")
    assert extract_kernel(f"```python\n{broken}```").source == broken


def test_no_model_new_is_no_code_with_a_reason():
    found = extract_kernel("```python\nimport torch\nprint(1)\n```")
    assert found.source is None and "none defines class ModelNew" in found.message
    found = extract_kernel("I cannot help with that.")
    assert found.source is None and "no code" in found.message
    assert extract_kernel("").source is None


def test_non_python_blocks_are_ignored():
    reply = f"```text\nclass ModelNew is below\n```\n```python\n{MODULE}```"
    assert extract_kernel(reply).source == MODULE
