"""``--executor local|ray`` and ``--ray-address``: one definition, the same on index, audit and dedup."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from splitaudit.indexer.cli.executor_option import executor_of, executor_options
from splitaudit.indexer.cli.main import cli
from splitaudit.indexer.pipeline.ray_match import Executor


@pytest.mark.parametrize("command", ["index", "audit", "dedup"])
def test_every_command_takes_both_options(command: str) -> None:
    params = {p.name: p for p in cli.commands[command].params}  # type: ignore[attr-defined]
    choice = params["executor"]
    assert isinstance(choice.type, click.Choice) and list(choice.type.choices) == ["local", "ray"]
    assert choice.default == "local"
    assert params["ray_address"].opts == ["--ray-address"]
    out = CliRunner().invoke(cli, [command, "--help"]).output
    assert "--executor [local|ray]" in out and "--ray-address ADDRESS" in out


@pytest.mark.parametrize("command", ["index", "audit", "dedup"])
def test_an_unknown_executor_is_a_usage_error(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "x", "--executor", "spark"])
    assert result.exit_code == 2 and "'spark' is not one of" in result.output


def test_the_options_name_an_executor() -> None:
    assert executor_of("local", None, workers=3) == Executor("local", workers=3)
    assert executor_of("ray", "auto", workers=2, actors=8) == Executor(
        "ray", ray_address="auto", workers=2, actors=8
    )


def test_a_command_gets_its_own_help_text() -> None:
    @click.command()
    @executor_options("where it runs", "which cluster")
    def run(executor: str, ray_address: str | None) -> None:
        click.echo(f"{executor} {ray_address}")

    result = CliRunner().invoke(run, ["--executor", "ray", "--ray-address", "auto"])
    assert result.output.strip() == "ray auto"
    helped = CliRunner().invoke(run, ["--help"]).output
    assert "where it runs" in helped and "which cluster" in helped
    assert helped.index("--executor") < helped.index("--ray-address")
