"""`kernelevolve serve`: the live pages in headless chromium, reviews written to SQLite and
PostgreSQL, the token on a non-loopback bind, refresh while a run grows."""

import http.client
import io
import json
import socket
import zipfile
from urllib.parse import urlsplit

import pytest
from selenium.webdriver.common.by import By

from kernelevolve.memory import Repository
from kernelevolve.operators.base import LLMCallRecord
from kernelevolve.search.graph import Node
from tests.review.conftest import copy_of, wait_for


def copy_run(src_url: str, dst_url: str, run_id: str) -> None:
    """The run as the engine writes one: its row, then each node and evaluation, then the model calls."""
    src, dst = Repository(src_url), Repository(dst_url)
    run = src.run(run_id)
    with dst.Session.begin() as s:
        s.merge(run)
    for node in src.load_graph(run_id).nodes():
        dst.add_node(
            run_id,
            Node(
                id=node.id,
                parents=node.parents,
                source=node.source,
                note=node.note,
                tokens=node.tokens,
                cost_usd=node.cost_usd,
            ),
            rng_state={},
            elapsed_s=0.0,
        )
        if node.evaluation is not None:
            dst.record_evaluation(run_id, node.id, node.evaluation, policy_state={}, rng_state={}, elapsed_s=0.0)
    for c in src.llm_calls(run_id):
        dst.record_llm_call(
            run_id,
            c.node_id,
            LLMCallRecord(
                c.provider, c.model, c.prompt, c.reply, c.input_tokens, c.output_tokens, c.cost_usd, c.latency_s
            ),
        )
    src.close()
    dst.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def review_db(request, real_run, tmp_path):
    """A database of the review's own holding the real run (the session's run stays unreviewed)."""
    where, db, run_id = real_run
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'review.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    copy_run(db, url, run_id)
    return url, run_id


def _correct_node(url, run_id):
    graph = Repository(url).load_graph(run_id)
    return next(n for n in graph.nodes() if n.correct)


def test_approving_from_the_page_writes_the_review(review_db, browser, serve):
    url, run_id = review_db
    server = serve("--db", url)
    assert "loopback only" in server.line and server.token is None
    browser.get(server.base + "/")
    wait_for(browser, "document.querySelector('#runs')")
    browser.find_element(By.LINK_TEXT, run_id).click()
    wait_for(browser, "window.KE && window.KE.ready && document.querySelector('#overview')")

    node = _correct_node(url, run_id)
    browser.get(f"{server.base}/runs/{run_id}#node/{node.id}")
    wait_for(browser, "document.querySelector('#review-form')")
    browser.find_element(By.ID, "review-note").send_keys("checked the row masks")
    browser.find_element(By.ID, "review-reviewer").send_keys("ada")
    browser.find_element(By.ID, "approve").click()
    wait_for(browser, "document.querySelector('ul#reviews') && document.querySelector('ul#reviews').textContent")
    assert "approve by ada" in browser.find_element(By.ID, "reviews").text

    rows = Repository(url).reviews(run_id)
    assert [(r.node_id, r.verdict, r.reviewer, r.notes) for r in rows] == [
        (node.id, "approve", "ada", "checked the row masks")
    ]
    # The same verdict `kernelevolve review` writes: the graph now counts the node as approved.
    assert Repository(url).load_graph(run_id)[node.id].approved

    # A failed node cannot be approved from the page either (no button; the API refuses it).
    failed = next(n for n in Repository(url).load_graph(run_id).nodes() if n.evaluation is not None and not n.correct)
    status, body = _post(server.base, f"/api/runs/{run_id}/nodes/{failed.id}/review", {"verdict": "approve"})
    assert status == 400 and "cannot be approved" in body["error"]
    assert len(Repository(url).reviews(run_id)) == 1


def _post(base, path, body, token=None, content_type="application/json", host=None):
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    headers = {"Content-Type": content_type}
    if token is not None:
        headers["X-KernelEvolve-Token"] = token
    if host is not None:
        headers["Host"] = host
    conn.request("POST", path, json.dumps(body), headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    try:
        return resp.status, json.loads(data)
    except ValueError:
        return resp.status, data


def _non_loopback_address() -> str | None:
    """This machine's address on its default route (connecting a UDP socket sends nothing)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("198.51.100.1", 9))
        address = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_a_non_loopback_bind_refuses_state_changes_without_the_token(real_run, browser, serve, tmp_path):
    run_id = real_run[2]
    url = copy_of(real_run, tmp_path)
    address = _non_loopback_address()
    # Bound to the machine's real interface and reached through it; with none, every interface
    # (0.0.0.0 is not loopback either) reached through 127.0.0.1.
    server = serve("--db", url, "--host", address or "0.0.0.0")
    assert server.token and "reviews need the token" in server.line
    base = server.base if address else server.base.replace("0.0.0.0", "127.0.0.1")
    node = _correct_node(url, run_id)
    path = f"/api/runs/{run_id}/nodes/{node.id}/review"

    assert _post(base, path, {"verdict": "approve"})[0] == 403
    assert _post(base, path, {"verdict": "approve"}, token="x" * 32)[0] == 403
    assert _post(base, f"/api/runs/{run_id}/nodes/{node.id}/export", {"as_op": "a::b", "unreviewed": True})[0] == 403
    assert Repository(url).reviews(run_id) == []

    # The page opened without the token shows the refusal; with the printed URL it works.
    browser.get(f"{base}/runs/{run_id}#node/{node.id}")
    wait_for(browser, "document.querySelector('#reject')")
    browser.find_element(By.ID, "reject").click()
    assert "refused: missing or wrong token" in wait_for(
        browser,
        "document.querySelector('#review-status').textContent.startsWith('refused') && "
        "document.querySelector('#review-status').textContent",
    )
    assert Repository(url).reviews(run_id) == []
    browser.get(f"{base}/runs/{run_id}?token={server.token}#node/{node.id}")
    wait_for(browser, "document.querySelector('#reject')")
    browser.find_element(By.ID, "reject").click()
    wait_for(browser, "document.querySelector('ul#reviews')")
    assert [r.verdict for r in Repository(url).reviews(run_id)] == ["reject"]

    # The export button's request: a zip of the op folder, only with the token.
    status, body = _post(
        base,
        f"/api/runs/{run_id}/nodes/{node.id}/export",
        {"as_op": "kev::softmax_web", "unreviewed": True},
        token=server.token,
    )
    assert status == 200, body
    names = zipfile.ZipFile(io.BytesIO(body)).namelist()
    assert {
        "kev_softmax_web/softmax_web_op.py",
        "kev_softmax_web/softmax_web_test.py",
        "kev_softmax_web/softmax_web_bench.py",
    } <= set(names)
    status, body = _post(
        base, f"/api/runs/{run_id}/nodes/{node.id}/export", {"as_op": "kev::softmax_web"}, token=server.token
    )
    assert status == 400 and "was rejected" in body["error"]


def test_loopback_refuses_cross_site_posts_and_follows_a_growing_run(real_run, browser, serve, tmp_path):
    run_id = real_run[2]
    url = copy_of(real_run, tmp_path)
    server = serve("--db", url)
    node = _correct_node(url, run_id)
    path = f"/api/runs/{run_id}/nodes/{node.id}/review"
    # What a hostile page could send through the reviewer's browser: a form post, or a request
    # to a rebound DNS name.
    assert _post(server.base, path, {"verdict": "reject"}, content_type="application/x-www-form-urlencoded")[0] == 415
    assert _post(server.base, path, {"verdict": "reject"}, host="evil.example:80")[0] == 403
    assert Repository(url).reviews(run_id) == []

    browser.get(f"{server.base}/runs/{run_id}#tree")
    before = wait_for(browser, "document.querySelectorAll('#tree circle.node').length")
    repo = Repository(url)
    graph = repo.load_graph(run_id)
    new_id = graph.next_id()
    repo.add_node(
        run_id,
        Node(id=new_id, parents=(node.id,), source=node.source, note="written while the page is open"),
        rng_state={},
        elapsed_s=1.0,
    )
    repo.update_run(run_id, status="running")
    assert wait_for(browser, f"document.querySelectorAll('#tree circle.node').length === {before + 1}", timeout=30)
    assert browser.find_element(By.ID, "tree-count").text == str(before + 1)
    assert browser.find_element(By.ID, "live-state").text == "live: following the search"
    # The open page of a pending node shows its evaluation once the search records it.
    browser.execute_script(f"location.hash = '#node/{new_id}'")
    result = "document.querySelector('#node-result') && document.querySelector('#node-result').textContent"
    assert wait_for(browser, result) == "pending"
    repo.record_evaluation(run_id, new_id, node.evaluation, policy_state={}, rng_state={}, elapsed_s=2.0)
    assert wait_for(browser, f"{result} === 'correct (untimed)'", timeout=30)


def test_serve_bad_input_is_one_line(tmp_path):
    from tests.review.conftest import kernelevolve

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = str(taken.getsockname()[1])
        for args, words in [
            (("--port", port), "Address already in use"),
            (("--token", "short"), "at least 16 characters"),
            (("--port", "70000"), "use 0-65535"),
        ]:
            proc = kernelevolve("serve", "--db", f"sqlite:///{tmp_path / 'x.db'}", *args, cwd=tmp_path, timeout=60)
            assert proc.returncode == 2 and words in proc.stderr, proc.stderr
            assert len(proc.stderr.strip().splitlines()) == 1
    finally:
        taken.close()
