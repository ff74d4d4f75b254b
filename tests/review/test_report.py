"""`kernelevolve report`: the static site, opened from disk in headless chromium."""

import difflib
import re
import resource
import time

from selenium.webdriver.common.by import By

from kernelevolve.memory import Repository
from kernelevolve.memory.profiles import save_profile
from tests.review.conftest import copy_of, kernelevolve, wait_for


def _open(browser, path, hash_):
    browser.get(path.as_uri() + hash_)
    wait_for(browser, "window.KE && window.KE.ready")


def test_report_shows_the_tree_diffs_model_calls_and_failures(real_run, browser, tmp_path):
    where, _, run_id = real_run
    db = copy_of(real_run, tmp_path)
    repo = Repository(db)
    graph, calls = repo.load_graph(run_id), repo.llm_calls(run_id)
    # A profile as a search stores one (made up here: the interpreter cannot profile).
    draft = graph.roots()[0]
    save_profile(
        repo,
        run_id,
        draft,
        [
            {
                "label": "M=4,N=256 bfloat16",
                "tools": ["torch"],
                "torch": {
                    "calls": 10,
                    "kernels": [{"name": "_softmax_tile_kernel", "launches": 1, "gpu_ms": 0.0123}],
                    "gpu_ms": 0.0123,
                    "host_ms": 0.05,
                    "launch_api_ms": 0.01,
                },
            }
        ],
        2.5,
    )
    site = tmp_path / "site"
    proc = kernelevolve("report", run_id, "-o", str(site), "--db", db, cwd=where)
    assert proc.returncode == 0, proc.stderr

    _open(browser, site / "index.html", "#tree")
    circles = wait_for(browser, "document.querySelectorAll('#tree circle.node').length")
    assert circles == len(graph) == 2
    assert browser.find_element(By.ID, "tree-count").text == "2"
    # Opened from disk with no network: every resource the page loaded is a local file.
    urls = browser.execute_script(
        "return Array.from(document.querySelectorAll('script[src], link[href]')).map(e => e.src || e.href)"
    )
    assert len(urls) >= 2 and all(u.startswith("file://") for u in urls), urls
    for page in ("index.html", "assets/app.js", "assets/app.css"):
        assert not re.search(r"https?://", (site / page).read_text()), page

    # The broken candidate (the second reply) is a child of the draft: clicking it shows its diff.
    failed = next(n for n in graph.nodes() if n.evaluation is not None and not n.correct)
    parent = graph[failed.parents[0]]
    browser.find_element(By.CSS_SELECTOR, f'#tree circle.node[data-id="{failed.id}"]').click()
    wait_for(
        browser, f"document.querySelector('#node') && document.querySelector('#node').dataset.id === '{failed.id}'"
    )
    assert browser.execute_script("return location.hash") == f"#node/{failed.id}"
    shown = browser.find_element(By.CSS_SELECTOR, "pre.diff").text.splitlines()
    expected = list(difflib.unified_diff(parent.source.splitlines(), failed.source.splitlines(), lineterm=""))
    changed = [line for line in expected if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed and all(line in shown for line in changed), changed
    assert "+        return softmax_forward(x, block_rows=4)" in shown
    assert browser.find_element(By.CSS_SELECTOR, "h3.diff-title").text == f"Diff against parent #{parent.id}"

    # Its failure: the class, the message and the end of its log.
    page = browser.find_element(By.ID, "node").text
    assert f"failed ({failed.failure})" in page and failed.evaluation.message in page
    assert failed.evaluation.log.strip().splitlines()[-1].strip() in page

    # The model calls that made it: prompt, reply and tokens as recorded.
    mine = [c for c in calls if c.node_id == failed.id]
    assert mine
    boxes = browser.find_elements(By.CSS_SELECTOR, "details.call")
    assert len(boxes) == len(mine)
    text = browser.execute_script("return document.querySelector('details.call').textContent")
    assert mine[0].prompt[:200] in text and "block_rows=4" in text
    assert f"{mine[0].input_tokens} in / {mine[0].output_tokens} out tokens" in text

    # The audit trail: every model call of the run, the node's and the run's own (insights).
    browser.find_element(By.ID, "tab-calls").click()
    wait_for(browser, "document.querySelector('section#calls')")
    assert len(browser.find_elements(By.CSS_SELECTOR, "section#calls details.call")) == len(calls)
    trail = browser.execute_script("return document.querySelector('section#calls').textContent")
    assert all(c.reply[:100] in trail for c in calls)
    assert any(c.node_id is None for c in calls) and "run" in [
        e.text.split()[0] for e in browser.find_elements(By.CSS_SELECTOR, "div.call-row")
    ]

    # The draft's page shows its profile as the optimise prompts read it.
    browser.execute_script(f"location.hash = '#node/{draft}'")
    profile = wait_for(browser, "document.querySelector('#profile') && document.querySelector('#profile').textContent")
    assert "Profile at M=4,N=256 bfloat16" in profile and "_softmax_tile_kernel x1 0.0123 ms" in profile

    # The overview: termination reason, settings, an honest note that nothing was timed.
    browser.find_element(By.ID, "tab-overview").click()
    wait_for(browser, "document.querySelector('#overview')")
    overview = browser.find_element(By.ID, "overview").text
    assert "terminated by nodes" in overview and '"max_nodes": 2' in overview
    assert "untimed" in browser.find_element(By.ID, "untimed").text
    assert "correct (untimed)" in browser.find_element(By.ID, "best").text
    assert not re.search(r"\d\.\d{3}x", overview)  # an interpreter run never shows a speedup


def test_a_2000_node_report_is_written_in_seconds_and_its_tree_stays_responsive(big_run, browser, tmp_path):
    db, run_id, _ = big_run
    site = tmp_path / "big"
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    proc = kernelevolve("report", run_id, "-o", str(site), "--db", db, cwd=tmp_path)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 0, proc.stderr
    # The whole command's CPU time (start-up and imports included) must stay under 10 s; its wall
    # time too on an idle machine, but on a CPU shared with other test runs it stretches, so the
    # wall-clock bound is looser. The command prints its own wall time for the generation.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    generation = float(re.search(r"wrote 2000 nodes in ([\d.]+)s", proc.stdout)[1])
    assert cpu < 10 and wall < 30, f"report of 2,000 nodes: {cpu:.1f} s CPU, {wall:.1f} s wall"

    _open(browser, site / "index.html", "#tree")
    assert wait_for(browser, "document.querySelectorAll('#tree circle.node').length") == 2000
    loaded_ms = browser.execute_script("return performance.now()")
    render_ms = browser.execute_script("return KE.treeRenderMs")
    # A click on a node deep in the tree opens it (its own data file only) without a stall.
    browser.execute_script(
        "window.__clicked = performance.now(); document.querySelector("
        "'#tree circle.node[data-id=\"1500\"]').dispatchEvent(new MouseEvent('click', {bubbles: true}))"
    )
    wait_for(browser, "document.querySelector('#node') && document.querySelector('#node').dataset.id === '1500'")
    click_ms = browser.execute_script("return KE.nodeShownAt - window.__clicked")
    browser.execute_script("history.back()")
    wait_for(browser, "document.querySelectorAll('#tree circle.node').length === 2000")
    redraw_ms = browser.execute_script("return KE.treeRenderMs")
    print(
        f"2,000 nodes: report {generation:.2f} s generating, the command {cpu:.2f} s CPU / {wall:.2f} s wall; tree page ready {loaded_ms:.0f} ms after navigation, drawn in "
        f"{render_ms:.0f} ms; click to node page {click_ms:.0f} ms; tree redrawn in {redraw_ms:.0f} ms"
    )
    assert render_ms < 1000 and redraw_ms < 1000 and click_ms < 1000 and loaded_ms < 5000


def test_report_of_an_unknown_run_is_one_line(real_run, tmp_path):
    where, db, _ = real_run
    proc = kernelevolve("report", "r-nothere", "-o", str(tmp_path / "x"), "--db", db, cwd=where)
    assert proc.returncode == 2 and "no run 'r-nothere'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "x").exists()
