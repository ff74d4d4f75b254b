"""`kernelevolve report`: a run as a static site that opens from disk with no network.

DIR/index.html and DIR/assets/ (the package's static/ folder) hold the page; the data lives in
DIR/data/run.js, DIR/data/calls.js and DIR/data/nodes/K.js (the details of nodes K*50 to K*50+49),
loaded with <script> tags (a page opened from file:// may not fetch() its neighbours), so opening
the tree never reads every node's source. Chunks, not one file per node: on a slow file system
creating (and replacing) thousands of small files cost more than the rest of the report.
"""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path

from kernelevolve.review.pages import node_details, run_calls, run_summary

ASSETS = ("app.js", "app.css")
NODES_PER_FILE = 50  # app.js reads the same number


def static_file(name: str) -> str:
    return resources.files("kernelevolve.review").joinpath("static", name).read_text()


def page_html(title: str, assets: str, config: dict) -> str:
    """index.html with its asset folder and the script's configuration filled in."""
    config_js = json.dumps(config).replace("</", "<\\/")  # it sits inside a <script> element
    return (
        static_file("index.html")
        .replace("__TITLE__", _html_escape(title))
        .replace("__ASSETS__", assets)
        .replace("__CONFIG__", config_js)
    )


def _html_escape(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def _data_script(key: str, data) -> str:
    return f"KE.receive({json.dumps(key)}, {json.dumps(data, separators=(',', ':'), default=str)});\n"


def write_report(repo, run_id: str, out_dir: Path) -> dict:
    """Write the site for one run; returns what was written (node count, files)."""
    graph = repo.load_graph(run_id)
    summary = run_summary(repo, run_id, graph)
    details = node_details(repo, run_id, graph=graph)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "assets").mkdir(exist_ok=True)
    nodes_dir = out_dir / "data" / "nodes"
    if nodes_dir.exists():  # a report written again over an older one keeps no stale node
        shutil.rmtree(nodes_dir)
    nodes_dir.mkdir(parents=True)
    for name in ASSETS:
        (out_dir / "assets" / name).write_text(static_file(name))
    (out_dir / "data" / "run.js").write_text(_data_script("run", summary))
    (out_dir / "data" / "calls.js").write_text(_data_script("calls", run_calls(repo, run_id)))  # read on its tab only
    chunks: dict[int, dict] = {}
    for node_id, detail in details.items():
        chunks.setdefault(node_id // NODES_PER_FILE, {})[node_id] = detail
    for k, chunk in chunks.items():
        (nodes_dir / f"{k}.js").write_text(_data_script(f"nodes/{k}", chunk))
    (out_dir / "index.html").write_text(page_html(f"run {run_id}", "assets", {"mode": "static", "run": run_id}))
    return {"nodes": len(details), "index": str(out_dir / "index.html")}
