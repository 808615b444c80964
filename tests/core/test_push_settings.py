"""A subscription's push settings (core/subscriptions.py, core/push_target.py): checked
before anything is written, the URL by where it resolves; the default subscription's too;
the push registry follows; the secret is never answered."""

from __future__ import annotations

import pytest
from test_bounded_work import make_runtime

from delayqueue.core.clock import ManualClock
from delayqueue.core.errors import BadRequest, MissingParameter, NotFound
from delayqueue.core.push_target import check_push_url
from delayqueue.core.subscriptions import Subscriptions
from delayqueue.settings.push_networks import AllowedNetworks

from support.lua import T0

PUBLIC = AllowedNetworks.parse("public")
NAMES = {"hooks.example.com": ["93.184.216.34"], "internal.example.com": ["10.0.0.7"],
         "mixed.example.com": ["93.184.216.34", "127.0.0.1"]}


def resolver(host, port):
    if host in NAMES:
        return NAMES[host]
    if host.replace(".", "").isdigit() or ":" in host:
        return [host]
    raise OSError(f"unknown host {host}")


@pytest.fixture
def subs(redis_url):
    rt = make_runtime(redis_url, ManualClock(T0))
    return Subscriptions(rt.queue, resolver=resolver)


@pytest.mark.parametrize("url, rule", [
    ("ftp://hooks.example.com/", "must be an http:// or https:// URL"),
    ("hooks.example.com/x", "must be an http:// or https:// URL"),
    ("http:///x", "has no host"),
    ("https://user:pw@hooks.example.com/", "must not carry a user or password"),
    ("http://hooks.example.com:99999/", "is not a valid URL"),
    ("http://nowhere.example.com/", "does not resolve"),
    ("http://127.0.0.1:8080/", "resolves to 127.0.0.1, outside push-allowed-networks"),
    ("http://[::1]/", "resolves to ::1, outside"),
    ("http://169.254.169.254/latest/meta-data", "resolves to 169.254.169.254, outside"),
    ("http://internal.example.com/", "resolves to 10.0.0.7, outside"),
    ("http://mixed.example.com/", "resolves to 127.0.0.1, outside"),   # every address counts
])
def test_a_url_is_refused_naming_pushurl_and_the_rule(url, rule):
    with pytest.raises(BadRequest, match="^pushUrl: ") as caught:
        check_push_url(url, PUBLIC, resolver)
    assert rule in str(caught.value)


def test_allowed_urls_pass_as_given():
    assert check_push_url("https://hooks.example.com/a?b=1", PUBLIC, resolver) == \
        "https://hooks.example.com/a?b=1"
    assert check_push_url("http://127.0.0.1:9/", AllowedNetworks.parse("127.0.0.0/8"),
                          resolver) == "http://127.0.0.1:9/"


def test_the_default_subscription_takes_push_settings_only(subs):
    data, source = subs.set_config("t", None, {"pushUrl": "https://hooks.example.com/h",
                                               "pushSecret": "s3cret", "pushConcurrency": 4})
    assert data["pushUrl"] == "https://hooks.example.com/h" and data["pushConcurrency"] == 4
    assert data["pushSecretSet"] is True and "pushSecret" not in data
    assert source["pushUrl"] == source["pushConcurrency"] == "subscription"
    assert (data["pushTimeoutMillis"], source["pushTimeoutMillis"]) == (10_000, "server")
    with pytest.raises(BadRequest, match="^ackTimeoutMillis: the default subscription's "
                                         "settings are the topic's"):
        subs.set_config("t", "default", {"ackTimeoutMillis": 5})
    assert subs.queue.client.smembers(subs.queue.keys.push_subscriptions) == {"t\ndefault"}


def test_bad_values_write_nothing(subs):
    client, tk = subs.queue.client, subs.queue.topic_keys("t")
    for raw, error, text in [
            ({"pushConcurrency": 0}, BadRequest, "^pushConcurrency: "),
            ({"pushTimeoutMillis": 99}, BadRequest, "^pushTimeoutMillis: "),
            ({"pushTimeoutMillis": "soon"}, MissingParameter, "^pushTimeoutMillis: "),
            ({"pushSecret": "x" * 257}, BadRequest, "^pushSecret: "),
            ({"pushUrl": "http://10.0.0.1/", "pushConcurrency": 2}, BadRequest, "^pushUrl: ")]:
        with pytest.raises(error, match=text):
            subs.set_config("t", None, raw)
    assert client.exists(tk.config, subs.queue.keys.push_subscriptions) == 0


def test_an_empty_url_clears_push_and_the_registry_and_reset_drops_only_push(subs):
    client, keys = subs.queue.client, subs.queue.keys
    subs.queue.client.hset(subs.queue.topic_keys("t").config, "maxRetry", "2")
    subs.set_config("t", None, {"pushUrl": "https://hooks.example.com/h", "pushSecret": "k"})
    subs.set_config("t", None, {"pushUrl": ""})
    data, _ = subs.get_config("t", None)
    assert data["pushUrl"] is None and data["pushSecretSet"] is True
    assert client.smembers(keys.push_subscriptions) == set()
    subs.set_config("t", None, {"pushUrl": "https://hooks.example.com/h"}, reset=False)
    subs.set_config("t", None, {}, reset=True)
    assert client.hgetall(subs.queue.topic_keys("t").config) == {"maxRetry": "2"}
    assert client.smembers(keys.push_subscriptions) == set()


def test_a_named_subscription_pushes_and_deleting_it_leaves_the_registry(subs):
    client, keys = subs.queue.client, subs.queue.keys
    info = subs.create("t", "billing", {"pushUrl": "https://hooks.example.com/b",
                                        "ackTimeoutMillis": 5000})
    assert info["pushUrl"] == "https://hooks.example.com/b"
    assert client.smembers(keys.push_subscriptions) == {"t\nbilling"}
    assert [i.get("pushUrl") for i in subs.list("t")] == [None, "https://hooks.example.com/b"]
    status = subs.push_status("t", "billing")
    assert (status["pushUrl"], status["inFlight"], status["lastErrors"]) == \
        ("https://hooks.example.com/b", 0, [])
    with pytest.raises(NotFound):
        subs.set_config("t", "nobody", {"pushUrl": "https://hooks.example.com/b"})
    subs.delete("t", "billing")
    assert client.smembers(keys.push_subscriptions) == set()
    with pytest.raises(NotFound):
        subs.push_status("t", "billing")
