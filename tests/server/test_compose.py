"""docker-compose.yml, checked without Docker (no engine where this project is developed):
Redis bounded by a maxmemory from a variable under noeviction, its image pinned to a minor
release, every service another waits for healthy first, and each sentinel's rewritten
config kept on a volume of its own across restarts."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
MAXMEMORY = "${REDIS_MAXMEMORY:-512mb}"
PINNED_REDIS = re.compile(r"^redis:7\.\d+(\.\d+)?(-[a-z0-9.]+)?$")


@pytest.fixture(scope="module")
def services() -> dict[str, dict]:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def redis_servers(services) -> dict[str, list[str]]:
    """The data servers (not sentinels): service -> its redis-server command."""
    return {name: service["command"] for name, service in services.items()
            if service.get("command", [None])[0] == "redis-server"}


def option(command: list[str], name: str) -> str | None:
    return command[command.index(name) + 1] if name in command else None


def sentinel_command(service: dict) -> str | None:
    entrypoint = service.get("entrypoint") or []
    script = entrypoint[-1] if entrypoint[:2] == ["sh", "-c"] else " ".join(entrypoint)
    return script if "--sentinel" in script else None


def test_every_redis_is_bounded_by_a_maxmemory_from_a_variable_under_noeviction(services):
    servers = redis_servers(services)
    assert {"redis", "redis-replica-1", "redis-replica-2"} <= set(servers)
    for name, command in servers.items():
        assert option(command, "--maxmemory") == MAXMEMORY, name
        assert option(command, "--maxmemory-policy") == "noeviction", name


def test_every_redis_image_is_pinned_to_a_minor_release(services):
    images = {name: service["image"] for name, service in services.items()
              if service.get("image", "").startswith("redis")}
    assert len(images) == 6, images       # the master, two replicas, three sentinels
    for name, image in images.items():
        assert PINNED_REDIS.match(image), f"{name}: {image} is not pinned to a 7.x release"


def test_every_dependency_is_waited_for_healthy_and_has_a_healthcheck(services):
    depended = set()
    for name, service in services.items():
        depends_on = service.get("depends_on", {})
        assert isinstance(depends_on, dict), f"{name}: depends_on without conditions"
        for dependency, how in depends_on.items():
            assert how == {"condition": "service_healthy"}, f"{name} -> {dependency}: {how}"
            depended.add(dependency)
    assert depended == {"redis", "redis-replica-1", "redis-replica-2", "sentinel-1",
                        "sentinel-2", "sentinel-3"}
    for name in depended:
        check = services[name].get("healthcheck", {})
        assert check.get("test") and not check.get("disable"), f"{name} has no healthcheck"
        assert check["test"][0] in ("CMD", "CMD-SHELL"), name


def test_each_sentinel_keeps_its_rewritten_config_on_a_volume_of_its_own(services):
    declared = yaml.safe_load(COMPOSE.read_text())["volumes"]
    sentinels = {name: service for name, service in services.items()
                 if sentinel_command(service)}
    assert set(sentinels) == {"sentinel-1", "sentinel-2", "sentinel-3"}
    volumes_used = set()
    for name, service in sentinels.items():
        script = sentinel_command(service)
        config = re.search(r"exec redis-server (\S+) --sentinel", script).group(1)
        # written only when absent: a restart keeps what the sentinel learned
        assert f"[ -f {config} ] ||" in script, f"{name} writes its config at every start"
        mounts = [volume.split(":") for volume in service["volumes"]]
        holding = [source for source, target, *_ in mounts
                   if target == str(Path(config).parent)]
        assert holding and holding[0] in declared, f"{name}: {config} is on no named volume"
        volumes_used.add(holding[0])
        assert shlex.split(script)  # one well-formed shell command
    assert len(volumes_used) == 3, "the sentinels share a config volume"


def test_operations_doc_names_the_compose_variable():
    assert "REDIS_MAXMEMORY" in (REPO / "docs" / "operations.md").read_text()
