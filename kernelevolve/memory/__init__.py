"""The experiment database: runs, the search graph, evaluations, insights, LLM calls, reviews."""

from kernelevolve.memory import profiles  # noqa: F401  (its table joins the models' metadata)
from kernelevolve.memory.repository import DEFAULT_URL, ENV_VAR, DatabaseError, Repository, database_url

__all__ = ["DEFAULT_URL", "ENV_VAR", "DatabaseError", "Repository", "database_url"]
