"""Settings: loaded once from YAML, environment and overrides, validated, frozen.

Precedence, lowest first: built-in defaults < YAML file < ``DELAYQUEUE_*`` environment
variables < ``overrides`` (tests, CLI options). Keys are kebab-case as in camellia
(``ttl-millis``); the environment variable of a key is ``DELAYQUEUE_`` + the key upper-cased
with ``-`` -> ``_`` (``DELAYQUEUE_TTL_MILLIS``).

The YAML may be flat, or nested under ``camellia-delay-queue-server:`` so a camellia user can
paste their block as it is. Like Spring's relaxed binding, ``camelCase`` and ``snake_case``
spellings of a key are accepted (camellia documents ``monitorIntervalSeconds``), and a nested
mapping such as ``redis: {url: ...}`` means ``redis-url``.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit, urlunsplit

import yaml

from . import camellia_redis
from .credential import TokenError, Tokens, parse_tokens
from .push_networks import AllowedNetworks
from .redis_url import (
    CLUSTER_SCHEMES,
    SENTINEL_SCHEMES,
    STANDALONE_SCHEMES,
    RedisUrlError,
    parse_target,
    scheme_of,
)
from .topic_setting import BY_NAME
from .value import ValueProblem, parse_bool, parse_int, parse_number

logger = logging.getLogger(__name__)

ENV_PREFIX = "DELAYQUEUE_"
CONFIG_ENV_VAR = "DELAYQUEUE_CONFIG"
# DELAYQUEUE_* variables that are not settings (read elsewhere); never warned about.
# DELAYQUEUE_* variables that are not server settings: the config path, the test fixture's
# redis-server, and the client side's (the CLI's server URL, what `consume` gives its command).
NON_SETTING_ENV_VARS = frozenset({CONFIG_ENV_VAR, "DELAYQUEUE_REDIS_SERVER", "DELAYQUEUE_URL",
                                  "DELAYQUEUE_TOKEN"})
NON_SETTING_ENV_PREFIXES = ("DELAYQUEUE_MSG_",)
CAMELLIA_BLOCK = "camellia-delay-queue-server"
# camellia keys with no meaning here (its thread-pool and long-poll pool sizes: gevent holds a
# long poll without a thread): accepted and ignored, with a one-line warning.
CAMELLIA_IGNORED_KEYS = frozenset({
    "schedule-thread-num", "check-trigger-thread-num", "check-timeout-thread-num",
    "long-polling-task-queue-size", "long-polling-scheduled-thread-size",
    "long-polling-msg-ready-callback-thread-size", "long-polling-msg-ready-callback-queue-size",
})
# Top-level sections of a pasted Spring application.yml that are not ours. camellia-redis is
# read (camellia_redis.py): honoured as redis-url, or refused.
SPRING_IGNORED_SECTIONS = frozenset({"spring", "server", "logging", "management"})
REDIS_URL_SCHEMES = (*STANDALONE_SCHEMES, *SENTINEL_SCHEMES, *CLUSTER_SCHEMES)
WORKER_CLASSES = ("gevent", "gthread", "sync")
LOG_LEVELS = ("debug", "info", "warning", "error")
GENERATED_MSG_ID_LENGTH = 32
_FORBIDDEN_NAME_CHARS = re.compile(r"[{}:\s\x00-\x1f\x7f]")


class ConfigError(ValueError):
    """A setting is missing, unknown or invalid; the message names the key."""


# --- value checks -----------------------------------------------------------------------------
# A check takes (key, raw value) and returns the normalised value or raises ConfigError.
Check = Callable[[str, Any], Any]


def _fail(key: str, rule: str, raw: Any) -> ConfigError:
    return ConfigError(f"{key}: {rule}, got {raw!r}")


def _parsed(parse: Callable[[Any], Any]) -> Check:
    """A check by the shared parser (value.py), its message led by the key."""
    def check(key: str, raw: Any) -> Any:
        try:
            return parse(raw)
        except ValueProblem as problem:
            raise ConfigError(f"{key}: {problem}") from None

    return check


def _integer(low: int | None = None, high: int | None = None) -> Check:
    return _parsed(lambda raw: parse_int(raw, low, high))


def _number(low: float) -> Check:
    return _parsed(lambda raw: parse_number(raw, low))


def _boolean() -> Check:
    return _parsed(parse_bool)


def _text(setting: Any) -> Check:
    """A free-text topic setting: ``None`` (an empty YAML value) is the empty text."""
    parse = _parsed(setting.parse)
    return lambda key, raw: "" if raw is None else parse(key, raw)


def _string(*, empty_ok: bool) -> Check:
    rule = "must be a string" if empty_ok else "must be a non-empty string"

    def check(key: str, raw: Any) -> str:
        if raw is None and empty_ok:
            return ""
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            raw = str(raw)
        if not isinstance(raw, str) or (not empty_ok and not raw.strip()):
            raise _fail(key, rule, raw)
        return raw.strip()

    return check


def _choice(*options: str) -> Check:
    rule = "must be one of " + ", ".join(options)

    def check(key: str, raw: Any) -> str:
        value = raw.strip().lower() if isinstance(raw, str) else raw
        if value not in options:
            raise _fail(key, rule, raw)
        return value

    return check


def _name(max_length: int) -> Check:
    rule = (
        f"must be 1 to {max_length} characters without '{{', '}}', ':', whitespace or "
        "control characters"
    )

    def check(key: str, raw: Any) -> str:
        if isinstance(raw, int) and not isinstance(raw, bool):
            raw = str(raw)
        if (
            not isinstance(raw, str)
            or not 0 < len(raw) <= max_length
            or _FORBIDDEN_NAME_CHARS.search(raw)
        ):
            raise _fail(key, rule, raw)
        return raw

    return check


def redact_url(url: str) -> str:
    """Return ``url`` with any password replaced by ``***`` (for logs and errors)."""
    try:
        scheme, _, rest = url.partition("://")
        if scheme.lower() in (*SENTINEL_SCHEMES, *CLUSTER_SCHEMES):
            # camellia's form puts the password alone before '@' ("secret@host:port,...").
            return f"{scheme}://***@{rest.rpartition('@')[2]}" if "@" in rest else url
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.rsplit("@", 1)[1]
        user = parts.username or ""
        return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))
    except ValueError:
        return "<unparseable url>"


def _check_redis_url(key: str, raw: Any) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise _fail(key, "must be a string", raw)
    url = raw.strip()
    if not url:
        return ""  # embedded Redis
    shown = redact_url(url)
    scheme = scheme_of(url)
    if scheme in (*SENTINEL_SCHEMES, *CLUSTER_SCHEMES):
        try:
            parse_target(url)
        except RedisUrlError as exc:
            raise ConfigError(f"{key}: {exc}, got {shown!r}") from None
        return url
    if scheme not in REDIS_URL_SCHEMES:
        raise ConfigError(
            f"{key}: must start with {', '.join(s + '://' for s in REDIS_URL_SCHEMES)} "
            f"(or be empty for the embedded Redis), got {shown!r}"
        )
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ConfigError(f"{key}: is not a valid URL, got {shown!r}") from None
    if scheme == "unix" and not parts.path:
        raise ConfigError(f"{key}: unix:// needs a socket path (unix:///path/redis.sock), "
                          f"got {shown!r}")
    return url


def _tokens(key: str, raw: Any) -> Tokens:
    try:
        return parse_tokens(raw)
    except TokenError as exc:
        raise ConfigError(f"{key}: {exc}") from None


def _networks(key: str, raw: Any) -> str:
    """push-allowed-networks: checked here, parsed where used (push_networks.py)."""
    text = "" if raw is None else ",".join(raw) if isinstance(raw, (list, tuple)) else raw
    if not isinstance(text, str):
        raise _fail(key, "must be comma-separated CIDRs and 'public'", raw)
    try:
        return AllowedNetworks.parse(text).text
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None


def _setting(default: Any, doc: str, check: Check) -> Any:
    return field(default=default, metadata={"doc": doc, "check": check})


def _topic(name: str, default: Any, doc: str) -> Any:
    """The server's default of the topic setting ``name`` (topic_setting.py), checked by its
    kind and lowest value. Not by its highest, which only setTopicConfig applies: the
    configuration never capped these keys, and its messages ("must be an integer > 0") stay."""
    setting = BY_NAME[name]
    check = (_boolean() if setting.kind is bool else _number(setting.low)
             if setting.kind is float else _text(setting) if setting.kind is str
             else _integer(setting.low))
    return field(default=default, metadata={"doc": doc, "check": check, "topic": setting})


@dataclass(frozen=True)
class Settings:
    """Every setting of a delayqueue node; validated on construction."""

    # camellia's keys, same names and defaults.
    namespace: str = _setting("default", "namespace of every key and topic", _name(64))
    ttl_millis: int = _topic("ttlMillis", 3_600_000, "default message ttl after its trigger time")
    max_retry: int = _topic("maxRetry", 10,
                            "default max redeliveries (deliveries = max-retry + 1)")
    ack_timeout_millis: int = _topic("ackTimeoutMillis", 30_000,
                                     "default ack timeout of one delivery")
    msg_schedule_millis: int = _setting(100, "longest scheduler sleep (safety scan)",
                                        _integer(1))
    topic_schedule_seconds: int = _setting(600, "how often inactive topics are recycled",
                                           _integer(1))
    end_life_msg_expire_millis: int = _setting(300_000, "retention of ended messages",
                                               _integer(1))
    topic_active_tag_timeout_millis: int = _setting(
        1_800_000, "idle time after which an empty topic is recycled", _integer(1))
    monitor_interval_seconds: int = _setting(60, "monitoring interval and snapshot period",
                                             _integer(1, 3600))
    monitor_history_minutes: int = _setting(
        60, "how long Redis keeps the monitoring intervals the console charts read",
        _integer(60, 1440))
    long_polling_timeout_millis: int = _setting(10_000, "default long-poll hold time",
                                                _integer(1))
    # Redelivery and dead letters: the server's defaults; setTopicConfig overrides per topic.
    redelivery_delay_millis: int = _topic(
        "redeliveryDelayMillis", 0,
        "delay before a nacked or timed-out message is redelivered (0: at once)")
    redelivery_backoff_multiplier: float = _topic(
        "redeliveryBackoffMultiplier", 1.0, "the redelivery delay grows by this factor per "
        "delivery")
    redelivery_max_delay_millis: int = _topic("redeliveryMaxDelayMillis", 3_600_000,
                                              "longest redelivery delay")
    dead_letter: bool = _topic("deadLetter", True,
                               "keep messages that run out of deliveries (status 6)")
    dead_letter_retention_millis: int = _topic("deadLetterRetentionMillis", 7 * 86_400_000,
                                               "how long a dead letter is kept")
    dead_letter_max_size: int = _topic("deadLetterMaxSize", 100_000,
                                       "most dead letters kept per topic (oldest dropped first)")
    delay_millis: int = _topic("delayMillis", 0, "delay of a send that gives neither "
                               "delayMillis nor triggerTime")
    max_backlog: int = _topic("maxBacklog", 0, "most live messages per topic; a send over it "
                              "is refused with code 429 (0: no limit)")
    dedup_window_millis: int = _topic(
        "dedupWindowMillis", 0, "how long after a message ended a re-send of its msgId answers "
        "it as a duplicate and enqueues nothing (0: no window)")
    default_subscription: bool = _topic(
        "defaultSubscription", True, "whether a topic's default subscription receives its "
        "messages (false: only its named subscriptions do)")
    max_subscriptions_per_topic: int = _setting(
        32, "most named subscriptions one topic may have", _integer(1))
    # Push delivery (docs/push.md).
    push_timeout_millis: int = _setting(
        10_000, "connect and read timeout of one push POST, for a subscription that sets none",
        _integer(100, 600_000))
    push_concurrency: int = _setting(
        16, "pushes in flight per push subscription across the fleet, for a subscription "
        "that sets none", _integer(1, 10_000))
    push_allowed_networks: str = _setting(
        "public", "where push URLs may connect: comma-separated CIDRs, and 'public' for every "
        "globally routable address (loopback, private, link-local and metadata addresses are "
        "refused unless listed)", _networks)
    push_enabled: bool = _setting(True, "whether this node's workers deliver pushes",
                                  _boolean())
    push_workers: int = _setting(64, "most pushes one worker process has in flight",
                                 _integer(1, 10_000))
    topic_description: str = _topic("description", "", "description of a topic that has none "
                                    "of its own")
    # Redis.
    redis_url: str = _setting(
        "", "redis://, rediss://, unix://, redis-sentinel:// or redis-cluster:// URL; "
        "empty = embedded", _check_redis_url)
    redis_key_prefix: str = _setting("dq", "prefix of every Redis key", _name(64))
    redis_socket_timeout_millis: int = _setting(2000, "Redis socket read/write timeout",
                                                _integer(1))
    redis_connect_timeout_millis: int = _setting(1000, "Redis connect timeout", _integer(1))
    redis_max_connections: int = _setting(64, "connection pool size per worker (per Cluster "
                                          "node)", _integer(1))
    redis_wait_replicas: int = _setting(
        0, "send, ack and nack answer after WAIT confirms this many replicas have the write "
        "(0: no WAIT)", _integer(0))
    redis_wait_timeout_millis: int = _setting(
        1000, "longest WAIT for redis-wait-replicas; when it passes, code 500", _integer(1))
    # Scheduling internals.
    lease_ttl_millis: int = _setting(5000, "scheduler lease TTL (failover time)", _integer(1))
    schedule_min_gap_millis: int = _setting(
        10, "shortest time between two scheduler ticks (due topics are batched)", _integer(0))
    schedule_defer_millis: int = _setting(
        100, "later visits to topics whose consumers promote them (0: never defer)",
        _integer(0))
    long_polling_safety_millis: int = _setting(1000, "a held long poll re-checks this often",
                                               _integer(1))
    clock_sync_seconds: int = _setting(10, "how often the Redis clock offset is re-measured",
                                       _integer(1))
    due_repair_seconds: int = _setting(5, "how often the registry sweep repairs the due index",
                                       _integer(1))
    bookkeeping_shards: int = _setting(
        0, "on a Redis Cluster, how many shards (each its own slot) the topic registry and the "
        "due index are split into by topic; 0: 16 on a Cluster, 1 on one Redis",
        _integer(0, 256))
    # Request limits.
    max_long_polling_timeout_millis: int = _setting(60_000, "max longPollingTimeoutMillis",
                                                    _integer(1))
    max_batch: int = _setting(1000, "max batch of one pull", _integer(1))
    max_topic_length: int = _setting(256, "max topic length (characters)", _integer(1))
    max_msg_id_length: int = _setting(256, "max msgId length (characters)",
                                      _integer(GENERATED_MSG_ID_LENGTH))
    max_msg_bytes: int = _setting(1_048_576, "max message body size (bytes)", _integer(1))
    # Authentication and per-token limits (docs/operations.md, "Security").
    auth_tokens: Tokens = _setting(Tokens(), "API tokens; empty: authentication off", _tokens)
    token_rate_limit: int = _setting(
        0, "requests per second per token and worker process (0: no limit)", _integer(0))
    token_max_long_polls: int = _setting(
        0, "concurrent long polls per token and worker process (0: no limit)", _integer(0))
    # Monitoring.
    snapshot_dir: str = _setting("./data/snapshots", "snapshot directory; empty disables",
                                 _string(empty_ok=True))
    metrics_max_topics: int = _setting(
        1000, "most topics with their own /metrics series; the others are summed under "
        "topic=\"_other\" (0: no limit)", _integer(0))
    # HTTP server (gunicorn).
    host: str = _setting("0.0.0.0", "listen address", _string(empty_ok=False))
    port: int = _setting(8080, "listen port", _integer(1, 65535))
    workers: int = _setting(2, "gunicorn worker processes", _integer(1))
    worker_class: str = _setting("gevent", "gevent, gthread or sync", _choice(*WORKER_CLASSES))
    worker_connections: int = _setting(2000, "max concurrent connections per gevent worker",
                                       _integer(1))
    threads: int = _setting(64, "threads per gthread worker", _integer(1))
    graceful_timeout_seconds: int = _setting(10, "time workers get to finish on shutdown",
                                             _integer(0))
    # Embedded Redis and logging.
    data_dir: str = _setting("./data", "embedded Redis's directory (AOF)",
                             _string(empty_ok=False))
    log_level: str = _setting("info", "debug, info, warning or error", _choice(*LOG_LEVELS))

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = f.metadata["check"](key_of(f.name), getattr(self, f.name))
            object.__setattr__(self, f.name, value)
        if self.long_polling_timeout_millis > self.max_long_polling_timeout_millis:
            raise ConfigError(
                f"long-polling-timeout-millis: must be <= max-long-polling-timeout-millis "
                f"({self.max_long_polling_timeout_millis}), got {self.long_polling_timeout_millis}"
            )
        if self.bookkeeping_shards > 1 and scheme_of(self.redis_url) not in CLUSTER_SCHEMES:
            raise ConfigError(
                f"bookkeeping-shards: {self.bookkeeping_shards} needs a Redis Cluster "
                "(redis-cluster://); on one Redis it must be 0 or 1")

    def __repr__(self) -> str:  # never print a Redis password
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values["redis_url"] = self.redis_url_redacted
        return f"Settings({', '.join(f'{k}={v!r}' for k, v in values.items())})"

    @property
    def embedded_redis(self) -> bool:
        """True when no Redis URL is set and ``serve`` must start an embedded one."""
        return not self.redis_url

    @property
    def redis_url_redacted(self) -> str:
        return redact_url(self.redis_url)

    def as_table(self) -> list[dict[str, Any]]:
        """One row per setting: key, value, env var, default, doc (the configuration table of
        docs/operations.md is checked against it by tests/test_docs.py)."""
        return [
            {
                "key": key_of(f.name),
                "value": getattr(self, f.name),
                "env": env_var_of(f.name),
                "default": f.default,
                "doc": f.metadata["doc"],
            }
            for f in dataclasses.fields(self)
        ]


FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Settings))


def key_of(name: str) -> str:
    """YAML key of a field: ``ttl_millis`` -> ``ttl-millis``."""
    return name.replace("_", "-")


def env_var_of(name: str) -> str:
    """Environment variable of a field or key: ``ttl-millis`` -> ``DELAYQUEUE_TTL_MILLIS``."""
    return ENV_PREFIX + name.replace("-", "_").upper()


KEYS: tuple[str, ...] = tuple(key_of(n) for n in FIELD_NAMES)
_KEY_TO_FIELD = {key_of(n): n for n in FIELD_NAMES}


def _canonical(key: Any) -> str:
    """``monitorIntervalSeconds``, ``ttl_millis``, ``TTL_MILLIS`` -> kebab-case."""
    text = str(key).strip()
    text = re.sub(r"(?<=[a-z0-9])([A-Z])", r"-\1", text)
    return text.lower().replace("_", "-")


def _unknown(key: str, where: str) -> ConfigError:
    close = difflib.get_close_matches(_canonical(key), KEYS, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"{key}: unknown setting ({where}){hint}")


def env_for(overrides: Mapping[str, Any]) -> dict[str, str]:
    """The ``DELAYQUEUE_*`` variables that carry ``overrides`` to another process."""
    result = {}
    for raw_key, value in overrides.items():
        if value is None:
            continue
        key = _canonical(raw_key)
        if key not in _KEY_TO_FIELD:
            raise _unknown(str(raw_key), "overrides")
        result[env_var_of(key)] = str(value)
    return result


# --- loading ----------------------------------------------------------------------------------


def find_config_file(path: str | os.PathLike | None = None,
                     env: Mapping[str, str] | None = None) -> Path | None:
    """The YAML file to read: explicit path, $DELAYQUEUE_CONFIG, ./config, packaged default.

    Raises:
        ConfigError: an explicitly named file does not exist.
    """
    env = os.environ if env is None else env
    for explicit, origin in ((path, "--config"), (env.get(CONFIG_ENV_VAR) or None,
                                                  CONFIG_ENV_VAR)):
        if explicit is not None:
            candidate = Path(explicit).expanduser()
            if not candidate.is_file():
                raise ConfigError(f"config file {str(candidate)!r} (from {origin}) not found")
            return candidate
    package = Path(__file__).resolve().parents[1]
    for candidate in (
        Path.cwd() / "config" / "delayqueue.yaml",
        package / "default_config.yaml",  # installed wheel (pyproject force-include)
        package.parent / "config" / "delayqueue.yaml",  # source checkout
    ):
        if candidate.is_file():
            return candidate
    return None


def _read_yaml(path: Path) -> dict[str, tuple[Any, str]]:
    """Flatten the YAML at ``path`` into {canonical key: (value, source)}."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc}") from exc
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(f"config file {str(path)!r}: must be a mapping of settings")
    source = f"in {path}"
    found: dict[str, tuple[Any, str]] = {}

    def add(raw_key: str, value: Any, where: str) -> None:
        key = _canonical(raw_key)
        if key in CAMELLIA_IGNORED_KEYS:
            logger.warning("config %s: %s is a camellia thread-pool setting; ignored "
                           "(no meaning here)", path, raw_key)
            return
        if key not in _KEY_TO_FIELD:
            if isinstance(value, dict):  # "redis: {url: ...}" means redis-url
                for sub_key, sub_value in value.items():
                    add(f"{key}-{_canonical(sub_key)}", sub_value, where)
                return
            raise _unknown(raw_key, where)
        if key in found:
            raise ConfigError(f"{key}: given twice ({where})")
        found[key] = (value, where)

    for raw_key, value in document.items():
        key = _canonical(raw_key)
        if key == CAMELLIA_BLOCK:
            if not isinstance(value, dict):
                raise ConfigError(f"{CAMELLIA_BLOCK}: must be a mapping ({source})")
            for sub_key, sub_value in value.items():
                add(str(sub_key), sub_value, f"{source}, under {CAMELLIA_BLOCK}")
        elif key == camellia_redis.SECTION:
            try:
                url = camellia_redis.section_to_url(value)
            except camellia_redis.CamelliaRedisError as exc:
                raise ConfigError(f"{exc} ({source})") from None
            logger.warning("config %s: camellia-redis resource read as redis-url %s", path,
                           redact_url(url))
            add("redis-url", url, f"{source}, from {camellia_redis.SECTION}")
        elif key in SPRING_IGNORED_SECTIONS and isinstance(value, dict):
            logger.warning("config %s: section %r belongs to Spring/camellia; ignored "
                           "(use redis-url, host and port)", path, raw_key)
        else:
            add(str(raw_key), value, source)
    return found


def load_settings(
    path: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    overrides_source: str = "overrides",
) -> Settings:
    """Load, merge and validate settings (defaults < YAML < environment < overrides).

    Args:
        path: YAML file; default: $DELAYQUEUE_CONFIG, ./config/delayqueue.yaml, the packaged one.
        env: environment to read (default ``os.environ``).
        overrides: values by field name or YAML key; ``None`` values are skipped.
        overrides_source: how errors name where overrides came from ("command line").

    Raises:
        ConfigError: a file is missing or malformed, a key is unknown, a value is invalid.
    """
    env = os.environ if env is None else env
    raw: dict[str, tuple[Any, str]] = {}
    config_file = find_config_file(path, env)
    if config_file is not None:
        raw.update(_read_yaml(config_file))
    for name, value in env.items():
        if (not name.startswith(ENV_PREFIX) or name in NON_SETTING_ENV_VARS
                or name.startswith(NON_SETTING_ENV_PREFIXES)):
            continue
        key = _canonical(name[len(ENV_PREFIX):])
        if key in _KEY_TO_FIELD:
            raw[key] = (value, f"from {name}")
        else:
            logger.warning("environment variable %s is not a delayqueue setting; ignored", name)
    for raw_key, value in (overrides or {}).items():
        if value is None:
            continue
        key = _canonical(raw_key)
        if key not in _KEY_TO_FIELD:
            raise _unknown(str(raw_key), overrides_source)
        raw[key] = (value, f"from {overrides_source}")

    values = {}
    for key, (value, where) in raw.items():
        name = _KEY_TO_FIELD[key]
        check = Settings.__dataclass_fields__[name].metadata["check"]
        try:
            values[name] = check(key, value)
        except ConfigError as exc:
            raise ConfigError(f"{exc} ({where})") from None
    return Settings(**values)
