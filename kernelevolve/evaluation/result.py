"""What one evaluation of one candidate yields: its home is kernelevolve.records.result (records every
part of the package shares); this path stays for code written against it."""

from kernelevolve.records.result import EXPLANATIONS, EvalResult, Failure, ShapeResult

__all__ = ["EXPLANATIONS", "EvalResult", "Failure", "ShapeResult"]
