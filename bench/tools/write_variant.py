"""Write a copy of a knowledge-base kernel with CONFIG values changed in its CONFIG literal (each
key's line rewritten), for `kernelevolve eval` of a candidate default:

    python bench/tools/write_variant.py conv1d OUT.py '{"fp32_flat": true}'
"""

import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    name, out, overrides = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
    text = (REPO / "knowledge_base" / "kernels" / f"{name}.py").read_text()
    start = text.index("\nCONFIG = {")
    end = text.index("\n}", start)
    block = text[start:end]
    for key, value in overrides.items():
        block, n = re.subn(rf'(\n    "{key}": )[^\n]*,', lambda m: f"{m.group(1)}{value!r},", block)
        if n != 1:
            raise SystemExit(f"{key}: {n} lines in CONFIG")
    out.write_text(text[:start] + block + text[end:])
    print(out, overrides)


if __name__ == "__main__":
    main()
