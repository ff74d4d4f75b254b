"""Run one knowledge-base kernel a few times at one spec shape on the GPU (for ncu to profile):
the spec's reference constants set as the shape says, inputs from its get_inputs(), CONFIG
overrides as KEY=VALUE (JSON values).

    ncu --set full -k regex:_pffn -c 1 python bench/tools/profile_one.py pffn bfloat16 B=256
    python bench/tools/profile_one.py conv1d float32 B=2048 fp32_flat=true
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for benchlib
from benchlib import KERNELS, REPO, load_module  # noqa: E402


def main() -> None:
    name, dtype = sys.argv[1], getattr(torch, sys.argv[2])
    pairs = [a.split("=", 1) for a in sys.argv[3:]]
    ref_module = load_module(REPO / "specs" / f"{name}.py", f"ref_{name}")
    constants = {k: int(v) for k, v in pairs if hasattr(ref_module, k)}
    overrides = {k: json.loads(v) for k, v in pairs if k not in constants}
    ref = load_module(REPO / "specs" / f"{name}.py", f"ref_{name}", constants)
    kernel = load_module(KERNELS / f"{name}.py", f"kernel_{name}")
    kernel.CONFIG.update(overrides)
    torch.manual_seed(0)
    model = ref.Model(*ref.get_init_inputs())
    new = kernel.ModelNew(*ref.get_init_inputs())
    new.load_state_dict(model.state_dict())
    new = new.cuda().to(dtype)
    inputs = [x.cuda().to(dtype) if x.is_floating_point() else x.cuda() for x in ref.get_inputs()]
    with torch.no_grad():
        for _ in range(5):
            new(*inputs)
    torch.cuda.synchronize()
    print(name, sys.argv[2], constants, overrides, "ran")


if __name__ == "__main__":
    main()
