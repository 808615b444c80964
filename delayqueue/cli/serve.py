"""``delayqueue serve``: run the HTTP server under gunicorn, with an embedded Redis if needed.

serve is a small supervisor: it validates the settings, stops at once when the port is in use,
starts the embedded Redis when no Redis URL is set, then runs gunicorn as a child with exactly
the Dockerfile's command. The settings reach gunicorn and its workers as ``DELAYQUEUE_*``
environment variables, so every process reads the same values through ``load_settings()``.
Signals are forwarded to gunicorn; the embedded Redis is stopped only after gunicorn has
exited, so workers can release their leases on the way out.

The server's modules (the settings, the embedded Redis, and through them redis-py, PyYAML and
gunicorn) come with the ``server`` extra and are imported only when ``serve`` runs: the
command line's client commands work from ``pip install delayqueue`` alone, and ``serve``
without the extra says in one line what to install.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from . import failure

if TYPE_CHECKING:
    from delayqueue.settings.config import Settings

logger = logging.getLogger("delayqueue.serve")

# The Dockerfile's CMD runs the same thing; keep the two identical.
GUNICORN_ARGS = ("-m", "gunicorn", "-c", "python:delayqueue.gunicorn_conf", "delayqueue.wsgi:app")
# gunicorn's master understands all of these (TERM graceful, INT/QUIT quick, HUP reload, ...).
FORWARDED_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGTTIN", "SIGTTOU", "SIGUSR1",
                 "SIGUSR2")
    if hasattr(signal, name)
)
# Command-line options that are settings: argparse dest -> Settings field.
CLI_SETTINGS = ("redis_url", "port", "host", "workers", "worker_class", "data_dir")


def register(subparsers: Any) -> None:
    try:
        from delayqueue.settings.config import CONFIG_ENV_VAR, WORKER_CLASSES
    except ModuleNotFoundError:  # the client alone: run() names the extra to install
        config_default, worker_classes = "", None
    else:
        config_default, worker_classes = f"${CONFIG_ENV_VAR}, ", WORKER_CLASSES
    parser = subparsers.add_parser(
        "serve",
        help="run the HTTP server (gunicorn; embedded Redis unless a Redis URL is set)",
        description=(
            "Run the delay-queue HTTP server under gunicorn. Settings come from the YAML "
            "config, DELAYQUEUE_* environment variables and these options (highest wins). "
            "Without a Redis URL an embedded redis-server is started under --data-dir."
        ),
    )
    parser.add_argument("--config", metavar="PATH",
                        help=f"YAML settings file (default: {config_default}"
                             "./config/delayqueue.yaml, the packaged default)")
    parser.add_argument("--redis-url", metavar="URL",
                        help="redis://, rediss://, unix://, redis-sentinel:// or "
                             "redis-cluster:// URL (default: embedded Redis)")
    parser.add_argument("--port", type=int, metavar="N", help="listen port (default 8080)")
    parser.add_argument("--host", metavar="H", help="listen address (default 0.0.0.0)")
    parser.add_argument("--workers", type=int, metavar="N", help="worker processes (default 2)")
    parser.add_argument("--worker-class", choices=worker_classes,
                        help="gunicorn worker class (default gevent)")
    parser.add_argument("--data-dir", metavar="DIR",
                        help="embedded Redis's directory (default ./data)")
    parser.set_defaults(func=run)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {name: getattr(args, name) for name in CLI_SETTINGS
            if getattr(args, name, None) is not None}


def child_env(config_path: str | None, overrides: Mapping[str, Any],
              base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment that makes gunicorn and its workers load the same settings as serve."""
    from delayqueue.settings.config import CONFIG_ENV_VAR, env_for

    env = dict(os.environ if base is None else base)
    if config_path is not None:
        env[CONFIG_ENV_VAR] = str(Path(config_path).expanduser().resolve())
    env.update(env_for(overrides))
    return env


def run_gunicorn(env: Mapping[str, str]) -> int:
    """Run gunicorn as a child, forwarding signals to it; return its exit code."""
    from delayqueue.server.embedded import child_setup

    proc: subprocess.Popen | None = None
    pending: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if proc is None:
            pending.append(signum)  # arrived while starting: delivered right after
        elif proc.poll() is None:
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED_SIGNALS}
    try:
        proc = subprocess.Popen([sys.executable, *GUNICORN_ARGS], env=dict(env),
                                preexec_fn=child_setup())
        for signum in pending:
            proc.send_signal(signum)
        returncode = proc.wait()  # signal handlers run while waiting (PEP 475 resumes it)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if proc is not None and proc.poll() is None:  # we are leaving abnormally
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    if returncode < 0:  # killed by a signal: report it the way a shell would
        return 128 - returncode
    return returncode


def _log_settings(settings: Settings) -> None:
    logger.info(
        "delayqueue on %s:%d, %d %s worker(s), namespace %r, redis %s",
        settings.host, settings.port, settings.workers, settings.worker_class,
        settings.namespace, settings.redis_url_redacted or "embedded",
    )


def run(args: argparse.Namespace) -> int:
    try:
        from delayqueue.server import logs
        from delayqueue.server.embedded import EmbeddedRedis, EmbeddedRedisError
        from delayqueue.server.startup import port_in_use, port_in_use_message
        from delayqueue.settings.config import ConfigError, env_var_of, load_settings
    except ModuleNotFoundError as missing:
        return failure.missing_extra("the server", "server", missing)
    overrides = _overrides(args)
    try:
        settings = load_settings(args.config, overrides=overrides,
                                 overrides_source="command line")
    except ConfigError as exc:
        print(f"delayqueue: config error: {exc}", file=sys.stderr)
        return 2
    if port_in_use(settings.host, settings.port):
        # Before the embedded Redis starts and before gunicorn, which would retry its bind.
        print(port_in_use_message(settings.port), file=sys.stderr)
        return 1
    logs.configure(settings.log_level)
    env = child_env(args.config, overrides)
    embedded = None
    try:
        if settings.embedded_redis:
            embedded = EmbeddedRedis(settings.data_dir).start()
            logger.warning(
                "embedded Redis at %s (single-machine setup; set %s / --redis-url for "
                "production)", embedded.socket_path, env_var_of("redis_url"),
            )
            env[env_var_of("redis_url")] = embedded.url
        _log_settings(settings)
        returncode = run_gunicorn(env)
        logger.info("gunicorn exited with code %d", returncode)
        return returncode
    except EmbeddedRedisError as exc:
        print(f"delayqueue: embedded Redis: {exc}", file=sys.stderr)
        return 1
    finally:
        if embedded is not None:
            embedded.stop()
