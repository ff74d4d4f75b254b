"""bench/tools/ncu_source_summary.py on an excerpt of a real Nsight Compute `--page source --csv` export (the int8
prefill's Gluon kernel and cuDNN's, H200, bench/results/attention/h200/2026-11-27_decode_read_floor_prefill_sass/): the shares it reports are those of the rows."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "tools" / "ncu_source_summary.py"
EXCERPT = Path(__file__).parent / "fixtures" / "h200" / "ncu_source_prefill_excerpt.csv"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def kernel_rows(name_prefix: str) -> list[dict]:
    rows, header, inside = [], None, False
    for row in csv.reader(EXCERPT.open()):
        if row and row[0] == "Kernel Name":
            inside, header = row[1].startswith(name_prefix), None
        elif inside and header is None:
            header = row
        elif inside:
            rows.append(dict(zip(header, row)))
    return rows


def test_summary_matches_the_rows(tmp_path):
    out = tmp_path / "summary.json"
    proc = run(str(EXCERPT), "--sections", "first:0-12,softmax start:12-32", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    ours, cudnn = json.loads(out.read_text())
    assert ours["kernel"] == "_flash_fwd_hopper_ws" and cudnn["kernel"].startswith("cudnn_generated")
    rows = kernel_rows("_flash")
    samples = [float(r["Warp Stall Sampling (All Samples)"]) for r in rows]
    assert ours["samples"] == int(sum(samples)) and ours["sass_instructions"] == len(rows) == 32
    first = ours["sections"]["first"]
    assert first["range"] == [0, 12]
    assert first["samples_pct"] == round(sum(samples[:12]) / sum(samples) * 100, 2)
    assert first["warp_instructions"] == int(sum(float(r["Instructions Executed"]) for r in rows[:12]))
    # every sample of a section has a reason: its shares add up to the section's (top 5 of few reasons here)
    hgmma = ours["by_opcode"]["HGMMA"]
    want = sum(float(r["Warp Stall Sampling (All Samples)"]) for r in rows if "HGMMA" in r["Source"])
    assert hgmma["samples_pct"] == round(want / sum(samples) * 100, 2) > 0
    assert cudnn["sections"] == {}  # sections index the first kernel only
    assert "of samples" in proc.stdout


def test_rejects_what_is_not_a_source_page(tmp_path):
    details = tmp_path / "details.csv"
    details.write_text('"ID","Kernel Name","Metric Name","Metric Value"\n"0","k","Duration","1.0"\n')
    proc = run(str(details))
    assert proc.returncode != 0 and "not an `ncu --page source --csv` export" in proc.stderr
    assert "Traceback" not in proc.stderr
    missing = run(str(tmp_path / "nothing.csv"))
    assert missing.returncode != 0 and "no file" in missing.stderr and "Traceback" not in missing.stderr
