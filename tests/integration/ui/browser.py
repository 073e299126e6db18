"""Driving the real UI in headless Chromium as a user does: a page with generous deadlines (the
machine may be busy), the sign-in form, and the trigger form's submit."""

from __future__ import annotations

import time
from typing import Any

from .conftest import PASSWORD, USER, Deployment

# Every UI wait is on a condition, with a deadline generous enough for a busy machine.
UI_DEADLINE_MS = 120_000


def new_page(p: Any) -> tuple[Any, Any]:
    from playwright.sync_api import expect

    expect.set_options(timeout=UI_DEADLINE_MS)
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(UI_DEADLINE_MS)
    page.set_default_navigation_timeout(UI_DEADLINE_MS)
    return browser, page


def sign_in(page: Any, url: str) -> None:
    """Log in through SimpleAuthManager's form and wait until its redirect has landed: a goto
    issued while the post-login navigation is under way is aborted (net::ERR_ABORTED)."""
    page.goto(f"{url}/")
    page.get_by_label("Username").fill(USER)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda current: "login" not in current, timeout=UI_DEADLINE_MS)
    page.wait_for_load_state("networkidle")


def submit_the_trigger_form(page: Any, deployment: Deployment, dag_id: str) -> None:
    """Click the open trigger form's Trigger button and wait for what its user sees: the toast and,
    on a paused DAG ("Unpause on trigger" left ticked, as Airflow shows it), the DAG unpaused. The
    form sends the unpause and the trigger at once and retries a failed unpause; a browser closed at
    the toast may cut either off, and the run then stays queued behind a paused DAG."""
    from playwright.sync_api import expect

    paused = deployment.api("GET", f"/dags/{dag_id}")["is_paused"]
    page.get_by_role("dialog").get_by_role("button", name="Trigger").last.click()
    expect(page.get_by_text("Dag run has been successfully triggered").first).to_be_visible()  # the toast may render twice
    deadline = time.monotonic() + UI_DEADLINE_MS / 1000
    while paused:
        assert time.monotonic() < deadline, f"{dag_id}: the form's 'Unpause on trigger' did not land in {UI_DEADLINE_MS // 1000} s"
        time.sleep(1)
        paused = deployment.api("GET", f"/dags/{dag_id}")["is_paused"]
