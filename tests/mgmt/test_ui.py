"""The web UI in headless Chromium against a real node: screenshots taken during the run, checked for
the queues and the charts they should show (Debian's chromium package; skipped without it)."""
from __future__ import annotations

import asyncio
import io

import pika
import pytest

from tests.mgmt.browser import CHROMIUM, Browser
from tests.mgmt.support import start_mgmt_node
from tests.waiting import until

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(CHROMIUM is None, reason="no chromium (Debian's chromium package) installed")]
Image = pytest.importorskip("PIL.Image", reason="pillow reads the screenshots")
READY_RGB = (0xe8, 0xa3, 0x3d)  # the "ready" series' colour in app.js


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    m = start_mgmt_node(tmp_path_factory.mktemp("ui"))
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", m.node.port))
    ch = conn.channel()
    ch.queue_declare("ui_orders")
    ch.queue_declare("ui_quorum", durable=True, arguments={"x-queue-type": "quorum"})
    for i in range(40):
        ch.basic_publish("", "ui_orders", b"order %d" % i)
    ch.basic_publish("", "ui_quorum", b"q")
    until(lambda: m.get("/api/overview")["queue_totals"]["messages"] == 41, "the sample to show the messages")
    browser = Browser()
    yield m, browser, tmp_path_factory.mktemp("screenshots")
    browser.close()
    conn.close()
    m.node.stop()


def run(coro):
    return asyncio.run(coro)


def coloured_pixels(png: bytes, box: dict, rgb: tuple[int, int, int], tolerance: int = 30) -> int:
    image = Image.open(io.BytesIO(png)).convert("RGB")
    region = image.crop((int(box["x"]), int(box["y"]), int(box["x"] + box["width"]), int(box["y"] + box["height"])))
    raw = region.tobytes()
    return sum(1 for i in range(0, len(raw), 3) if all(abs(raw[i + k] - rgb[k]) <= tolerance for k in range(3)))


async def logged_in(ui, tab: str):
    m, browser, _ = ui
    page = await browser.page()
    await page.call("Page.navigate", url=f"http://127.0.0.1:{m.api_port}/?poll=300#{tab}")
    await page.until("document.readyState === 'complete' && typeof login === 'function'", "the page to load")
    await page.evaluate("login('guest', 'guest')")
    await page.until(f"document.body.dataset.rendered === '{tab}'", f"the {tab} tab to render")
    return page


def test_overview_charts_show_queue_depth(ui):
    async def go():
        page = await logged_in(ui, "overview")
        await page.until("Number(document.getElementById('chart-depth').dataset.points) >= 3", "three chart points")
        box = await page.evaluate("(() => { const r = document.getElementById('chart-depth')"
                                  ".getBoundingClientRect(); return {x: r.x, y: r.y, width: r.width, height: r.height}; })()")
        png = await page.screenshot(ui[2] / "overview.png")
        legend = await page.evaluate("document.getElementById('legend-depth').textContent")
        totals = await page.evaluate("document.getElementById('totals').textContent")
        await page.close()
        return png, box, legend, totals
    png, box, legend, totals = run(go())
    assert "ready 41" in legend and "messages: 41" in totals
    assert coloured_pixels(png, box, READY_RGB) > 100  # the ready line is drawn in the chart


def test_queues_page_lists_queues_with_quorum_leader(ui):
    async def go():
        page = await logged_in(ui, "queues")
        rows = await page.evaluate("[...document.querySelectorAll('#queues-table tr')].map(r => r.innerText)")
        png = await page.screenshot(ui[2] / "queues.png")
        await page.close()
        return rows, png
    rows, png = run(go())
    node = ui[0].get("/api/overview")["node"]
    orders = next(r for r in rows if "ui_orders" in r).split("\t")
    quorum = next(r for r in rows if "ui_quorum" in r).split("\t")
    assert orders[2:4] == ["classic", "running"] and orders[6] == "40"
    assert quorum[2:6] == ["quorum", "running", node, node]
    assert Image.open(io.BytesIO(png)).size[0] > 0


def test_flow_page_names_the_bottleneck_line(ui):
    async def go():
        page = await logged_in(ui, "flow")
        line = await page.evaluate("document.getElementById('bottleneck').textContent")
        await page.screenshot(ui[2] / "flow.png")
        await page.close()
        return line
    assert run(go()) == "bottleneck: none"  # nothing is publishing now


def test_admin_page_adds_a_vhost(ui):
    async def go():
        page = await logged_in(ui, "admin")
        await page.evaluate("(() => { const f = document.getElementById('add-vhost'); f.name.value = 'ui_v';"
                            " f.requestSubmit(); })()")
        await page.until("document.getElementById('vhosts-table').innerText.includes('ui_v')", "the new vhost")
        users = await page.evaluate("document.getElementById('users-table').innerText")
        await page.screenshot(ui[2] / "admin.png")
        await page.close()
        return users
    assert "guest" in run(go())
    assert "ui_v" in [v["name"] for v in ui[0].get("/api/vhosts")]
