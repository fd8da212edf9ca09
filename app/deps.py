"""FastAPI dependencies: settings, workspace, DB sessions and the caller, as ``Annotated`` aliases."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from splitaudit.app.auth import Principal, authenticate, require_write
from splitaudit.app.settings import ApiSettings
from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.workspace import Workspace


def get_settings(request: Request) -> ApiSettings:
    """The settings ``create_app`` was built with."""
    settings: ApiSettings = request.app.state.settings
    return settings


def get_workspace(request: Request) -> Workspace:
    """The workspace the lifespan opened."""
    ws: Workspace = request.app.state.workspace
    return ws


SettingsDep = Annotated[ApiSettings, Depends(get_settings)]
WorkspaceDep = Annotated[Workspace, Depends(get_workspace)]


def get_session(ws: WorkspaceDep) -> Iterator[Session]:
    """A read session (nothing is committed)."""
    with ws.sessions() as session:
        yield session


def get_transaction(ws: WorkspaceDep) -> Iterator[Session]:
    """A session committed when the endpoint returns, rolled back when it raises."""
    with transaction(ws.sessions) as session:
        yield session


def reader(request: Request, settings: SettingsDep) -> Principal:
    """The caller of a read endpoint (a token is needed once tokens exist, unless ``public_read``)."""
    return authenticate(
        settings.api_tokens,
        request.headers.get("authorization"),
        required=settings.read_requires_token,
        roles=settings.api_token_roles,
    )


def writer(request: Request, settings: SettingsDep) -> Principal:
    """The caller of a write endpoint (a valid token is needed whenever tokens are configured)."""
    return require_write(
        authenticate(
            settings.api_tokens,
            request.headers.get("authorization"),
            required=True,
            roles=settings.api_token_roles,
        )
    )


SessionDep = Annotated[Session, Depends(get_session)]
# scope="function": commit before the response is sent, so a failed commit is an error response.
TransactionDep = Annotated[Session, Depends(get_transaction, scope="function")]
ReaderDep = Annotated[Principal, Depends(reader)]
WriterDep = Annotated[Principal, Depends(writer)]
