"""Markdown table of bench/kernels/attention/attention_bench.py JSON files (flash attention and int8 MQA prefill): per shape,
every configuration's ms and TFLOP/s with its ratio to each SDPA baseline timed in the same run.

    python bench/investigations/flash_attention/flash_summary.py FILE.json [FILE.json ...]
"""

import json
import sys

KEYS = ("IMPL", "HOPPER_WS", "HOPPER_PERSISTENT", "HOPPER_PINGPONG", "HOPPER_STAGES", "HOPPER_BLOCK_N", "DEQUANT")
BASES = ("sdpa_default", "sdpa_cudnn", "sdpa_bf16_predequantised_gqa", "reference_eager_dequant_sdpa")


def label(config: dict) -> str:
    if config.get("IMPL") != "gluon" or not config.get("HOPPER_WS"):
        return f"IMPL={config.get('IMPL')}" + ("" if config.get("IMPL") == "gluon" else " (tl kernel)")
    return f"gluon WS persistent={int(config.get('HOPPER_PERSISTENT', 0))} pingpong={int(bool(config.get('HOPPER_PINGPONG')))} stages={config.get('HOPPER_STAGES')}"


def main() -> None:
    for path in sys.argv[1:]:
        report = json.load(open(path))
        print(
            f"## {path}\n\n{report['gpu']}, torch {report['torch']}, triton {report['triton']}: `{report['command']}`\n"
        )
        for name, entries in report["results"].items():
            for entry in entries if isinstance(entries, list) else [entries]:
                base = entry.get("baselines", {})
                cols = [b for b in BASES if b in base]
                print(f"### {name} {json.dumps(entry.get('params'))}\n")
                print("| configuration | correct | ms | TFLOP/s | " + " | ".join(f"x {c}" for c in cols) + " |")
                print("| --- | --- | ---: | ---: | " + " | ".join("---:" for _ in cols) + " |")
                for c in cols:
                    print(
                        f"| {c} (baseline) | | {base[c]['ms']:.4f} | {base[c]['TFLOP/s']:.1f} | "
                        + " | ".join("" for _ in cols)
                        + " |"
                    )
                for k in entry.get("kernel", []):
                    ms = k.get("ms")
                    ratios = [f"{base[c]['ms'] / ms:.3f}" if ms else "" for c in cols]
                    err = k.get("error", "")
                    print(
                        f"| {label(k['config'])} | {k.get('correct', err[:60])} | {ms or ''} | {k.get('TFLOP/s', '')} | "
                        + " | ".join(ratios)
                        + " |"
                    )
                print()


if __name__ == "__main__":
    main()
