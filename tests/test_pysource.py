"""kernelevolve/pysource.py: the package parses Python one thread at a time (CPython gh-106905)."""

import ast
import re
import threading
from pathlib import Path

import pytest

from kernelevolve import pysource

PACKAGE = Path(__file__).resolve().parents[1] / "kernelevolve"


def test_parse_is_ast_parse_with_its_modes_and_errors():
    source = "def f(x):\n    return [i * x for i in range(3)]\n"
    assert ast.dump(pysource.parse(source)) == ast.dump(ast.parse(source))
    assert ast.dump(pysource.parse("1 + 2", mode="eval")) == ast.dump(ast.parse("1 + 2", mode="eval"))
    with pytest.raises(SyntaxError) as error:
        pysource.parse("def f(:\n", filename="candidate.py")
    assert error.value.filename == "candidate.py"
    pysource.parse("x = 1")  # the lock was released after the error


def test_threads_parse_at_once_and_all_get_their_tree():
    sources = [
        f"def f{i}(x):\n" + "".join(f"    x = [x, {j}]\n" for j in range(200)) + "    return x\n" for i in range(8)
    ]
    trees: dict[int, str] = {}

    def work(i: int) -> None:
        for _ in range(20):
            trees[i] = pysource.parse(sources[i]).body[0].name

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert trees == {i: f"f{i}" for i in range(8)}


def test_no_module_of_the_package_calls_ast_parse_itself():
    direct = [
        f"{path.relative_to(PACKAGE.parent)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "pysource.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bast\.parse\(", line)
    ]
    assert not direct, "use kernelevolve.pysource.parse (one thread at a time) instead of ast.parse: " + ", ".join(
        direct
    )
