"""A path whose extra is not installed names the extra in one line, one way for the command
line and the testing helpers (cli/failure.py extra_line); a module of our own missing is a broken
install and is raised as it is. tests/server/test_install_wheel.py runs the real thing in a
venv without the extras; these hold the rule itself, fast."""

from __future__ import annotations

import json

import pytest

from delayqueue.cli import failure


def missing(name: str) -> ModuleNotFoundError:
    return ModuleNotFoundError(f"No module named {name!r}", name=name)


def test_a_missing_package_names_the_extra_to_install():
    assert failure.extra_line("the server", "server", missing("yaml.loader")) == (
        "the server needs `pip install 'delayqueue[server]'` (no module named 'yaml.loader')")


@pytest.mark.parametrize("own", ["delayqueue.core.storage", "spark_jobs", "spark_jobs.tables"])
def test_a_missing_module_of_our_own_is_raised_not_taken_for_an_extra(own, capsys):
    error = missing(own)
    with pytest.raises(ModuleNotFoundError) as raised:
        failure.extra_line("the server", "server", error)
    assert raised.value is error
    with pytest.raises(ModuleNotFoundError):
        failure.missing_extra("the server", "server", error)
    assert capsys.readouterr() == ("", "")


def test_a_command_says_it_in_one_line_or_as_json_and_exits_1(capsys):
    try:
        assert failure.missing_extra("the report", "report", missing("pyspark")) == 1
        out, err = capsys.readouterr()
        assert (out, err) == ("", "delayqueue: error: the report needs "
                              "`pip install 'delayqueue[report]'` (no module named 'pyspark')\n")
        failure.set_json(True)
        assert failure.missing_extra("the report", "report", missing("pyspark")) == 1
        out, err = capsys.readouterr()
        assert err == ""
        assert json.loads(out)["error"] == {
            "kind": "missing_extra", "code": None, "exitCode": 1,
            "message": "the report needs `pip install 'delayqueue[report]'` "
                       "(no module named 'pyspark')"}
    finally:
        failure.set_json(False)
