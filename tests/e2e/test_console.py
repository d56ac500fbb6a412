"""The web console at /ui, in a real Chromium (Debian's, driven by Playwright) against a proxy
with SASL and ACLs on, a real broker, real Postgres and librdkafka ShareConsumers: the overview
lists the groups, a group page shows records Acquired while a consumer holds them and
acknowledged after it commits, a reset planned and confirmed on the page is what the next
consumer receives, a principal sees only the groups it may describe, and names from the cluster
are shown as text, never run."""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from confluent_kafka import Producer
from playwright.sync_api import Browser, Locator, Page, Route, expect, sync_playwright

from tests.support.consumers import poll_until
from tests.support.secure import PASSWORDS, Secure

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCRIPT = "<script>window.__xss=1</script>"
IMAGE = "<img src=x onerror=window.__xss=1>"
WAIT_MS = 30_000
expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium for the module (starting one is most of a test's time)."""
    if not Path(CHROMIUM).exists():
        pytest.fail("the console tests need Chromium: apt-get install chromium")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def page_as(browser: Browser, secure: Secure, user: str, path: str = "/ui/") -> Page:
    context = browser.new_context(
        base_url=secure.proxy.admin_url,
        http_credentials={"username": user, "password": PASSWORDS[user]},
        viewport={"width": 1366, "height": 768},
    )
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    page.goto(path)
    expect(page.locator("main[data-loaded=true]")).to_be_visible()
    return page


def joined(secure: Secure, group: str, topic: str, want: int, **extra) -> object:
    """A consumer of ``group`` holding ``want`` records (polled, not acknowledged)."""
    consumer = secure.consumer("admin", group, **extra)
    consumer.subscribe([topic])
    assert len(poll_until(consumer, want, 30)) == want
    return consumer


@contextmanager
def held(
    secure: Secure, topic: Callable[..., str], produce: Callable[..., None], name: str, records: int
) -> Iterator[tuple[str, str]]:
    """A new topic of one partition with ``records`` records, and a new group
    ``console-{name}-…`` whose consumer holds them all until the block ends: (topic, group)."""
    t = topic(1)
    produce(t, records, partitions=1)
    group = f"console-{name}-{uuid.uuid4().hex[:6]}"
    consumer = joined(secure, group, t, records)
    try:
        yield t, group
    finally:
        consumer.close()


def group_row(page: Page, group: str) -> Locator:
    return page.locator("#groups tbody tr").filter(
        has=page.get_by_role("link", name=group, exact=True)
    )


@pytest.mark.long
def test_overview_group_page_and_a_reset_from_the_page(secure, browser, topic, produce):
    t = topic(1)
    produce(t, 10, partitions=1)
    group = f"console-{uuid.uuid4().hex[:6]}"
    consumer = joined(secure, group, t, 10)
    page = page_as(browser, secure, "admin")
    row = group_row(page, group)
    expect(row).to_have_count(1)
    expect(row.locator("td").nth(2)).to_have_text("1")  # members
    expect(row.locator("td").nth(3)).to_have_text(t)
    expect(row.locator("td").nth(4)).to_have_text("10")  # lag: acquired, not acknowledged
    node = page.locator("#nodes tbody tr")
    expect(node).to_have_count(1)  # one proxy node, answering, coordinating the group
    expect(node.locator("td")).to_have_text(
        [re.compile(r"^\d+ \(this\)$"), re.compile("SASL_PLAINTEXT://127.0.0.1:"),
         re.compile("^http://"), "live", re.compile(r"^[1-9]\d*$"), re.compile(r"^[1-9]\d*$")]
    )  # fmt: skip
    sort = page.get_by_role("button", name="Lag", exact=True)
    sort.focus()
    page.keyboard.press("Enter")  # the header buttons sort from the keyboard too
    expect(page.locator("#groups th").nth(4)).to_have_attribute("aria-sort", "ascending")
    page.keyboard.press("Space")
    expect(page.locator("#groups th").nth(4)).to_have_attribute("aria-sort", "descending")

    row.get_by_role("link").click()
    expect(page.locator("#members tbody tr")).to_have_count(1)
    heartbeat = page.locator("#members tbody tr td").nth(5)  # the consumer heartbeats
    expect(heartbeat).to_have_text(re.compile(r"^\d+\.\d s ago$"))
    expect(page.locator("#chart-lag")).to_have_attribute("data-last", "10")
    expect(page.locator("#chart-lock-timeouts")).to_have_attribute("data-last", "0")
    expect(page.locator("#chart-redeliveries")).to_have_attribute("data-last", "0")
    acquired = page.locator('#partitions [data-state="Acquired"]')
    expect(acquired).to_have_count(1)
    assert "delivery count 1" in (acquired.get_attribute("title") or "")
    assert acquired.get_attribute("data-first") == "0"
    assert acquired.get_attribute("data-last") == "9"

    consumer.commit_sync()  # implicit mode: acknowledges what the poll returned
    expect(page.locator('#partitions [data-state="Acquired"]')).to_have_count(0)
    expect(page.locator("#partitions .bar")).to_have_attribute("data-spso", "10")
    expect(page.locator("#chart-lag")).to_have_attribute("data-last", "0")
    # the page keeps each refresh's sample: the chart has the 10 and the 0 at least
    expect(page.locator("#chart-lag")).to_have_attribute(
        "data-points", re.compile(r"^([2-9]|\d\d+)$")
    )
    assert page.locator("#chart-lag polyline").get_attribute("points").count(",") >= 2
    consumer.close()
    expect(page.locator("#members tbody tr")).to_have_count(0)

    page.select_option("#reset-to", "offset")
    page.fill("#reset-value", "4")
    page.get_by_role("button", name="Plan reset…").click()
    dialog = page.locator("#confirm")
    expect(dialog).to_be_visible()
    plan = dialog.locator("#reset-plan tbody tr td")
    expect(plan).to_have_text([f"{t}:0", "10", "4"])
    dialog.get_by_role("button", name="Reset offsets").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#partitions .bar")).to_have_attribute("data-spso", "4")
    expect(page.locator("#problem")).to_be_hidden()

    again = joined(secure, group, t, 6)
    try:
        assert not poll_until(again, 1, 2)  # nothing more: the reset moved the start to 4
    finally:
        again.close()
    page.context.close()


@pytest.mark.floors
def test_a_user_sees_only_the_groups_it_may_describe(secure, browser, topic, produce):
    t = topic(1)
    produce(t, 2, partitions=1)
    tag = uuid.uuid4().hex[:6]
    seen, hidden = f"seen-{tag}", f"hidden-{tag}"
    consumers = [joined(secure, g, t, 2) for g in (seen, hidden)]
    try:
        secure.acl("User:alice", "GROUP", seen, "DESCRIBE")
        with secure.http(user=None) as anonymous:  # the challenge that makes a browser ask
            for path in ("/ui/", "/v1/share-groups"):
                answer = anonymous.get(path)
                assert answer.status_code == 401, answer.text
                assert answer.headers["www-authenticate"].startswith('Basic realm="shareproxy"')
        admin = page_as(browser, secure, "admin")
        expect(group_row(admin, hidden)).to_have_count(1)
        alice = page_as(browser, secure, "alice")
        expect(group_row(alice, seen)).to_have_count(1)
        expect(group_row(alice, hidden)).to_have_count(0)
        alice.goto(f"/ui/#/groups/{hidden}")
        expect(alice.locator("#problem")).to_contain_text("GROUP_AUTHORIZATION_FAILED")
        alice.context.close()
        admin.context.close()
    finally:
        for c in consumers:
            c.close()


def test_names_and_records_from_the_cluster_are_text(secure, browser, broker, topic, produce):
    t = topic(1)
    produce(t, 2, partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(t, key=SCRIPT.encode(), value=IMAGE.encode(), partition=0)  # offset 2
    assert producer.flush(30) == 0
    tag = uuid.uuid4().hex[:4]
    shown = [f"{SCRIPT}{tag}", f"{IMAGE}{tag}"]
    consumers = [joined(secure, g, t, 3, **{"client.id": IMAGE}) for g in shown]
    try:
        with secure.http() as http:  # rejected: archived, so the archived list previews it
            answer = http.post(
                f"/v1/share-groups/{quote(shown[1], safe='')}/partitions/{t}/0/records/reject",
                json={"first_offset": 2},
            )
            assert answer.status_code == 200, answer.text
        page = page_as(browser, secure, "admin")
        for g in shown:
            expect(group_row(page, g)).to_have_count(1)
        page.get_by_role("link", name=shown[1], exact=True).click()
        expect(page.locator("#group-id")).to_have_text(shown[1])
        expect(page.locator("#members tbody tr td").nth(1)).to_have_text(IMAGE)
        archived = page.locator("#archived tbody tr td")
        expect(archived.nth(6)).to_have_text(SCRIPT)  # the first record's key
        expect(archived.nth(7)).to_have_text(IMAGE)  # and value
        assert page.locator("main img, main script").count() == 0
        assert page.evaluate("() => window.__xss") is None
        # a group id with '/' in it ("</script>…"): its page is reached through the API too
        page.goto("/ui/")
        page.get_by_role("link", name=shown[0], exact=True).click()
        expect(page.locator("#group-id")).to_have_text(shown[0])
        expect(page.locator("#members tbody tr td").nth(1)).to_have_text(IMAGE)
        expect(page.locator("#problem")).to_be_hidden()
        assert page.evaluate("() => window.__xss") is None
        page.context.close()
    finally:
        for c in consumers:
            c.close()


@pytest.mark.floors
def test_reject_redrive_and_a_config_change_from_the_page(secure, browser, topic, produce):
    with held(secure, topic, produce, "act", 4) as (t, group):
        page = page_as(browser, secure, "admin", f"/ui/#/groups/{group}")
        expect(page.locator('#partitions [data-state="Acquired"]')).to_have_count(1)
        page.select_option("#records-partition", f"{t}:0")
        page.fill("#records-first", "2")
        page.select_option("#records-action", "reject")
        page.get_by_role("button", name="Change records…").click()
        dialog = page.locator("#confirm")
        expect(dialog).to_contain_text("Now: 2\u20132: Acquired")
        dialog.get_by_role("button", name="Reject").click()
        expect(page.locator('#partitions [data-state="Archived"]')).to_have_attribute(
            "data-first", "2"
        )
        rejected = page.locator("#archived tbody tr")
        expect(rejected).to_have_count(1)
        expect(rejected.locator("td").nth(2)).to_have_text("operator-rejected")
        expect(rejected.locator("td").nth(6)).to_have_text("2")  # the record's key
        expect(rejected.locator("td").nth(7)).to_have_text("v" * 100)  # its value

        rejected.get_by_role("button", name=f"Redrive offsets 2\u20132 of {t}:0").click()
        expect(dialog.locator(".redrive-plan")).to_have_text(
            f"{t}:0: produce again 2; already redriven none"
        )
        dialog.get_by_role("button", name="Redrive").click()
        expect(rejected.locator("td").nth(5)).not_to_have_text("\u2013")  # redriven at: a time

        page.select_option("#config-name", "share.delivery.count.limit")
        page.fill("#config-value", "7")
        page.get_by_role("button", name="Change config…").click()
        expect(dialog).to_contain_text("share.delivery.count.limit")
        expect(dialog).to_contain_text("Allowed: 2 to 10.")  # Kafka's bounds, the proxy's too
        dialog.get_by_role("button", name="Change config").click()
        limit = page.locator('#configs tr[data-key="share.delivery.count.limit"] td')
        expect(limit).to_have_text(["share.delivery.count.limit", "7", "group", "2 to 10"])
        expect(page.locator("#problem")).to_be_hidden()
        page.context.close()


def test_offsets_outside_spso_speo_offer_no_action(secure, browser, topic, produce):
    with held(secure, topic, produce, "span", 4) as (t, group):
        page = page_as(browser, secure, "admin", f"/ui/#/groups/{group}")
        expect(page.locator("#partitions .bar")).to_have_attribute("data-speo", "4")
        page.select_option("#records-partition", f"{t}:0")
        dialog = page.locator("#confirm")
        reject = dialog.get_by_role("button", name="Reject")
        for first, last in (("4", ""), ("2", "7")):  # past SPEO (exclusive), or partly
            page.fill("#records-first", first)
            page.fill("#records-last", last)
            page.select_option("#records-action", "reject")
            page.get_by_role("button", name="Change records…").click()
            expect(dialog.locator("#confirm-refusal")).to_have_text(
                "Not possible: only in-flight offsets can change, 0\u20133 (SPSO 0, SPEO 4)."
            )
            expect(reject).to_be_disabled()
            dialog.get_by_role("button", name="Cancel").click()
            expect(dialog).to_be_hidden()
        page.fill("#records-first", "1")
        page.fill("#records-last", "3")
        page.get_by_role("button", name="Change records…").click()
        expect(dialog).to_contain_text("Now: 1\u20133: Acquired")
        expect(dialog.locator("#confirm-refusal")).to_have_count(0)
        expect(reject).to_be_enabled()
        dialog.get_by_role("button", name="Cancel").click()
        page.context.close()


def test_the_reset_form_waits_for_an_empty_group(secure, browser, topic, produce):
    with held(secure, topic, produce, "busy", 2) as (_, group):
        page = page_as(browser, secure, "admin", f"/ui/#/groups/{group}")
        plan = page.get_by_role("button", name="Plan reset…")
        expect(plan).to_be_disabled()
        expect(page.locator("#reset-to")).to_be_disabled()
        expect(page.locator("#reset-value")).to_be_disabled()
        expect(page.locator("#reset-blocked")).to_have_text(
            "Disabled: the group has 1 member, and offsets are reset only in an empty group "
            "(stop its consumers first)."
        )
    expect(page.locator("#members tbody tr")).to_have_count(0)
    expect(plan).to_be_enabled()
    expect(page.locator("#reset-blocked")).to_be_hidden()
    page.context.close()


# the controls scrolled into view whose centre shows something else (something covers them)
COVERED = """() => {
  const inside = (x, y, r) => x > r.left && x < r.right && y > r.top && y < r.bottom;
  const shown = (c, x, y) => {
    for (let a = c.parentElement; a; a = a.parentElement) {
      if (getComputedStyle(a).overflowY !== "visible" && !inside(x, y, a.getBoundingClientRect())) {
        return false;
      }
    }
    return inside(x, y, { left: 0, top: 0, right: innerWidth, bottom: innerHeight });
  };
  return [...document.querySelectorAll("main button, main input, main select")]
    .filter((c) => {
      const r = c.getBoundingClientRect();
      const [x, y] = [r.left + r.width / 2, r.top + r.height / 2];
      return r.width > 0 && shown(c, x, y) && !c.contains(document.elementFromPoint(x, y));
    })
    .map((c) => c.id || c.getAttribute("aria-label") || c.textContent);
}"""


def test_an_error_covers_no_control(secure, browser, topic, produce):
    with held(secure, topic, produce, "toast", 2) as (t, group):
        page = page_as(browser, secure, "admin", f"/ui/#/groups/{group}")
        expect(page.locator("#delete-topic")).to_have_value(t)
        page.get_by_role("button", name="Delete offsets…").click()
        page.locator("#confirm").get_by_role("button", name="Delete offsets").click()
        problem = page.locator("#problem")
        expect(problem).to_contain_text("GROUP_SUBSCRIBED_TO_TOPIC")
        main = page.locator("main")
        shown = problem.bounding_box()
        content = main.bounding_box()
        assert shown and content
        seen_bottom = min(content["y"] + content["height"], 768)  # main's part in the viewport
        assert shown["y"] >= seen_bottom, (shown, content)  # below the page, never over it
        main.hover()
        for _ in range(2):  # the top of the page, then its end: each control in view uncovered
            assert page.evaluate(COVERED) == []
            page.mouse.wheel(0, 100_000)
        expect(page.get_by_role("button", name="Change config…")).to_be_in_viewport()
        assert page.evaluate(COVERED) == []
        page.get_by_role("button", name="Change config…").click()  # clickable, no force
        page.locator("#confirm").get_by_role("button", name="Cancel").click()
        problem.get_by_role("button", name="Dismiss").click()
        expect(problem).to_be_hidden()
        page.context.close()


def test_a_route_change_cancels_the_open_dialog(secure, browser, topic, produce):
    with held(secure, topic, produce, "route", 2) as (_, group):
        page = page_as(browser, secure, "admin")

        def records(url: str) -> bool:
            return "/records?limit=1000" in url

        waiting: list[Route] = []
        page.route(records, lambda route: waiting.append(route))  # the first refresh, held
        group_row(page, group).get_by_role("link").click()
        expect(page.locator("#group-id")).to_have_text(group)
        delete = page.get_by_role("button", name="Delete offsets…")
        expect(delete).to_be_disabled()  # nothing to plan before the share-partitions are known
        expect(page.get_by_role("button", name="Change records…")).to_be_disabled()
        for route in waiting:
            route.continue_()
        page.unroute(records)
        dialog = page.locator("#confirm")
        delete.click()  # waits until the refresh offers the topic
        expect(dialog).to_be_visible()
        page.go_back()  # the overview: the group page's plan is no longer open over it
        expect(page.locator("#groups")).to_be_visible()
        expect(dialog).to_be_hidden()
        page.go_forward()
        expect(page.locator("#group-id")).to_have_text(group)
        page.get_by_role("button", name="Change config…").click()
        expect(dialog).to_be_visible()
        page.evaluate("() => { location.hash = '#/'; }")  # another page, not Back
        expect(page.locator("#groups")).to_be_visible()
        expect(dialog).to_be_hidden()
        expect(page.locator("#problem")).to_be_hidden()
        page.context.close()


def alice_on(secure: Secure, browser: Browser, group: str, t: str) -> Page:
    """alice on the group's page, allowed to see it all but not to write to its topic."""
    secure.acl("User:alice", "GROUP", group, "DESCRIBE", "READ", "DESCRIBE_CONFIGS")
    secure.acl("User:alice", "TOPIC", t, "DESCRIBE", "READ")
    return page_as(browser, secure, "alice", f"/ui/#/groups/{group}")


def test_a_refused_redrive_says_why(secure, browser, topic, produce):
    with held(secure, topic, produce, "refused", 2) as (t, group):
        with secure.http() as http:
            answer = http.post(
                f"/v1/share-groups/{group}/partitions/{t}/0/records/reject",
                json={"first_offset": 1},
            )
            assert answer.status_code == 200, answer.text
        page = alice_on(secure, browser, group, t)
        problem = page.locator("#problem")
        page.get_by_role("button", name=f"Redrive offsets 1\u20131 of {t}:0").click()
        expect(problem).to_contain_text("TOPIC_AUTHORIZATION_FAILED")  # no Write on the topic
        expect(page.locator("#confirm")).to_be_hidden()
        refreshed = page.locator("#refreshed")
        before = refreshed.text_content() or ""
        expect(refreshed).not_to_have_text(before)  # a later refresh, fine: the error stays
        expect(problem).to_contain_text("TOPIC_AUTHORIZATION_FAILED")
        problem.get_by_role("button", name="Dismiss").click()
        expect(problem).to_be_hidden()
        page.context.close()


def test_a_refresh_error_goes_once_a_refresh_succeeds(secure, browser, topic, produce):
    with held(secure, topic, produce, "flaky", 2) as (t, group):
        page = alice_on(secure, browser, group, t)
        problem = page.locator("#problem")
        expect(problem).to_be_hidden()
        secure.acl("User:alice", "GROUP", group, "DESCRIBE", deny=True)
        expect(problem).to_contain_text("GROUP_AUTHORIZATION_FAILED")
        with secure.http() as http:
            answer = http.request(
                "DELETE",
                "/v1/acls",
                params={"principal": "User:alice", "resource_name": group, "permission": "DENY"},
            )
            assert answer.status_code == 200, answer.text
        expect(problem).to_be_hidden()
        page.context.close()


def test_a_group_that_does_not_exist_says_so(secure, browser):
    group = f"console-none-{uuid.uuid4().hex[:6]}"
    page = page_as(browser, secure, "admin", f"/ui/#/groups/{group}")
    expect(page.locator("#group-id")).to_have_text(group)
    expect(page.locator("#group-missing")).to_have_text(
        "This share group does not exist (the API answers GROUP_ID_NOT_FOUND). "
        "Its page fills in once a share consumer joins it."
    )
    expect(page.locator("main form")).to_have_count(4)
    for form in page.locator("main form").all():
        expect(form).to_be_hidden()
    expect(page.locator("#problem")).to_be_hidden()
    page.context.close()


def test_a_wrong_password_gets_a_readable_page(secure, browser):
    context = browser.new_context(
        base_url=secure.proxy.admin_url,
        http_credentials={"username": "alice", "password": "not-alice-Secret"},
    )
    page = context.new_page()
    answer = page.goto("/ui/")
    assert answer is not None and answer.status == 401
    assert answer.headers["www-authenticate"].startswith('Basic realm="shareproxy"')
    expect(page.get_by_role("heading", name="Sign-in failed")).to_be_visible()
    expect(page.locator("#signin-problem")).to_have_text(
        "The console could not sign you in: invalid user name or password."
    )
    expect(page.locator("body")).not_to_contain_text("error_code")
    context.close()


def test_a_group_page_shows_its_push_and_the_last_answers(browser, proxy, topic, endpoint):
    """A proxy without security: the group page shows where the push goes, the endpoint's
    health, the outcomes and the endpoint's last answers."""
    e = endpoint()
    p = proxy(push_allowed_urls=e.url)
    t = topic(1)
    producer = Producer({"bootstrap.servers": p.upstream})
    for i in range(3):
        producer.produce(t, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
    group = f"pushed-{uuid.uuid4().hex[:6]}"
    r = httpx.put(
        f"{p.admin_url}/v1/share-groups/{group}/push",
        json={"url": e.url, "topics": [t]},
        timeout=30,
    )
    assert r.status_code == 201, r.text
    context = browser.new_context(base_url=p.admin_url, viewport={"width": 1366, "height": 768})
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    page.goto(f"/ui/#/groups/{quote(group, safe='')}")
    expect(page.locator("#push-summary")).to_contain_text(f"POST {e.url}")
    expect(page.locator("#push-health")).to_contain_text("accepted 3")
    expect(page.locator("#push-recent tbody tr")).to_have_count(3)
    expect(page.locator("#push-recent")).to_contain_text("200")
    context.close()
