from pathlib import Path

import pytest

from kernelevolve.spec import load_spec

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def scale_shift_spec():
    return load_spec(HERE / "scale_shift.yaml")


def candidate(name: str) -> str:
    return (HERE / "candidates" / f"{name}.py").read_text()
