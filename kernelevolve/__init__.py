"""KernelEvolve: search for fast Triton kernels with an LLM in the loop."""

__version__ = "0.1.0"
