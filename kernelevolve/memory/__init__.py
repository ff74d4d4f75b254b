"""The experiment database: runs, the search graph, evaluations, insights, LLM calls, reviews."""

from kernelevolve.memory import campaigns, profiles, workers  # noqa: F401  (their tables join the models' metadata)
from kernelevolve.memory.repository import DEFAULT_URL, ENV_VAR, DatabaseError, Repository, database_url

__all__ = ["DEFAULT_URL", "ENV_VAR", "DatabaseError", "Repository", "database_url"]
