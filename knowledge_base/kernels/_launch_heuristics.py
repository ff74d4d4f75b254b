"""Host-side launch heuristics shared by the reference kernels (one file per kernel, one helper).

Kernels import it as `from _launch_heuristics import ...`: the evaluator puts knowledge_base/kernels
on every candidate's import path, so LLM-written candidates may use it too. Host code only: no
@triton.jit functions here (Triton resolves those through the kernel's own module).
"""

import torch

# Shared memory a pipelined loop may fill with its stages (H100/H200 allow 227 KiB per block;
# the rest is left for the compiler's own scratch).
PIPELINE_SMEM_BYTES = 160 * 1024


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of `device`; a small number under the CPU interpreter, which
    still exercises a persistent grid's loop."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


def pipeline_stages(wanted: int, bytes_per_stage: int, budget: int = PIPELINE_SMEM_BYTES) -> int:
    """Pipelined loads are staged in shared memory: drop stages that would not fit."""
    while wanted > 1 and wanted * bytes_per_stage > budget:
        wanted -= 1
    return wanted


def tma_ok(t: torch.Tensor) -> bool:
    """Whether a tensor descriptor (TMA) can address `t`: contiguous, 16-byte aligned base and rows."""
    return t.is_contiguous() and t.data_ptr() % 16 == 0 and (t.shape[-1] * t.element_size()) % 16 == 0
