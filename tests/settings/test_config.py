"""Settings: defaults, YAML, environment, overrides, camellia's spelling, validation."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from delayqueue.settings.config import (
    KEYS,
    ConfigError,
    Settings,
    env_for,
    env_var_of,
    find_config_file,
    load_settings,
)
from delayqueue.settings.redis_url import RedisTarget, parse_target

REPO_CONFIG = Path(__file__).resolve().parents[2] / "config" / "delayqueue.yaml"

CAMELLIA_DEFAULTS = {
    "namespace": "default",
    "ttl_millis": 3_600_000,
    "max_retry": 10,
    "ack_timeout_millis": 30_000,
    "msg_schedule_millis": 100,
    "topic_schedule_seconds": 600,
    "end_life_msg_expire_millis": 300_000,
    "topic_active_tag_timeout_millis": 1_800_000,
    "monitor_interval_seconds": 60,
    "long_polling_timeout_millis": 10_000,
}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "dq.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def no_files(tmp_path, monkeypatch):
    """Run in an empty directory and hide the packaged defaults: built-in defaults only."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("delayqueue.settings.config.find_config_file",
                        lambda path=None, env=None: None)


def test_defaults_equal_camellias():
    settings = Settings()
    for name, value in CAMELLIA_DEFAULTS.items():
        assert getattr(settings, name) == value, name
    assert settings.redis_url == "" and settings.embedded_redis


def test_builtin_defaults_are_used_when_there_is_no_file(no_files):
    assert load_settings(env={}) == Settings()


def test_shipped_yaml_lists_every_key_with_its_default():
    document = yaml.safe_load(REPO_CONFIG.read_text())
    assert list(document) == list(KEYS)
    defaults = Settings()
    for key, value in document.items():
        assert value == getattr(defaults, key.replace("-", "_")), key
    # and every key carries a comment
    for line in REPO_CONFIG.read_text().splitlines():
        if re.match(r"^[a-z]", line):
            assert "#" in line, line
    assert load_settings(REPO_CONFIG, env={}) == defaults


def test_yaml_file_values_are_read(tmp_path):
    path = write(tmp_path, "namespace: orders\nttl-millis: 5000\nworker-class: gthread\n")
    settings = load_settings(path, env={})
    assert (settings.namespace, settings.ttl_millis, settings.worker_class) == (
        "orders", 5000, "gthread")
    assert settings.max_retry == 10  # untouched keys keep their defaults


def test_env_overrides_file_and_overrides_override_env(tmp_path):
    path = write(tmp_path, "ttl-millis: 5000\nport: 9000\nmax-retry: 3\n")
    env = {"DELAYQUEUE_TTL_MILLIS": "7000", "DELAYQUEUE_PORT": "9100"}
    settings = load_settings(path, env=env, overrides={"port": 9200})
    assert (settings.ttl_millis, settings.port, settings.max_retry) == (7000, 9200, 3)


def test_overrides_accept_python_names_and_yaml_keys(no_files):
    settings = load_settings(env={}, overrides={"ack_timeout_millis": 5, "max-batch": 7,
                                                "log_level": None})
    assert (settings.ack_timeout_millis, settings.max_batch, settings.log_level) == (5, 7, "info")


def test_config_path_comes_from_env_var(tmp_path):
    path = write(tmp_path, "namespace: fromenv\n")
    assert load_settings(env={"DELAYQUEUE_CONFIG": str(path)}).namespace == "fromenv"


def test_missing_explicit_config_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "nope.yaml", env={})


def test_config_file_in_current_directory_is_found(tmp_path, monkeypatch):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "delayqueue.yaml").write_text("namespace: local\n")
    monkeypatch.chdir(tmp_path)
    assert find_config_file(env={}) == tmp_path / "config" / "delayqueue.yaml"
    assert load_settings(env={}).namespace == "local"


def test_camellia_block_is_accepted_as_pasted(tmp_path, caplog):
    path = write(tmp_path, """
server:
  port: 8080
spring:
  application:
    name: camellia-delay-queue-server
camellia-delay-queue-server:
  ttl-millis: 7200000
  max-retry: 4
  ack-timeout-millis: 15000
  monitorIntervalSeconds: 30
  namespace: legacy
  schedule-thread-num: 4
  end-life-msg-expire-millis: 3000000
  long-polling-task-queue-size: 10000
  longPollingScheduledThreadSize: 32
  long-polling-msg-ready-callback-thread-size: 32
  long-polling-msg-ready-callback-queue-size: 10000
  long-polling-timeout-millis: 20000
camellia-redis:
  type: local
  local:
    resource: redis://secret@127.0.0.1:6390?db=2
""")
    settings = load_settings(path, env={})
    assert settings.ttl_millis == 7_200_000
    assert settings.max_retry == 4
    assert settings.ack_timeout_millis == 15_000
    assert settings.monitor_interval_seconds == 30
    assert settings.namespace == "legacy"
    assert settings.end_life_msg_expire_millis == 3_000_000
    assert "schedule-thread-num" in caplog.text  # ignored, but said so
    for key in ("long-polling-task-queue-size", "longPollingScheduledThreadSize",
                "long-polling-msg-ready-callback-thread-size",
                "long-polling-msg-ready-callback-queue-size"):
        warned = [r.getMessage() for r in caplog.records if key in r.getMessage()]
        assert len(warned) == 1 and "\n" not in warned[0], key   # one line each
    assert settings.long_polling_timeout_millis == 20_000       # this one is ours too
    # The camellia-redis resource is honoured, never replaced by the embedded Redis.
    assert settings.redis_url == "redis://:secret@127.0.0.1:6390/2"
    assert "secret" not in caplog.text


@pytest.mark.parametrize(("resource", "url"), [
    ("redis://@127.0.0.1:6379", "redis://127.0.0.1:6379/0"),
    ("redis://pass@h:1", "redis://:pass@h:1/0"),
    ("redis://user:p@ss@h:1?db=3", "redis://user:p%40ss@h:1/3"),
    ("rediss://pw@h.example:6380", "rediss://:pw@h.example:6380/0"),
])
def test_camellia_redis_standalone_resources_become_redis_url(resource, url):
    from delayqueue.settings.camellia_redis import resource_to_url
    assert resource_to_url(resource) == url


@pytest.mark.parametrize(("section", "message"), [
    ("  type: local\n", "without local.resource"),
    ("  type: local\n  local:\n    resource: redis-sentinel://pw@h:26379\n",
     "redis-sentinel"),
    ("  type: local\n  local:\n    resource: http://proxy:6380\n", "(http)"),
    ("  type: remote\n  remote:\n    url: http://dashboard\n", "type 'remote'"),
    ("  type: custom\n", "type 'custom'"),
])
def test_a_camellia_redis_we_cannot_serve_refuses_to_start(tmp_path, section, message):
    path = write(tmp_path, "camellia-redis:\n" + section)
    with pytest.raises(ConfigError, match="camellia-redis: .*set redis-url") as info:
        load_settings(path, env={})
    assert message in str(info.value)


def test_camellia_redis_and_redis_url_together_are_refused(tmp_path):
    path = write(tmp_path, "redis-url: redis://a:1/0\ncamellia-redis:\n  type: local\n"
                           "  local:\n    resource: redis://b:2\n")
    with pytest.raises(ConfigError, match="redis-url: given twice"):
        load_settings(path, env={})


@pytest.mark.parametrize("resource", [
    "redis-cluster://@127.0.0.1:7000,127.0.0.1:7001", "redis-sentinel://s3cret@h:26379/m"])
def test_camellia_redis_sentinel_and_cluster_resources_are_the_redis_url(tmp_path, resource):
    path = write(tmp_path, f"""
camellia-redis:
  type: local
  local:
    resource: {resource}
camellia-delay-queue-server:
  namespace: legacy
""")
    assert load_settings(path, env={}).redis_url == resource
    # The environment still wins over the file.
    env = {"DELAYQUEUE_REDIS_URL": "redis+cluster://h:1"}
    assert load_settings(path, env=env).redis_url == "redis+cluster://h:1"


def test_nested_mapping_means_joined_key(tmp_path):
    path = write(tmp_path, "redis:\n  url: redis://localhost:6379/2\n  key-prefix: q\n")
    settings = load_settings(path, env={})
    assert (settings.redis_url, settings.redis_key_prefix) == ("redis://localhost:6379/2", "q")


def test_same_key_twice_is_an_error(tmp_path):
    path = write(tmp_path, "max-retry: 1\ncamellia-delay-queue-server:\n  max-retry: 2\n")
    with pytest.raises(ConfigError, match="max-retry: given twice"):
        load_settings(path, env={})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"ttl_millis": "abc"}, "ttl-millis: must be an integer > 0, got 'abc'"),
        ({"ttl_millis": 0}, "ttl-millis: must be an integer > 0, got 0"),
        ({"max_retry": -1}, "max-retry: must be an integer >= 0, got -1"),
        ({"max_retry": True}, "max-retry: must be an integer >= 0, got True"),
        ({"port": 70000}, "port: must be an integer between 1 and 65535, got 70000"),
        ({"monitor_interval_seconds": 7200}, "monitor-interval-seconds: must be an integer "
                                             "between 1 and 3600, got 7200"),
        ({"worker_class": "eventlet"}, "worker-class: must be one of gevent, gthread, sync"),
        ({"log_level": "loud"}, "log-level: must be one of debug, info, warning, error"),
        ({"namespace": "a:b"}, "namespace: must be 1 to 64 characters"),
        ({"namespace": "x{y}"}, "namespace: must be 1 to 64 characters"),
        ({"namespace": ""}, "namespace: must be 1 to 64 characters"),
        ({"namespace": "n" * 65}, "namespace: must be 1 to 64 characters"),
        ({"max_msg_id_length": 16}, "max-msg-id-length: must be an integer >= 32"),
        ({"data_dir": ""}, "data-dir: must be a non-empty string"),
        ({"long_polling_timeout_millis": 70000},
         "long-polling-timeout-millis: must be <= max-long-polling-timeout-millis (60000)"),
    ],
)
def test_invalid_value_names_key_rule_and_value(no_files, overrides, message):
    with pytest.raises(ConfigError) as info:
        load_settings(env={}, overrides=overrides)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_invalid_env_value_names_the_variable(no_files):
    with pytest.raises(ConfigError) as info:
        load_settings(env={"DELAYQUEUE_TTL_MILLIS": "abc"})
    assert str(info.value) == (
        "ttl-millis: must be an integer > 0, got 'abc' (from DELAYQUEUE_TTL_MILLIS)")


def test_invalid_yaml_value_names_the_file(tmp_path):
    path = write(tmp_path, "ack-timeout-millis: soon\n")
    with pytest.raises(ConfigError, match=r"ack-timeout-millis: must be an integer > 0, "
                                          r"got 'soon' \(in .*dq.yaml\)"):
        load_settings(path, env={})


def test_integers_may_be_strings_in_env(no_files):
    settings = load_settings(env={"DELAYQUEUE_MAX_BATCH": " 50 ", "DELAYQUEUE_WORKERS": "4"})
    assert (settings.max_batch, settings.workers) == (50, 4)


def test_a_value_is_read_by_the_rule_requests_follow(tmp_path):
    # The same parser as for a request (settings/value.py): a whole float is an integer and
    # booleans take camellia's words in any case, so a value sent as a topic setting can be
    # written as the server's default.
    path = write(tmp_path, "max-batch: 50.0\ndead-letter: 'OFF'\n")
    settings = load_settings(path, env={"DELAYQUEUE_WORKERS": "+4"})
    assert (settings.max_batch, settings.dead_letter, settings.workers) == (50, False, 4)


def test_unknown_key_in_file_is_named_with_a_suggestion(tmp_path):
    path = write(tmp_path, "ttl-milis: 5000\n")
    with pytest.raises(ConfigError, match=r"^ttl-milis: unknown setting .*did you mean "
                                          r"'ttl-millis'"):
        load_settings(path, env={})


def test_unknown_override_is_an_error(no_files):
    with pytest.raises(ConfigError, match="bogus: unknown setting"):
        load_settings(env={}, overrides={"bogus": 1})


def test_unknown_env_var_is_only_a_warning(no_files, caplog):
    settings = load_settings(env={"DELAYQUEUE_SOMETHING_ELSE": "1"})
    assert settings == Settings()
    assert "DELAYQUEUE_SOMETHING_ELSE" in caplog.text


@pytest.mark.parametrize("url", [
    "redis://localhost:6379/0", "rediss://u:p@h:6380/1", "unix:///tmp/redis.sock", "",
    "redis-sentinel://h1:26379,h2:26379/mymaster", "redis+sentinel://s3cret@h1:26379/mm/3",
    "redis-cluster://h1:7000,h2:7001", "redis+cluster://u:s3cret@10.0.0.1:7000",
    # The scheme in any case, as connect_redis reads it (redis_url.scheme_of).
    "REDIS://localhost:6379/0", "Redis-Sentinel://h1:26379/mymaster", "REDIS+CLUSTER://h1:7000",
])
def test_accepted_redis_urls(no_files, url):
    assert load_settings(env={}, overrides={"redis_url": url}).redis_url == url


@pytest.mark.parametrize(("url", "expected"), [
    ("redis-sentinel://h1:26379,h2:26380/mymaster",
     RedisTarget("sentinel", (("h1", 26379), ("h2", 26380)), "mymaster")),
    ("redis+sentinel://p@ss@h1:26379/m/2",
     RedisTarget("sentinel", (("h1", 26379),), "m", 2, None, "p@ss")),
    ("redis-cluster://u:pw@h1:7000,h2:7001",
     RedisTarget("cluster", (("h1", 7000), ("h2", 7001)), "", 0, "u", "pw")),
    ("redis+cluster://:pw@h1:7000", RedisTarget("cluster", (("h1", 7000),), password="pw")),
    ("redis-cluster://@h1:7000", RedisTarget("cluster", (("h1", 7000),))),
])
def test_sentinel_and_cluster_urls_parse_as_camellia_writes_them(url, expected):
    assert parse_target(url) == expected


@pytest.mark.parametrize(("url", "message"), [
    ("http://localhost:6379", "redis-url: must start with redis://, rediss://, unix://"),
    ("localhost:6379", "redis-url: must start with"),
    ("redis+sentinel://h1:26379,h2:26379", "redis-url: needs the master's name"),
    ("redis-sentinel://h1:26379/m/x", "redis-url: db must be a number"),
    ("redis-sentinel://h1/m", "redis-url: 'h1' is not host:port"),
    ("redis-cluster://h1:7000,,h2:1", "redis-url: 'an empty entry' is not host:port"),
    ("redis-cluster://h1:99999", "redis-url: 'h1:99999' is not host:port"),
    ("redis-cluster://h1:7000/0", "redis-url: a Cluster has no master name or db"),
    ("redis-cluster://h1:7000?x=1", "redis-url: takes no query or fragment"),
    ("redis://h:notaport/0", "redis-url: is not a valid URL"),
    ("unix://", "redis-url: unix:// needs a socket path"),
])
def test_bad_redis_url_scheme_is_rejected(no_files, url, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_settings(env={}, overrides={"redis_url": url})


def test_redis_password_never_appears_in_errors_or_repr(no_files):
    with pytest.raises(ConfigError) as info:
        load_settings(env={}, overrides={"redis_url": "http://user:s3cret@h:1"})
    assert "s3cret" not in str(info.value)
    settings = load_settings(env={"DELAYQUEUE_REDIS_URL": "redis://:s3cret@h:6379/0"})
    assert "s3cret" not in repr(settings)
    assert settings.redis_url_redacted == "redis://:***@h:6379/0"
    for url in ("redis-sentinel://s3cret@h:1,h:2/m", "redis+cluster://u:s3cret@h:1"):
        settings = load_settings(env={"DELAYQUEUE_REDIS_URL": url})
        assert "s3cret" not in repr(settings) and "***@h:" in settings.redis_url_redacted
    with pytest.raises(ConfigError) as info:
        load_settings(env={}, overrides={"redis_url": "redis-cluster://s3cret@h:1/x"})
    assert "s3cret" not in str(info.value)


def test_settings_constructed_directly_are_validated():
    with pytest.raises(ConfigError, match="workers: must be an integer > 0"):
        Settings(workers=0)
    with pytest.raises(ConfigError):
        dataclasses.replace(Settings(), port=0)


def test_env_for_round_trips_through_load_settings(no_files):
    overrides = {"port": 9001, "redis_url": "redis://h:1/0", "worker-class": "sync"}
    env = env_for(overrides)
    assert env == {"DELAYQUEUE_PORT": "9001", "DELAYQUEUE_REDIS_URL": "redis://h:1/0",
                   "DELAYQUEUE_WORKER_CLASS": "sync"}
    settings = load_settings(env=env)
    assert (settings.port, settings.redis_url, settings.worker_class) == (
        9001, "redis://h:1/0", "sync")


def test_as_table_has_a_row_per_setting_with_its_env_var():
    rows = Settings().as_table()
    assert [row["key"] for row in rows] == list(KEYS)
    ttl = next(row for row in rows if row["key"] == "ttl-millis")
    assert ttl["env"] == env_var_of("ttl_millis") == "DELAYQUEUE_TTL_MILLIS"
    assert ttl["default"] == ttl["value"] == 3_600_000 and ttl["doc"]


# --- the settings reach `delayqueue serve` and its gunicorn child ---------------------------


def serve_args(*argv: str):
    import argparse

    from delayqueue.cli import serve

    parser = argparse.ArgumentParser()
    serve.register(parser.add_subparsers())
    return parser.parse_args(["serve", *argv])


def test_serve_config_error_exits_2_naming_the_key(no_files, capsys):
    args = serve_args("--port", "0")
    assert args.func(args) == 2
    assert capsys.readouterr().err.strip() == (
        "delayqueue: config error: port: must be an integer between 1 and 65535, got 0 "
        "(from command line)")


def test_serve_passes_config_file_and_options_to_gunicorn_by_env(tmp_path):
    from delayqueue.cli.serve import _overrides, child_env

    path = write(tmp_path, "namespace: child\n")
    args = serve_args("--config", str(path), "--port", "9300", "--worker-class", "sync")
    env = child_env(args.config, _overrides(args), base={"DELAYQUEUE_PORT": "1", "HOME": "/x"})
    assert env["DELAYQUEUE_CONFIG"] == str(path.resolve())
    assert (env["DELAYQUEUE_PORT"], env["DELAYQUEUE_WORKER_CLASS"], env["HOME"]) == (
        "9300", "sync", "/x")
    assert "DELAYQUEUE_REDIS_URL" not in env  # unset options are not passed
    settings = load_settings(env=env)  # what gunicorn_conf and each worker will read
    assert (settings.namespace, settings.port, settings.worker_class) == ("child", 9300, "sync")


def test_gunicorn_conf_follows_the_settings(monkeypatch):
    import importlib
    import sys

    monkeypatch.setenv("DELAYQUEUE_PORT", "9400")
    monkeypatch.setenv("DELAYQUEUE_WORKER_CLASS", "gthread")
    monkeypatch.setenv("DELAYQUEUE_THREADS", "8")
    monkeypatch.setenv("DELAYQUEUE_REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.delitem(sys.modules, "delayqueue.gunicorn_conf", raising=False)
    conf = importlib.import_module("delayqueue.gunicorn_conf")
    try:
        assert conf.bind.endswith(":9400")
        # gunicorn's gthread worker, in its one-send-per-response subclass
        # (delayqueue/server/gunicorn_workers.py)
        assert (conf.worker_class, conf.threads, conf.preload_app) == \
            ("delayqueue.server.gunicorn_workers.OneSendThreadWorker", 8, False)
        from gunicorn.util import load_class
        from gunicorn.workers.gthread import ThreadWorker
        assert issubclass(load_class(conf.worker_class), ThreadWorker)

        class Worker:  # the app failed to load: no wsgi attribute; must not raise
            pass

        conf.worker_exit(None, Worker())
        stopped = []
        worker = Worker()
        worker.wsgi = type("App", (), {"extensions": {
            "delayqueue": type("S", (), {"stop": lambda self: stopped.append(1)})()}})()
        conf.worker_exit(None, worker)
        assert stopped == [1]
    finally:
        sys.modules.pop("delayqueue.gunicorn_conf", None)


def test_gunicorn_conf_without_a_redis_url_stops_with_one_clear_line(monkeypatch, capsys):
    import importlib
    import sys

    import pytest

    monkeypatch.delenv("DELAYQUEUE_REDIS_URL", raising=False)
    monkeypatch.delitem(sys.modules, "delayqueue.gunicorn_conf", raising=False)
    try:
        with pytest.raises(SystemExit) as exited:
            importlib.import_module("delayqueue.gunicorn_conf")
        assert exited.value.code == 2
        assert "redis-url: is empty" in capsys.readouterr().err
    finally:
        sys.modules.pop("delayqueue.gunicorn_conf", None)
