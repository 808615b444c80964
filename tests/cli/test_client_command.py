"""What every client command shares (delayqueue/cli/client_command.py), run in-process: the
four options and the one-line failure with its exit code."""

from __future__ import annotations

import argparse

import pytest

from delayqueue.cli import build_parser, main

EXIT_FAILURE = 1
NOT_CLIENT_COMMANDS = {"serve", "report", "migrate-storage"}  # they talk to Redis or Spark
# Each client command with the least it needs to reach the server.
CLIENT_COMMANDS = {
    "send": ["send", "t", "body"],
    "pull": ["pull", "t"],
    "long-poll": ["long-poll", "t"],
    "ack": ["ack", "t", "m"],
    "nack": ["nack", "t", "m"],
    "change-visibility": ["change-visibility", "t", "m", "30s"],
    "reschedule": ["reschedule", "t", "m", "--delay", "0"],
    "get": ["get", "t", "m"],
    "delete": ["delete", "t", "m"],
    "topics": ["topics"],
    "topic-info": ["topic-info", "t"],
    "topic-config": ["topic-config", "t"],
    "dlq list": ["dlq", "list", "t"],
    "dlq redrive": ["dlq", "redrive", "t"],
    "dlq purge": ["dlq", "purge", "t"],
    "topic pause": ["topic", "pause", "t"],
    "topic resume": ["topic", "resume", "t"],
    "topic purge": ["topic", "purge", "t", "--yes"],
    "list": ["list", "t", "--status", "waiting"],
    "monitor": ["monitor"],
    "consume": ["consume", "t", "--", "true"],
}


def commands(parser: argparse.ArgumentParser, prefix: str = "") -> set[str]:
    """Every command the parser runs, a nested one as ``dlq list``."""
    found = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if sub.prog.endswith(f" {name}"):  # not an alias: extend runs change-visibility
                    found |= commands(sub, f"{prefix}{name} ") or {prefix + name}
    return found


def test_the_table_names_every_client_command_once():
    # A client command added later must join the table, so that the test below runs it.
    assert commands(build_parser()) == set(CLIENT_COMMANDS) | NOT_CLIENT_COMMANDS


@pytest.mark.parametrize("name", sorted(CLIENT_COMMANDS))
def test_every_client_command_takes_the_four_options_and_fails_in_one_line_without_a_server(
        name, dead_url, capsys):
    argv = list(CLIENT_COMMANDS[name])
    if name == "consume":  # its options go before the command's "--"
        cut = argv.index("--")
        argv[cut:cut] = ["--url", dead_url, "--token", "tok", "--json", "--timeout", "2"]
    else:
        argv += ["--url", dead_url, "--token", "tok", "--json", "--timeout", "2"]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == EXIT_FAILURE, err
    assert out == ""
    assert err.startswith("delayqueue: error: no server reachable: "), err
    assert len(err.strip().splitlines()) == 1, err
