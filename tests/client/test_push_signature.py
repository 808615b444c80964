"""verify_signature, the receiver's check of X-DelayQueue-Signature, against sign() (what the
server sends): a good signature passes; a tampered body, another secret, a stale or future
timestamp and every malformed header fail without raising; several v1 values (a secret being
rotated) pass when one matches; the header's name is matched in any case."""

from __future__ import annotations

import hashlib
import hmac
import time

import pytest
from werkzeug.datastructures import Headers  # what Flask's request.headers is

from delayqueue.client import verify_signature
from delayqueue.core.signature import DEFAULT_TOLERANCE_MS, HEADER, sign

SECRET = "whsec-7f3a"
BODY = b'{"subscription":"billing","delayMsg":{"topic":"orders","msgId":"m1"}}'
NOW = 1_800_000_000_000


def headers(value: str) -> dict[str, str]:
    return {"Content-Type": "application/json", HEADER: value}


def test_sign_is_the_documented_hmac_of_timestamp_dot_body():
    mac = hmac.new(SECRET.encode(), f"{NOW}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert sign(SECRET, NOW, BODY) == f"t={NOW},v1={mac}"


def test_a_good_signature_passes():
    assert verify_signature(SECRET, headers(sign(SECRET, NOW, BODY)), BODY, now_ms=NOW)
    # bytearray and memoryview bodies are bytes too (some frameworks hand those out)
    assert verify_signature(SECRET, headers(sign(SECRET, NOW, BODY)), bytearray(BODY),
                            now_ms=NOW)


def test_the_current_clock_is_used_without_now_ms():
    stamp = int(time.time() * 1000)
    assert verify_signature(SECRET, headers(sign(SECRET, stamp, BODY)), BODY)
    assert not verify_signature(SECRET, headers(sign(SECRET, stamp - 2 * DEFAULT_TOLERANCE_MS,
                                                     BODY)), BODY)


@pytest.mark.parametrize("body", [BODY + b" ", BODY.replace(b"m1", b"m2"), b"", BODY[:-1]])
def test_a_tampered_body_fails(body):
    assert not verify_signature(SECRET, headers(sign(SECRET, NOW, BODY)), body, now_ms=NOW)


def test_another_secret_fails_and_an_empty_secret_never_passes():
    assert not verify_signature("other", headers(sign(SECRET, NOW, BODY)), BODY, now_ms=NOW)
    assert not verify_signature("", headers(sign("", NOW, BODY)), BODY, now_ms=NOW)


def test_a_changed_timestamp_fails_its_mac():
    value = sign(SECRET, NOW, BODY).replace(f"t={NOW}", f"t={NOW + 1}")
    assert not verify_signature(SECRET, headers(value), BODY, now_ms=NOW)


def test_a_timestamp_outside_the_tolerance_fails_on_either_side():
    value = headers(sign(SECRET, NOW, BODY))
    edge = DEFAULT_TOLERANCE_MS
    assert verify_signature(SECRET, value, BODY, now_ms=NOW + edge)
    assert verify_signature(SECRET, value, BODY, now_ms=NOW - edge)
    assert not verify_signature(SECRET, value, BODY, now_ms=NOW + edge + 1)   # expired
    assert not verify_signature(SECRET, value, BODY, now_ms=NOW - edge - 1)   # from the future
    assert not verify_signature(SECRET, value, BODY, now_ms=NOW + 1001, tolerance_ms=1000)
    # None: any time (a receiver replaying stored deliveries)
    assert verify_signature(SECRET, value, BODY, now_ms=NOW + 10 * edge, tolerance_ms=None)


MAC = sign(SECRET, NOW, BODY).rpartition("v1=")[2]


@pytest.mark.parametrize("value", [
    "", " ", ",", "garbage", f"v1={MAC}",                 # no timestamp
    f"t=,v1={MAC}", f"t=abc,v1={MAC}", f"t=-{NOW},v1={MAC}", f"t={NOW}.5,v1={MAC}",
    f"t={NOW},t={NOW},v1={MAC}",                          # two timestamps
    f"t={NOW}", f"t={NOW},v1=", f"t={NOW},v0={MAC}",      # no (usable) MAC
    f"t={NOW},v1={MAC[:-1]}", f"t={NOW},v1={MAC.upper()}", f"t={NOW};v1={MAC}",
    f"t={NOW},v1={MAC}é", "t=\u0661\u0662,v1=00",          # non-ASCII
])
def test_a_malformed_header_fails_without_raising(value):
    assert not verify_signature(SECRET, headers(value), BODY, now_ms=NOW)


def test_no_header_fails():
    assert not verify_signature(SECRET, {"Content-Type": "application/json"}, BODY, now_ms=NOW)
    assert not verify_signature(SECRET, {}, BODY, now_ms=NOW)


def test_one_matching_v1_among_several_passes():
    other = sign("old-secret", NOW, BODY).rpartition("v1=")[2]
    assert verify_signature(SECRET, headers(f"t={NOW},v1={other},v1={MAC}"), BODY, now_ms=NOW)
    assert verify_signature(SECRET, headers(f"t={NOW}, v1={MAC}, v1={other}"), BODY,
                            now_ms=NOW)
    assert not verify_signature(SECRET, headers(f"t={NOW},v1={other},v1={other}"), BODY,
                                now_ms=NOW)


@pytest.mark.parametrize("name", ["x-delayqueue-signature", "X-DELAYQUEUE-SIGNATURE",
                                  "x-DelayQueue-Signature"])
def test_the_header_name_is_matched_in_any_case(name):
    assert verify_signature(SECRET, {name: sign(SECRET, NOW, BODY)}, BODY, now_ms=NOW)


def test_a_case_insensitive_mapping_of_the_framework_works():
    received = Headers([("x-delayqueue-signature", sign(SECRET, NOW, BODY))])
    assert verify_signature(SECRET, received, BODY, now_ms=NOW)


def test_non_ascii_digits_are_no_timestamp():
    # "١٢" is digits to str.isdigit and int(); a header of ours never has them.
    arabic = "".join(chr(0x0660 + int(d)) for d in str(NOW))
    value = f"t={arabic},v1={MAC}"
    assert not verify_signature(SECRET, headers(value), BODY, now_ms=NOW)
    assert not verify_signature(SECRET, headers(value), BODY, tolerance_ms=None)
