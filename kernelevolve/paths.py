"""Where the project's file-based parts live (the package is installed editable from the repo)."""

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
HARNESS_TEMPLATES = REPO_ROOT / "harness_templates"
KNOWLEDGE_BASE = Path(os.environ.get("KERNELEVOLVE_KB", REPO_ROOT / "knowledge_base"))
SPECS = REPO_ROOT / "specs"


def cache_dir() -> Path:
    """Per-user cache (baseline timings, reply cache); KERNELEVOLVE_CACHE_DIR overrides."""
    base = os.environ.get("KERNELEVOLVE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "kernelevolve"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path
