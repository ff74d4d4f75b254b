"""A stand-in for TritonBench's tritonbench.utils.triton_op (not installable from PyPI): only the
names a generated operator imports, recording what it registers, so a CPU test can drive the
operator's inputs and benchmarks the way TritonBench's runner does. It times nothing."""

REGISTERED: dict[str, dict] = {}
METRICS: list[str] = []


class BenchmarkOperatorMetrics:
    def __init__(self, latency):
        self.latency = latency


class BenchmarkOperator:
    def __init__(self, tb_args, extra_args=None):
        self.device = tb_args.device
        self.dtype = None


def register_benchmark(baseline: bool = False, enabled: bool = True, label: str | None = None):
    def decorate(fn):
        REGISTERED[fn.__name__] = {"baseline": baseline, "enabled": enabled}
        return fn

    return decorate


def register_metric(**_kwargs):
    def decorate(fn):
        METRICS.append(fn.__name__)
        return fn

    return decorate
