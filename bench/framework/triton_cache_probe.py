"""How long a Triton kernel's first calls take in a fresh process, from an empty compile cache and from one
that holds it: the flash-attention reference kernel as it is (`fresh`, then `again` from the cache the
first filled), with three comment lines in front of the file (`prepended`), and with a comment inside its
kernel (`inside`). Tells whether a textual change makes a new candidate for Triton's cache.

    C=$(mktemp -d); for v in fresh again prepended inside; do TRITON_CACHE_DIR=$C python bench/framework/triton_cache_probe.py $v; done
"""

import importlib.util
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]

sys.path.insert(0, str(ROOT / "knowledge_base" / "kernels"))

src = (ROOT / "knowledge_base" / "kernels" / "flash_attention.py").read_text()


def load(text, name):
    path = f"/tmp/{name}.py"
    open(path, "w").write(text)
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


q, k, v = [torch.randn(4, 32, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
label = sys.argv[1]
text = {
    "fresh": src,
    "again": src,
    "prepended": "# c\n" * 3 + src,
    "inside": src.replace("    if CAUSAL:\n", "    # candidate 7\n    if CAUSAL:\n", 1),
}[label]
m = load(text, "fa_" + label)
for causal in (False, True, False):
    t = time.time()
    m.flash_attention(q, k, v, causal)
    torch.cuda.synchronize()
    print(label, "causal" if causal else "full", f"{time.time() - t:.3f} s", flush=True)
