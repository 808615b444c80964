"""deploy/grafana and deploy/prometheus against what /metrics really exports, and promtool.

A real app on a real redis-server does some traffic (sends, a delivery, a nack into the
dead-letter queue, a loop tick, a send refused for the backlog, a purge, a pause); its /metrics
scrape is the truth. Every metric name, every
label matcher and every grouping label in the alert rules and the dashboard must exist in it.
``promtool check rules`` must accept the rules and ``promtool test rules`` pass their unit
tests (deploy/prometheus/tests/): promtool comes from Debian's prometheus package, which
``make system-deps`` installs; without it these tests fail rather than skip.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from delayqueue.core.subscriptions import Subscriptions
from delayqueue.http.app import create_app
from delayqueue.monitoring.metrics import QUEUE_STATES

from support import wait_until

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "delayqueue-alerts.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "tests" / "delayqueue-alerts-test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "delayqueue-dashboard.json"
Q = "/camellia/delayQueue/"
SELECTOR = re.compile(r"\b(delayqueue_[a-z0-9_]+)\s*(\{[^}]*\})?")
MATCHER = re.compile(r'(\w+)\s*(=~|!=|!~|=)\s*"([^"]*)"')
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
# Prometheus' own up of the scrape job: the one series not ours an alert may read.
JOB_UP = re.compile(r'\bup\{job="delayqueue"\}')


@pytest.fixture(scope="module")
def exported(redis_server):
    """sample name -> {label: set of values}, from a real scrape after real traffic."""
    with redis_server.leased_db_url() as url:
        app = create_app(overrides={"redis_url": url, "snapshot_dir": ""})
        http = app.test_client()
        http.post(Q + "setTopicConfig", data={"topic": "t", "maxRetry": 0})
        rt = app.extensions["delayqueue"]
        # A named subscription of "t", fed by every send after it, pulled once and paused.
        Subscriptions(rt.queue).create("t", "mail", {})
        http.post(Q + "sendMsg", data={"topic": "t", "msg": "a", "msgId": "a"})
        http.post(Q + "sendMsg", data={"topic": "t", "msg": "b", "delayMillis": 60_000})
        http.post(Q + "pullMsg", data={"topic": "t"})
        assert http.post(Q + "ackMsg", data={"topic": "t", "msgId": "a", "ack": "false"}
                         ).get_json()["code"] == 200
        http.post(Q + "sendMsg", data={"topic": "t", "msg": "c", "msgId": "c",
                                       "delayMillis": 30})

        def promoted() -> bool:
            rt.scheduler.tick()
            return http.post(Q + "getMsg", data={"topic": "t", "msgId": "c"}
                             ).get_json()["delayMsg"]["status"] == 2
        wait_until(promoted, 5)
        # The topic controls: a send refused for the backlog, a purge, a paused topic.
        http.post(Q + "setTopicConfig", data={"topic": "q", "maxBacklog": 1})
        http.post(Q + "sendMsg", data={"topic": "q", "msg": "a"})
        assert http.post(Q + "sendMsg", data={"topic": "q", "msg": "b"}
                         ).get_json()["code"] == 429
        assert http.post(Q + "purgeTopic", data={"topic": "q"}).get_json()["count"] == 1
        assert rt.queue.pull("t", subscription="mail").messages
        assert rt.controls.pause("t", subscription="mail")
        assert http.post(Q + "pauseTopic", data={"topic": "t"}).get_json()["paused"] is True
        rt.monitor.observe_loop("schedule", 1.5)
        # Push delivery's samples as background/push.py records them (a real push is
        # tests/monitoring/test_report_live.py's): "mail" answered 2xx, then 5xx.
        for counter, millis in (("push2xx", 12.0), ("push5xx", 250.0)):
            rt.monitor.incr("t", counter, subscription="mail")
            rt.monitor.observe("t", "pushMillis", [millis], subscription="mail")
        rt.monitor.flush()
        rt.nodes.tick()      # this process in the node registry: its held long polls
        text = http.get("/metrics").get_data(as_text=True)
    samples: dict[str, dict[str, set[str]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = samples.setdefault(sample.name, {})
            for name, value in sample.labels.items():
                labels.setdefault(name, set()).add(value)
    assert "delayqueue_messages_total" in samples
    assert samples["delayqueue_topic_paused"]["topic"] == {"q", "t"}
    assert samples["delayqueue_subscription_paused"]["subscription"] == {"mail"}
    assert samples["delayqueue_queue_size"]["subscription"] == {"default", "mail"}
    assert samples["delayqueue_push_total"]["outcome"] == {
        "2xx", "3xx", "4xx", "5xx", "timeout", "connection", "refused"}
    return samples


def alert_rules() -> list[dict]:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"]]


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def expressions() -> list[tuple[str, str]]:
    found = [(f"alert {rule['alert']}", rule["expr"]) for rule in alert_rules()]
    board = dashboard()
    for panel in board["panels"]:
        for target in panel["targets"]:
            found.append((f"panel {panel['title']}", target["expr"]))
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            found.append((f"variable {variable['name']}", variable["definition"]))
    return found


def problems(where: str, expr: str, exported: dict[str, dict[str, set[str]]]) -> list[str]:
    found = []
    used = SELECTOR.findall(expr)
    if not used and not JOB_UP.search(expr):
        found.append(f"{where}: no delayqueue metric in {expr!r}")
    labels_in_play: set[str] = set()
    for name, braces in used:
        if name not in exported:
            found.append(f"{where}: {name} is not exported by /metrics")
            continue
        labels = exported[name]
        labels_in_play |= set(labels)
        for label, op, value in MATCHER.findall(braces or ""):
            if label not in labels:
                found.append(f"{where}: {name} has no label {label}")
            elif op == "=" and "$" not in value and value not in labels[label]:
                found.append(f"{where}: {name}{{{label}={value!r}}} never exported "
                             f"(values: {sorted(labels[label])})")
    for group in GROUPING.findall(expr):
        for label in (part.strip() for part in group.split(",") if part.strip()):
            if label not in labels_in_play:
                found.append(f"{where}: grouping label {label} is on none of its metrics")
    return found


def test_every_expression_uses_metrics_and_labels_that_metrics_exports(exported):
    found = [p for where, expr in expressions() for p in problems(where, expr, exported)]
    assert not found, "\n".join(found)


def test_the_checker_catches_a_wrong_name_and_a_wrong_label_value(exported):
    assert problems("x", "rate(delayqueue_messages{op=\"sendMsg\"}[5m])", exported)
    assert problems("x", "delayqueue_messages_total{op=\"deadLetters\"}", exported)
    assert problems("x", "max by (queue) (delayqueue_queue_size)", exported)
    assert not problems("x", "max by (topic) (delayqueue_queue_size{state=\"ready\"})", exported)


def test_the_four_alerts_are_there_with_durations_and_text():
    rules = {rule["alert"]: rule for rule in alert_rules()}
    for name in ("DelayQueueBacklogGrowing", "DelayQueueLagP99High", "DelayQueueDeadLetters",
                 "DelayQueueNoConsumer"):
        assert name in rules, name
        rule = rules[name]
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        if "for" in rule:
            assert re.fullmatch(r"\d+[smh]", rule["for"]), rule["for"]


def test_the_dashboard_is_well_formed():
    board = dashboard()
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids)) and len(ids) >= 6
    titles = " ".join(panel["title"].lower() for panel in board["panels"])
    for subject in ("backlog", "rate", "lag", "dead"):
        assert subject in titles, subject
    for panel in board["panels"]:
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}
        assert panel["targets"] and all(t["refId"] for t in panel["targets"])
    names = {v["name"] for v in board["templating"]["list"]}
    assert {"datasource", "topic"} <= names


def test_the_dashboard_shows_every_queue_state_group_blocked_too(exported):
    assert exported["delayqueue_queue_size"]["state"] == set(QUEUE_STATES)
    exprs = [target["expr"] for panel in dashboard()["panels"] for target in panel["targets"]
             if "delayqueue_queue_size" in target["expr"]]
    by_state = [e for e in exprs if "state=" not in e
                and any("state" in group.split(",") for group in
                        (g.replace(" ", "") for g in GROUPING.findall(e)))]
    assert by_state, "no panel shows the queue sizes by state"
    assert any('state="group_blocked"' in e for e in exprs), "no panel of group_blocked alone"


def test_the_topic_control_alerts_fire_on_a_backlog_refusal_and_on_an_hour_paused():
    rules = {rule["alert"]: rule for rule in alert_rules()}
    quota = rules["DelayQueueBacklogQuotaReached"]
    assert re.sub(r"\s+", " ", quota["expr"]).strip() == (
        'max by (topic) (increase(delayqueue_messages_total{op="backlogRefused"}[5m])) > 0')
    assert "for" not in quota and quota["labels"]["severity"] == "warning"
    paused = rules["DelayQueueTopicPaused"]
    assert re.sub(r"\s+", " ", paused["expr"]).strip() == (
        "max by (topic) (delayqueue_topic_paused) == 1")
    assert paused["for"] == "1h" and paused["labels"]["severity"] == "warning"
    for rule in (quota, paused):
        assert "{{ $labels.topic }}" in rule["annotations"]["summary"]
        assert rule["annotations"]["description"]


def test_the_dashboard_shows_paused_topics_purges_and_backlog_refusals():
    panels = dashboard()["panels"]
    stats = [p for p in panels if p["type"] == "stat"
             and any("delayqueue_topic_paused" in t["expr"] for t in p["targets"])]
    assert stats, "no stat of the paused topics"
    exprs = [t["expr"] for p in panels if p["type"] == "timeseries" for t in p["targets"]]
    for op in ("purged", "backlogRefused"):
        assert any(f'op="{op}"' in e for e in exprs), f"no panel of {op}"
    cells = {(x, y) for p in panels for x in range(p["gridPos"]["x"], p["gridPos"]["x"]
                                                     + p["gridPos"]["w"])
             for y in range(p["gridPos"]["y"], p["gridPos"]["y"] + p["gridPos"]["h"])}
    assert len(cells) == sum(p["gridPos"]["w"] * p["gridPos"]["h"] for p in panels), (
        "panels overlap")


def test_the_dashboard_shows_debounced_sends_and_schedules_and_misfires_alert(exported):
    """replaced, deduplicated, scheduleSent and scheduleMissed: exported as ops (every topic's,
    so before any debounce or schedule ran), each drawn on the dashboard, and a missed fire
    time alerts (the rule fires in a promtool unit test, and is silent before and after)."""
    ops = ("replaced", "deduplicated", "scheduleSent", "scheduleMissed")
    assert set(ops) <= exported["delayqueue_messages_total"]["op"]
    exprs = [t["expr"] for p in dashboard()["panels"] if p["type"] == "timeseries"
             for t in p["targets"]]
    for op in ops:
        assert any(f'op="{op}"' in e for e in exprs), f"no panel of {op}"
    rule = {rule["alert"]: rule for rule in alert_rules()}["DelayQueueScheduleMisfires"]
    assert re.sub(r"\s+", " ", rule["expr"]).strip() == (
        'max by (topic) (increase(delayqueue_messages_total{op="scheduleMissed"}[10m])) > 0')
    assert "for" not in rule and rule["labels"]["severity"] == "warning"
    assert "{{ $labels.topic }}" in rule["annotations"]["summary"]
    tests = yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))["tests"]
    cases = [case for test in tests for case in test["alert_rule_test"]
             if case["alertname"] == "DelayQueueScheduleMisfires"]
    assert [bool(case["exp_alerts"]) for case in cases] == [False, True, False]


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is not installed: run `make system-deps` (as root it installs "
                    "Debian's prometheus package, which ships promtool)")
    return found


def test_promtool_accepts_the_rules_and_their_unit_tests_pass():
    for command in (["check", "rules", str(RULES)], ["test", "rules", str(RULE_TESTS)]):
        done = subprocess.run([promtool(), *command], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, f"promtool {' '.join(command)}:\n{done.stdout}{done.stderr}"


def test_the_fleet_alerts_and_dead_letters_present_each_fire_in_a_unit_test():
    rules = {rule["alert"]: rule for rule in alert_rules()}
    expected = {
        "DelayQueueNodeDown": ('up{job="delayqueue"} == 0', "2m", "critical"),
        "DelayQueueRedisUnreachable": ("delayqueue_redis_up == 0", "1m", "critical"),
        "DelayQueueSchedulerStalled": (
            'max(rate(delayqueue_scheduler_loop_duration_milliseconds_count{loop="schedule"}'
            '[5m])) == 0', "1m", "critical"),
        "DelayQueueDeadLettersPresent": (
            'max by (topic, subscription) (delayqueue_queue_size{state="dead"}) > 0', "10m",
            "warning"),
        "DelayQueueSubscriptionPaused": (
            "max by (topic, subscription) (delayqueue_subscription_paused) == 1", "1h",
            "warning"),
    }
    for name, (expr, duration, severity) in expected.items():
        rule = rules[name]
        assert re.sub(r"\s+", " ", rule["expr"]).strip() == expr, name
        assert rule["for"] == duration and rule["labels"]["severity"] == severity, name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    tests = yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))["tests"]
    cases = [case for test in tests for case in test["alert_rule_test"]]
    fired = {case["alertname"] for case in cases if case["exp_alerts"]}
    silent = {case["alertname"] for case in cases if not case["exp_alerts"]}
    assert set(expected) <= fired, set(expected) - fired
    assert set(expected) <= silent, "each alert is also checked silent before its time"


def test_the_dashboard_shows_dead_letters_oldest_ready_age_and_http_requests(exported):
    assert exported["delayqueue_queue_size"]["state"] >= {"dead"}
    panels = {panel["title"]: [t["expr"] for t in panel["targets"]]
              for panel in dashboard()["panels"]}
    (dlq,) = [title for title in panels if "DLQ" in title]
    assert panels[dlq] == [
        'max by (topic, subscription) (delayqueue_queue_size{topic=~"$topic",'
        'subscription=~"$subscription",state="dead"})']
    exprs = [e for found in panels.values() for e in found]
    assert any("delayqueue_oldest_ready_age_seconds" in e for e in exprs)
    assert any("rate(delayqueue_http_requests_total" in e and "by (route, code)" in e
               for e in exprs)
    assert any("delayqueue_http_request_duration_seconds_bucket" in e for e in exprs)
    assert "delayqueue_http_requests_total" in exported


def test_consumer_alerts_and_panels_are_per_subscription(exported):
    """Every rule and panel over a consumer's series (ready, group-blocked and dead sizes,
    deliveries, dead letters, lag, the oldest ready age) keeps the subscription apart: a
    named subscription whose consumers stall must not hide behind its topic's default one."""
    consumer = re.compile(r'delayqueue_(oldest_ready_age_seconds|time_gap_milliseconds_bucket|'
                          r'queue_size\{[^}]*state(=|!=)"(ready|group_blocked|dead)"|'
                          r'messages_total\{[^}]*op="(pullMsg|ackMsg|nackMsg|deadLettered|'
                          r'triggerMsgTimeout|triggerMsgEndLife)")')
    for where, expr in expressions():
        if consumer.search(expr):
            groups = [g.replace(" ", "").split(",") for g in GROUPING.findall(expr)]
            assert groups and all("subscription" in g for g in groups), (where, expr)
    assert "subscription" in exported["delayqueue_messages_total"]
    names = {v["name"] for v in dashboard()["templating"]["list"]}
    assert "subscription" in names


def test_push_failing_alert_and_panels_are_per_push_subscription(exported):
    """DelayQueuePushFailing: the non-2xx share of a subscription's POSTs over 5 minutes past
    10%, each outcome's max over the nodes (every node reports the fleet) summed; its unit
    test fires on a half-failing subscription and is silent before, after and beside it.
    The dashboard draws the POSTs by outcome and their latency per (topic, subscription)."""
    rule = {rule["alert"]: rule for rule in alert_rules()}["DelayQueuePushFailing"]
    share = ("sum by (topic, subscription) (max by (topic, subscription, outcome) "
             "(rate(delayqueue_push_total{}[5m])))")
    failing = share.format('{outcome!="2xx"}')
    assert re.sub(r"\s+", " ", rule["expr"]).strip() == f"{failing} / {share.format('')} > 0.1"
    assert (rule["for"], rule["labels"]["severity"]) == ("5m", "warning")
    assert "{{ $labels.subscription }}" in rule["annotations"]["summary"]
    tests = yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))["tests"]
    cases = [case for test in tests for case in test["alert_rule_test"]
             if case["alertname"] == "DelayQueuePushFailing"]
    assert [[a["exp_labels"]["subscription"] for a in case["exp_alerts"]] for case in cases] == [
        [], [], ["billing"], []]
    exprs = [t["expr"] for p in dashboard()["panels"] for t in p["targets"]]
    by_outcome = [e for e in exprs if "delayqueue_push_total" in e]
    latency = [e for e in exprs if "delayqueue_push_duration_seconds_bucket" in e]
    assert by_outcome and all("by (topic, subscription, outcome)" in e for e in by_outcome)
    assert len(latency) == 2 and all("by (topic, subscription, le)" in e for e in latency)
    assert "delayqueue_push_duration_seconds_bucket" in exported
