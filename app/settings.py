"""Settings of the API server (pydantic-settings, environment prefix ``SPLITAUDIT_``); built in ``create_app``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from splitaudit.indexer.workspace import DEFAULT_HOME

MIN_TOKEN_CHARS = 16
ROLES = ("read", "write")


def _split_list(value: Any) -> Any:
    """``a,b`` (or a JSON list) from the environment as a list of stripped, non-empty strings."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


def parse_token_entries(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """``name:token[:read|write],...`` as (name -> token, name -> role); ``ValueError`` if malformed."""
    tokens: dict[str, str] = {}
    roles: dict[str, str] = {}
    for pair in _split_list(text):
        name, sep, token = pair.partition(":")
        name, token = name.strip(), token.strip()
        if not sep or not name or not token:
            raise ValueError(f"API token entry {name or '(no name)'!r} must look like name:token")
        head, _, role = token.rpartition(":")
        if head and role in ROLES:
            token, roles[name] = head.strip(), role
        if name in tokens:
            raise ValueError(f"API token name {name!r} appears twice")
        tokens[name] = token
    return tokens, roles


class ApiSettings(BaseSettings):
    """Everything the server is configured with; every field reads ``SPLITAUDIT_<NAME>``."""

    # hide_input_in_errors: a validation error never prints the configured tokens.
    model_config = SettingsConfigDict(
        env_prefix="SPLITAUDIT_", extra="ignore", hide_input_in_errors=True
    )

    home: Path = Field(
        default=DEFAULT_HOME, description="Folder holding the SQLite DB, FAISS stores and uploads."
    )
    database_url: str | None = Field(
        default=None, description="PostgreSQL URL; default SQLite inside home."
    )
    # name -> token, from ``name:token,name2:token2:read`` (roles go to ``api_token_roles``).
    api_tokens: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        repr=False,
        description="API tokens as name:token pairs, comma separated; name:token:read makes a "
        f"read-only token. Each token has at least {MIN_TOKEN_CHARS} characters.",
    )
    # name -> role (``read`` or ``write``); a token not named here writes.
    api_token_roles: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description="Role per token name (read or write); set through name:token:read entries.",
    )
    allow_anonymous: bool = Field(
        default=False,
        description="Without API tokens, also answer requests that arrive on a non-loopback "
        "address (refused otherwise: an open server lets anyone submit and read).",
    )
    public_read: bool = Field(
        default=False,
        description="With tokens configured, let reads (reports, matches, thumbnails, /ui) go without one.",
    )
    max_upload_mb: float = Field(
        default=1024, gt=0, description="Largest accepted upload (413 above)."
    )
    max_json_mb: float = Field(
        default=1,
        gt=0,
        description="Largest request body other than a multipart upload, e.g. JSON (413 above).",
    )
    max_unpacked_mb: float = Field(
        default=8192, gt=0, description="Largest unpacked size of an uploaded archive."
    )
    source_roots: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="Server folders that manifests, split folders and index jobs may read.",
    )
    models_roots: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="Server folders holding model checkpoints that API requests may name "
        "(registry names such as ViT-B-32:laion2b_s34b_b79k are always allowed).",
    )
    run_worker: bool = Field(
        default=True, description="Run the job worker inside the server process."
    )
    job_lease_s: float = Field(
        default=60.0,
        gt=0,
        description="Job lease; a job whose worker is silent this long is re-run.",
    )
    backend: Literal["auto", "torch", "onnxruntime", "openvino"] = Field(
        default="auto",
        description="Inference backend for embedding models (see `splitaudit index --help`).",
    )
    job_stop_grace_s: float = Field(
        default=10.0,
        gt=0,
        description="On shutdown, how long a running job may take to stop before it is handed "
        "back to the queue.",
    )
    job_poll_s: float = Field(
        default=1.0, gt=0, description="How often an idle worker looks for queued jobs."
    )
    device: str = Field(
        default="auto", description="Where jobs embed images: auto, cpu, cuda, cuda:N or mps."
    )

    @model_validator(mode="before")
    @classmethod
    def _parse_tokens(cls, data: Any) -> Any:
        """``name:token[:role]`` entries from the environment as tokens and roles."""
        if not isinstance(data, dict) or not isinstance(data.get("api_tokens"), str):
            return data
        try:
            tokens, roles = parse_token_entries(data["api_tokens"])
        except ValueError:
            return data  # ``_token_text`` raises it again, naming the field
        if not tokens:
            return data
        roles = {**dict(data.get("api_token_roles") or {}), **roles}
        return {**data, "api_tokens": tokens, "api_token_roles": roles}

    @field_validator("api_tokens", mode="before")
    @classmethod
    def _token_text(cls, value: Any) -> Any:
        if isinstance(value, str):
            tokens, _ = parse_token_entries(value)
            if not tokens:
                # Set but blank: refusing beats silently serving without auth.
                raise ValueError(
                    "set but holds no token; give name:token entries, or unset it to serve "
                    "without auth (loopback only)"
                )
            return tokens
        return value

    @field_validator("api_tokens")
    @classmethod
    def _strong_tokens(cls, tokens: dict[str, str]) -> dict[str, str]:
        for name, token in tokens.items():
            if len(token.strip()) < MIN_TOKEN_CHARS or token != token.strip():
                raise ValueError(
                    f"API token {name!r} is too short ({len(token.strip())} characters) or padded "
                    f"with spaces; use at least {MIN_TOKEN_CHARS} characters, e.g. "
                    "python -c 'import secrets; print(secrets.token_urlsafe(24))'"
                )
        return tokens

    @field_validator("api_token_roles")
    @classmethod
    def _known_roles(cls, roles: dict[str, str]) -> dict[str, str]:
        for name, role in roles.items():
            if role not in ROLES:
                raise ValueError(f"API token {name!r} has role {role!r}; use read or write")
        return roles

    @field_validator("source_roots", "models_roots", mode="before")
    @classmethod
    def _parse_roots(cls, value: Any) -> Any:
        return _split_list(value)

    @property
    def max_upload_bytes(self) -> int:
        """``max_upload_mb`` in bytes."""
        return int(self.max_upload_mb * 1024 * 1024)

    @property
    def max_json_bytes(self) -> int:
        """``max_json_mb`` in bytes."""
        return int(self.max_json_mb * 1024 * 1024)

    @property
    def max_unpacked_bytes(self) -> int:
        """``max_unpacked_mb`` in bytes."""
        return int(self.max_unpacked_mb * 1024 * 1024)

    @property
    def auth_enabled(self) -> bool:
        """True when at least one API token is configured."""
        return bool(self.api_tokens)

    @property
    def read_requires_token(self) -> bool:
        """True when reads need a token: tokens are configured and ``public_read`` is off."""
        return self.auth_enabled and not self.public_read
