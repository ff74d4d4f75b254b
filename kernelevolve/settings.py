"""Every KERNELEVOLVE_* environment variable, read once, cast and validated here (pydantic-settings).

Command-line options win over these. What changes how a run behaves (the model's settings, retries,
prompt budget, reply cache, prices) is resolved when the run starts and saved with it
(runs.settings), so `kernelevolve resume` continues as the run began whatever the shell now says.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PREFIX = "KERNELEVOLVE_"


class SettingsError(ValueError):
    """An environment variable with a value that cannot be used; one line naming it."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=PREFIX, env_ignore_empty=True, extra="ignore", frozen=True)

    db: str | None = Field(
        None, description="SQLAlchemy URL of the experiment database (default sqlite:///kernelevolve.db)."
    )
    model: str | None = Field(None, description="The operator when --model is not given (default: offline).")
    kb: Path | None = Field(None, description="Knowledge-base folder used instead of the bundled one (like --kb).")
    cache_dir: Path | None = Field(None, description="Per-user cache folder (default ~/.cache/kernelevolve).")
    log_level: str = Field(
        "warning", description="Log level on stderr: debug, info, warning, error (like --log-level)."
    )
    log_dir: Path | None = Field(
        None, description="Folder of the per-run log files (default: the cache folder's logs/)."
    )
    temperature: float | None = Field(None, ge=0, le=2, description="LLM sampling temperature (like --temperature).")
    max_tokens: int | None = Field(
        None, gt=0, description="Longest LLM reply in tokens (like --max-tokens; default 8192)."
    )
    llm_timeout: float | None = Field(None, gt=0, description="Seconds one LLM request may take (default 600).")
    llm_retries: int | None = Field(
        None, ge=0, description="Retries of an LLM request the service refused for now (default 6)."
    )
    context_tokens: int | None = Field(None, gt=0, description="Prompt budget in tokens (default 24000).")
    llm_insights: bool = Field(True, description="0: rule-based insights only, no model call for them.")
    reply_cache: bool = Field(False, description="1: reuse cached LLM replies, like run --reply-cache.")
    file_wait: float | None = Field(
        None, gt=0, description="Seconds the file: provider waits for a reply (default 3600)."
    )
    price: tuple[float, float] | None = Field(
        None,
        description="IN,OUT: USD per million input and output tokens, for models "
        "the price list lacks and self-hosted servers.",
    )
    review_token: str | None = Field(
        None, description="Token `kernelevolve serve` requires on non-loopback addresses (like --token)."
    )
    debug: bool = Field(False, description="1: show Python tracebacks of internal errors.")

    @field_validator("price", mode="before")
    @classmethod
    def _price(cls, value: Any) -> Any:
        if isinstance(value, str):
            parts = value.split(",")
            if len(parts) != 2:
                raise ValueError("expected IN,OUT in USD per million tokens")
            return tuple(p.strip() for p in parts)
        return value

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        if value.lower() not in LOG_LEVELS:
            raise ValueError(f"one of {', '.join(LOG_LEVELS)}")
        return value.lower()

    def operator_options(self) -> dict[str, Any]:
        """The model settings given here, as operator options (saved with a run that uses them)."""
        values = {option: getattr(self, name) for name, option in _OPERATOR_OPTION.items()}
        values = {k: v for k, v in values.items() if v is not None}
        values["llm_insights"], values["use_cache"] = self.llm_insights, self.reply_cache
        if self.price is not None:
            values["price"] = list(self.price)
        return values


LOG_LEVELS = ("debug", "info", "warning", "error")
# settings field -> the operator option it sets (kernelevolve.operators.resolve_operator)
_OPERATOR_OPTION = {
    "temperature": "temperature",
    "max_tokens": "max_tokens",
    "llm_timeout": "timeout_s",
    "llm_retries": "max_retries",
    "context_tokens": "token_budget",
    "file_wait": "wait_s",
}


@functools.cache
def settings() -> Settings:
    """The environment's settings, read on first use; SettingsError (one line) when one is unusable."""
    try:
        return Settings()
    except ValidationError as e:
        err = e.errors()[0]
        name = PREFIX + str(err["loc"][0]).upper() if err.get("loc") else PREFIX
        value = err.get("input")
        shown = f"={value!r}" if isinstance(value, str) else ""
        raise SettingsError(f"{name}{shown}: {err['msg']}") from None


def environment_help() -> str:
    """One line per variable, for --help and the README."""
    return "\n".join(f"{PREFIX}{name.upper()}: {field.description}" for name, field in Settings.model_fields.items())
