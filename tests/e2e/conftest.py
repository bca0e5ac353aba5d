"""Fixtures of the end-to-end tests. The browser fixtures are only set up by the tests that ask
for them (tests/e2e/test_dashboard*.py); the other e2e tests do not start a browser.

The browser is Debian's chromium (`make chromium` installs it), driven by Playwright without a
browser download. Playwright's sync API runs an asyncio loop in the test's thread while it is
active (Django then refuses ORM calls from that thread), so the browser lives for one test only,
set up after the test's database fixtures and closed before them; ORM work that may run next to
it goes through `in_thread()`.
"""
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu"]
VIEWPORT = {"width": 1366, "height": 768}

T = TypeVar("T")


def in_thread(work: Callable[[], T]) -> T:
    """Run ORM work in a fresh thread (no event loop there) and close its connections after."""

    def run() -> T:
        from django.db import connections

        try:
            return work()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()


def spare_node(*, add: bool, name: str = "spare", cpu: int = 32, gpus: int = 0, pool: str = "local") -> None:
    """A cordoned node in `pool`: work larger than this machine is then work the pool could run
    once the node is back (larger than every node, it is refused at submission: issue 46, item 3),
    so it queues and says what it waits on. `add=False` removes it. ORM work: call through
    `in_thread` where a browser runs."""
    from apps.clusters.models import Node, ResourcePool

    if not add:
        Node.objects.filter(name=name).delete()
        return
    where = ResourcePool.objects.get(name=pool)
    Node.objects.create(cluster=where.cluster, pool=where, name=name, cpu_milli_capacity=cpu * 1000,
                        cpu_milli_allocatable=cpu * 1000, memory_mb_capacity=65536, memory_mb_allocatable=65536,
                        gpu_count=gpus, accelerator_type="nvidia" if gpus else "none", schedulable=False,
                        health="healthy", cordon_reason="a spare that lets the test's large work wait")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item, so fixtures can tell that their test failed."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def browser() -> Iterator["object"]:
    """A headless chromium for one test (launching it takes well under a second)."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"The dashboard tests need Debian's chromium at {CHROMIUM}: run `make chromium` "
                    "(apt-get install -y chromium, as root).", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def new_page(browser, request, tmp_path) -> Iterator[Callable[..., "object"]]:
    """new_page(base_url) -> a page in a fresh browser context (own cookies), 1366x768.
    On failure, each page's screenshot is saved next to the test's files and its path printed."""
    contexts = []

    def make(base_url: str, **options):
        context = browser.new_context(base_url=base_url, viewport=VIEWPORT, **options)
        contexts.append(context)
        return context.new_page()

    yield make
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for n, context in enumerate(contexts):
        if failed:
            for m, page in enumerate(context.pages):
                shot = Path(tmp_path) / f"failure-{n}-{m}.png"
                try:
                    page.screenshot(path=str(shot), full_page=True)
                    print(f"screenshot of {page.url}: {shot}")
                except Exception as exc:  # noqa: BLE001 - a failed screenshot must not hide the failure
                    print(f"no screenshot of {page.url}: {exc}")
        context.close()
