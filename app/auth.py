"""Bearer-token auth: with ``SPLITAUDIT_API_TOKENS`` set, writes (and optionally reads) need a token.

Each token has a role: ``write`` (the default: reads and writes) or ``read`` (reads only; a
write with it is refused with 403).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from splitaudit.indexer.errors import AuthError, PermissionDeniedError

ROLES = ("read", "write")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the token's configured name and role, or ``anonymous`` when auth is off."""

    name: str
    authenticated: bool
    role: str = "write"

    @property
    def can_write(self) -> bool:
        """Whether this caller may change state (submit, review, index, delete)."""
        return self.role == "write"


ANONYMOUS = Principal(name="anonymous", authenticated=False)


def require_write(principal: Principal) -> Principal:
    """``principal`` if it may write; ``PermissionDeniedError`` (403) for a read-only token."""
    if not principal.can_write:
        raise PermissionDeniedError(
            f"the API token {principal.name!r} is read-only; use a token with the write role "
            "(SPLITAUDIT_API_TOKENS entry name:token, not name:token:read)"
        )
    return principal


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer TOKEN`` header, else ``None``."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def authenticate(
    tokens: Mapping[str, str],
    header: str | None,
    *,
    required: bool,
    roles: Mapping[str, str] | None = None,
) -> Principal:
    """Check the ``Authorization`` header against ``tokens`` (name -> token; ``roles``: name -> role).

    Without configured tokens everyone is anonymous. With tokens, a given token must be
    valid; a missing one is refused only when ``required``.
    """
    if not tokens:
        return ANONYMOUS
    token = bearer_token(header)
    if token is None:
        if header:
            raise AuthError("malformed Authorization header: send 'Authorization: Bearer <token>'")
        if required:
            raise AuthError(
                "this endpoint needs an API token: send 'Authorization: Bearer <token>' "
                "(tokens are configured on the server with SPLITAUDIT_API_TOKENS)"
            )
        return ANONYMOUS
    found = None
    for name, expected in tokens.items():
        # Compare against every token so timing does not reveal which prefix matched.
        if hmac.compare_digest(token.encode(), expected.encode()):
            found = name
    if found is None:
        raise AuthError("invalid API token: check the token, or ask the server admin for one")
    return Principal(name=found, authenticated=True, role=(roles or {}).get(found, "write"))
