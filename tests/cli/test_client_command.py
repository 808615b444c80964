"""What every client command shares (delayqueue/cli/client_command.py), run in-process: the
four options, the one-line failure with its exit code (with --json, the JSON error object on
stdout), and help for every command and option of every parser."""

from __future__ import annotations

import argparse
import json

import pytest

from delayqueue.cli import build_parser, main
from delayqueue.cli.failure import wants_json

EXIT_FAILURE, EXIT_USAGE = 1, 2
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
    "schedule create": ["schedule", "create", "t", "s", "body", "--every", "1s"],
    "schedule list": ["schedule", "list"],
    "schedule get": ["schedule", "get", "t", "s"],
    "schedule delete": ["schedule", "delete", "t", "s"],
    "schedule pause": ["schedule", "pause", "t", "s"],
    "schedule resume": ["schedule", "resume", "t", "s"],
    "subscription list": ["subscription", "list", "t"],
    "subscription create": ["subscription", "create", "t", "s"],
    "subscription delete": ["subscription", "delete", "t", "s"],
    "subscription config": ["subscription", "config", "t", "s"],
    "subscription push-status": ["subscription", "push-status", "t", "s"],
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


def with_options(name: str, *options: str) -> list[str]:
    argv = list(CLIENT_COMMANDS[name])
    cut = argv.index("--") if name == "consume" else len(argv)  # consume: before its "--"
    argv[cut:cut] = options
    return argv


@pytest.mark.parametrize("name", sorted(CLIENT_COMMANDS))
def test_every_client_command_takes_the_four_options_and_fails_in_one_line_without_a_server(
        name, dead_url, capsys):
    code = main(with_options(name, "--url", dead_url, "--token", "tok", "--timeout", "2"))
    out, err = capsys.readouterr()
    assert code == EXIT_FAILURE, err
    assert out == ""
    assert err.startswith("delayqueue: error: no server reachable: "), err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("name", sorted(CLIENT_COMMANDS))
def test_every_client_command_with_json_fails_with_one_json_error_on_stdout(name, dead_url,
                                                                           capsys):
    code = main(with_options(name, "--url", dead_url, "--json", "--timeout", "2"))
    out, err = capsys.readouterr()
    assert code == EXIT_FAILURE and err == "", err
    error = json.loads(out)["error"]
    assert error["kind"] == "unreachable" and error["exitCode"] == EXIT_FAILURE
    assert error["message"].startswith("no server reachable: ") and error["code"] is None


@pytest.mark.parametrize("name", sorted(CLIENT_COMMANDS))
def test_every_client_command_with_json_reports_a_bad_argument_as_json(name, capsys):
    code = main(with_options(name, "--json", "--timeout", "soon"))
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE and err == "", err
    assert json.loads(out) == {"error": {
        "kind": "usage", "code": None, "exitCode": EXIT_USAGE,
        "message": f"delayqueue {name}: argument --timeout: invalid float value: 'soon'"}}


def parsers(parser: argparse.ArgumentParser, name: str = "delayqueue"):
    """(name, parser) of the command line and of every command under it, aliases once."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:   # one per command, not per alias
                yield from parsers(action.choices[choice.dest], f"{name} {choice.dest}")


def test_every_command_and_every_argument_of_every_parser_has_help():
    missing = []
    for name, parser in parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{name} {c.dest}" for c in action._choices_actions
                            if not (c.help or "").strip()]
            elif not (action.help or "").strip() or action.help == argparse.SUPPRESS:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []
    # The walk reached every command: each, plus the command line, dlq, topic, schedule and
    # subscription themselves.
    assert len(list(parsers(build_parser()))) == len(commands(build_parser())) + 5


def test_version_prints_the_package_version(capsys):
    from delayqueue import __version__

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"delayqueue {__version__}\n"


@pytest.mark.parametrize(("url", "says"), [
    ("127.0.0.1:8080", "--url: '127.0.0.1:8080' has no scheme: write http://127.0.0.1:8080 "
                       "(or https://)"),
    ("localhost:8080", "--url: 'localhost:8080' has no scheme: write http://localhost:8080 "
                       "(or https://)"),
    ("ftp://h:1", "--url: 'ftp://h:1': the scheme must be http or https, got 'ftp'"),
    ("http://h:99999", "--url: 'http://h:99999': the port is not a number from 0 to 65535"),
    ("http://", "--url: 'http://' names no host"),
    ("http://ok:1,h:2", "--url: 'h:2' has no scheme: write http://h:2 (or https://)"),
    (" , ", "--url: no server URL given (e.g. http://127.0.0.1:8080)"),
])
def test_a_url_that_is_not_http_is_refused_in_one_line_before_any_request(url, says, capsys):
    assert main(["topics", "--url", url]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and err == f"delayqueue: error: {says}\n"
    assert main(["topics", "--url", url, "--json"]) == EXIT_USAGE
    assert json.loads(capsys.readouterr().out)["error"]["message"] == says


def test_a_bad_url_in_the_environment_is_named_as_such(monkeypatch, capsys):
    monkeypatch.setenv("DELAYQUEUE_URL", "127.0.0.1:8080")
    assert main(["topics"]) == EXIT_USAGE
    assert capsys.readouterr().err == ("delayqueue: error: $DELAYQUEUE_URL: '127.0.0.1:8080' "
                                       "has no scheme: write http://127.0.0.1:8080 "
                                       "(or https://)\n")


def test_json_is_known_before_parsing_but_not_after_consumes_dashes():
    assert wants_json(["get", "t", "m", "--json"])
    assert not wants_json(["consume", "t", "--", "cmd", "--json"])
    assert wants_json(["consume", "t", "--json", "--", "cmd"])
