"""A schemathesis campaign over a live server's OpenAPI spec: requests sent, 5xx, distinct failures.

Shared by the suite (a bounded run) and ``bench/hardening.py`` (a long one).
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import requests
import uvicorn
from fastapi import FastAPI
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Unsatisfiable


@dataclass
class FuzzResult:
    """What one campaign saw."""

    requests: int = 0
    server_errors: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    failures: dict[str, str] = field(default_factory=dict)  # "METHOD path: check" -> first message

    def merge(self, other: FuzzResult) -> None:
        """Add another campaign's counts."""
        self.requests += other.requests
        self.server_errors += other.server_errors
        self.statuses.update(other.statuses)
        for key, message in other.failures.items():
            self.failures.setdefault(key, message)


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def live_server(app: FastAPI) -> Iterator[str]:
    """``app`` under uvicorn on a free loopback port (lifespan run); yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def fuzz(
    base_url: str,
    *,
    max_examples: int,
    headers: dict[str, str] | None = None,
    negative: bool = True,
    seed: int = 0,
) -> FuzzResult:
    """Run every operation of the server's live spec with generated (and invalid) input."""
    import schemathesis
    from schemathesis.generation.modes import GenerationMode

    spec = requests.get(f"{base_url}/openapi.json", timeout=30).json()
    schema = schemathesis.openapi.from_dict(spec)
    result = FuzzResult()
    session = requests.Session()
    modes = (
        [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]
        if negative
        else [GenerationMode.POSITIVE]
    )
    for operation in (r.ok() for r in schema.get_all_operations()):
        for mode in modes:
            _fuzz_operation(
                operation,
                operation.as_strategy(generation_mode=mode),
                result,
                base_url=base_url,
                session=session,
                headers=headers,
                max_examples=max_examples,
                seed=seed,
            )
    return result


def _fuzz_operation(
    operation: Any,
    strategy: Any,
    result: FuzzResult,
    *,
    base_url: str,
    session: requests.Session,
    headers: dict[str, str] | None,
    max_examples: int,
    seed: int,
) -> None:
    """``max_examples`` generated requests to one operation; counts into ``result``."""
    from schemathesis import checks as st_checks

    label = f"{operation.method.upper()} {operation.path}"
    response_checks = [
        st_checks.not_a_server_error,
        st_checks.status_code_conformance,
        st_checks.content_type_conformance,
        st_checks.response_schema_conformance,
    ]

    @hypothesis_seed(seed)
    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
        report_multiple_bugs=False,
    )
    @given(case=strategy)
    def run(case: Any) -> None:
        response = case.call(base_url=base_url, session=session, headers=headers, timeout=60)
        result.requests += 1
        result.statuses[response.status_code] += 1
        if response.status_code >= 500:
            result.server_errors += 1
        try:
            case.validate_response(response, checks=response_checks)
        except (AssertionError, BaseExceptionGroup) as exc:  # one Failure, or a FailureGroup
            found = exc.exceptions if isinstance(exc, BaseExceptionGroup) else (exc,)
            for failure in found:
                title = getattr(failure, "title", None) or str(failure).strip().split("\n")[0]
                result.failures.setdefault(
                    f"{label}: {title[:120]}", f"{response.status_code} {response.text[:300]}"
                )

    try:
        run()
    except Unsatisfiable:
        return
