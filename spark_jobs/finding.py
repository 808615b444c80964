"""Findings an operator acts on, derived from the hourly per-topic table and the growth runs.

Every finding is one row: kind, namespace, topic, subscription, date, time, figure, unit,
detail: each finding is of one subscription of the topic ("default" for its default one and
the topic's own counters, such as sends and refusals).
  * ``ready_backlog_growing``  -- the ready queue grew at each of at least N consecutive
    snapshots (consumers falling behind); time = run start, figure = growth in messages.
  * ``delivery_lag_p99_high``  -- per topic and day, the hours whose p99 delivery lag exceeds
    the threshold; time = worst hour, figure = its p99 (ms).
  * ``messages_ended``         -- messages ended by expiry or exhausted retries in the day and
    dropped: the tables' ``ended`` (triggerMsgEndLife without the dead letters, which
    ``dead_lettered`` counts); time = first such hour, figure = count.
  * ``dead_lettered``          -- messages moved to the dead-letter queue in the day
    (``deadLettered``); time = first such hour, figure = count.
  A message is in one of the two, never both.
  * ``no_consumer``            -- messages sent in the day and none delivered; time = first
    hour with sends, figure = messages sent. Of a named subscription: messages became ready
    for it and none was delivered (figure = those messages). A default subscription's is left
    out when a named subscription of the topic delivered that day (its consumers may all
    read named subscriptions: ``defaultSubscription`` false).
  * ``backlog_refused``        -- sends refused because the topic held its maxBacklog live
    messages (``backlogRefused``): producers lost those sends unless they retried; time =
    first such hour, figure = count.
A day with none of these has no findings rows (the report says so).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from spark_jobs.snapshot import DEFAULT_SUBSCRIPTION

FINDING_COLUMNS = (
    "kind", "namespace", "topic", "subscription", "date", "time", "figure", "unit", "detail"
)
KEYS = ("namespace", "topic", "subscription", "date")


def _of_subscription():
    """" (subscription s)" for a named subscription's finding, else nothing."""
    return F.when(
        F.col("subscription") != DEFAULT_SUBSCRIPTION,
        F.concat(F.lit(" (subscription "), F.col("subscription"), F.lit(")")),
    ).otherwise(F.lit(""))


def _finding(df: DataFrame, kind: str, time, figure, unit: str, detail) -> DataFrame:
    return df.select(
        F.lit(kind).alias("kind"),
        "namespace",
        "topic",
        "subscription",
        "date",
        time.cast("timestamp").alias("time"),
        figure.cast("double").alias("figure"),
        F.lit(unit).alias("unit"),
        detail.alias("detail"),
    )


def backlog_growth_findings(runs: DataFrame) -> DataFrame:
    """One finding per ready-queue growth run (see ``growth.growth_runs``)."""
    detail = F.format_string(
        "ready queue grew from %d to %d over %d consecutive snapshots (until %s)",
        "from_size",
        "to_size",
        "intervals",
        F.date_format("run_end", "yyyy-MM-dd HH:mm"),
    )
    return _finding(
        runs,
        "ready_backlog_growing",
        F.col("run_start"),
        F.col("to_size") - F.col("from_size"),
        "messages",
        detail,
    )


def delivery_lag_findings(topic_hour: DataFrame, threshold_ms: int) -> DataFrame:
    """Topic-days with hours whose p99 delivery lag is above ``threshold_ms``."""
    hot = (
        topic_hour.filter(F.col("delivery_lag_p99_ms") > threshold_ms)
        .groupBy(*KEYS)
        .agg(
            F.count(F.lit(1)).alias("hours"),
            F.max("delivery_lag_p99_ms").alias("worst_p99"),
            F.max_by(
                "hour_start", F.col("delivery_lag_p99_ms") * 1e13 - F.col("hour_start_ms")
            ).alias("worst_hour"),
        )
    )
    detail = F.format_string(
        "p99 delivery lag above %d ms in %d hour(s); worst %d ms",
        F.lit(threshold_ms),
        "hours",
        "worst_p99",
    )
    return _finding(
        hot, "delivery_lag_p99_high", F.col("worst_hour"), F.col("worst_p99"), "ms", detail
    )


def _daily(topic_hour: DataFrame) -> DataFrame:
    def first_hour(column: str):
        return F.min(F.when(F.col(column) > 0, F.col("hour_start"))).alias(f"first_{column}")

    return topic_hour.groupBy(*KEYS).agg(
        *[
            F.sum(c).alias(c)
            for c in (
                "sent",
                "delivered",
                "ended",
                "dead_lettered",
                "redriven",
                "backlog_refused",
                "purged",
                "promoted",
            )
        ],
        first_hour("sent"),
        first_hour("promoted"),
        first_hour("ended"),
        first_hour("dead_lettered"),
        first_hour("backlog_refused"),
        F.max_by("ready_size_last", "hour_start_ms").alias("ready_size_last"),
    )


def daily_findings(topic_hour: DataFrame) -> DataFrame:
    """Ended, dead-lettered, no-consumer and backlog-refused findings of each topic-day (one
    pass)."""
    days = _daily(topic_hour)
    default = F.col("subscription") == DEFAULT_SUBSCRIPTION
    topic_day = Window.partitionBy("namespace", "topic", "date")
    named_delivered = F.sum(F.when(~default, F.col("delivered")).otherwise(0)).over(topic_day)
    days = days.withColumn("named_delivered", named_delivered)
    ended = _finding(
        days.filter(F.col("ended") > 0),
        "messages_ended",
        F.col("first_ended"),
        F.col("ended"),
        "messages",
        F.format_string(
            "%d message(s) ended by expiry or exhausted retries (not dead-lettered)", "ended"
        ),
    )
    dead = _finding(
        days.filter(F.col("dead_lettered") > 0),
        "dead_lettered",
        F.col("first_dead_lettered"),
        F.col("dead_lettered"),
        "messages",
        F.format_string(
            "topic %s%s dead-lettered %d message(s); %d redriven in the day",
            "topic",
            _of_subscription(),
            "dead_lettered",
            "redriven",
        ),
    )
    no_consumer = _finding(
        days.filter(
            default
            & (F.col("sent") > 0)
            & (F.col("delivered") == 0)
            & (F.col("named_delivered") == 0)
        ),
        "no_consumer",
        F.col("first_sent"),
        F.col("sent"),
        "messages",
        F.format_string(
            "%d message(s) sent, none delivered; ready queue at end of day: %d",
            "sent",
            "ready_size_last",
        ),
    )
    no_subscriber = _finding(
        days.filter(~default & (F.col("promoted") > 0) & (F.col("delivered") == 0)),
        "no_consumer",
        F.col("first_promoted"),
        F.col("promoted"),
        "messages",
        F.format_string(
            "subscription %s: %d message(s) became ready, none delivered; ready queue at end "
            "of day: %d",
            "subscription",
            "promoted",
            "ready_size_last",
        ),
    )
    refused = _finding(
        days.filter(F.col("backlog_refused") > 0),
        "backlog_refused",
        F.col("first_backlog_refused"),
        F.col("backlog_refused"),
        "messages",
        F.format_string(
            "topic %s refused %d send(s) at its backlog quota (maxBacklog); %d purged in the day",
            "topic",
            "backlog_refused",
            "purged",
        ),
    )
    return (
        ended.unionByName(dead)
        .unionByName(no_consumer)
        .unionByName(no_subscriber)
        .unionByName(refused)
    )


def findings(topic_hour: DataFrame, growth_runs: DataFrame, lag_threshold_ms: int) -> DataFrame:
    """All findings (order them when reading: tables are unordered)."""
    return (
        backlog_growth_findings(growth_runs)
        .unionByName(delivery_lag_findings(topic_hour, lag_threshold_ms))
        .unionByName(daily_findings(topic_hour))
    )
