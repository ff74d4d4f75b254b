"""The README's screenshots of the review pages (`kernelevolve serve`), taken with headless chromium.

    python docs/make_review_screenshots.py          # writes docs/review-overview.png, -tree.png, -node.png

The run shown is synthetic (tests/review/synthetic.py: made-up timings and model calls), so that
the charts have GPU numbers to draw on a machine without a GPU.
"""

import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from kernelevolve.memory import Repository
    from kernelevolve.review import review
    from kernelevolve.review.server import make_server
    from tests.review.synthetic import write_synthetic_run

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/demo.db"
        run_id = write_synthetic_run(url, 160, seed=11, suspicious=150)
        repo = Repository(url)
        best = repo.load_graph(run_id).best()
        review(repo, run_id, best.parents[0], "approve", "checked masks and int64 offsets", reviewer="ada")
        server, _ = make_server(repo, "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}/runs/{run_id}"
        options = webdriver.ChromeOptions()
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000", "--hide-scrollbars"):
            options.add_argument(arg)
        driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
        try:
            for name, hash_ in (("overview", "#overview"), ("tree", "#tree"), ("node", f"#node/{best.id}")):
                driver.set_window_size(1280, {"overview": 1900, "tree": 900, "node": 1350}[name])
                driver.get(base + hash_)
                time.sleep(1.5)
                if name == "node":
                    driver.execute_script("document.getElementById('review-note').value = 'checked masks';")
                driver.save_screenshot(str(ROOT / "docs" / f"review-{name}.png"))
                print("wrote", ROOT / "docs" / f"review-{name}.png")
        finally:
            driver.quit()
            server.shutdown()


if __name__ == "__main__":
    main()
