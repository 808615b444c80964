"""push-allowed-networks (settings/push_networks.py): what 'public' admits, CIDRs, and the
setting's own check."""

from __future__ import annotations

import pytest

from delayqueue.settings.config import ConfigError, load_settings
from delayqueue.settings.push_networks import AllowedNetworks

REFUSED_BY_DEFAULT = ["127.0.0.1", "127.8.9.10", "::1", "10.1.2.3", "172.16.0.1",
                      "192.168.1.1", "169.254.169.254", "fe80::1", "fd00::1", "100.64.0.1",
                      "0.0.0.0", "224.0.0.1", "::ffff:127.0.0.1", "::ffff:10.0.0.1",
                      "240.0.0.1", "255.255.255.255"]


def test_the_default_admits_public_addresses_only():
    public = AllowedNetworks.parse(load_settings(env={}).push_allowed_networks)
    assert public.text == "public"
    for address in ("8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "::ffff:8.8.8.8"):
        assert public.allows(address), address
    for address in REFUSED_BY_DEFAULT:
        assert not public.allows(address), address


def test_listed_networks_are_admitted_beside_or_instead_of_public():
    local = AllowedNetworks.parse("127.0.0.0/8, ::1, 10.20.0.0/16")
    assert local.allows("127.0.0.1") and local.allows("::1") and local.allows("10.20.3.4")
    assert local.allows("::ffff:127.0.0.1")          # mapped: judged as the IPv4 address
    assert not local.allows("8.8.8.8") and not local.allows("10.21.0.1")
    both = AllowedNetworks.parse("public,192.168.0.0/16")
    assert both.allows("8.8.8.8") and both.allows("192.168.7.7")
    assert not both.allows("10.0.0.1")
    assert both.text == "public,192.168.0.0/16"
    assert not AllowedNetworks.parse("").allows("8.8.8.8")   # nothing at all


def test_the_setting_is_checked_at_start_naming_the_key_and_the_part():
    assert load_settings(env={"DELAYQUEUE_PUSH_ALLOWED_NETWORKS": "PUBLIC, 10.0.0.1"}
                         ).push_allowed_networks == "public,10.0.0.1/32"
    with pytest.raises(ConfigError, match=r"^push-allowed-networks: '10\.0\.0\.0/33' is "
                                          r"neither 'public' nor a CIDR"):
        load_settings(env={"DELAYQUEUE_PUSH_ALLOWED_NETWORKS": "public,10.0.0.0/33"})
