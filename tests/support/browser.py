"""Headless Chromium for the tests that look at pages (the console, /docs, the report):
Debian's chromium and chromium-driver, which `make system-deps` installs."""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from typing import Iterator, Sequence

FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--window-size=1400,1600", "--hide-scrollbars")


@contextmanager
def chromium(extra_flags: Sequence[str] = (), logs: Sequence[str] = ()) -> Iterator:
    """A started driver, quit at the end; ``logs``: the log types to keep ("browser",
    "performance")."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    assert binary and driver_path, (
        "the browser tests need Debian's chromium and chromium-driver "
        "(make system-deps installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in (*FLAGS, *extra_flags):
        options.add_argument(flag)
    if logs:
        options.set_capability("goog:loggingPrefs", {kind: "ALL" for kind in logs})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
