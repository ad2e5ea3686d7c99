"""The live map page (``/map``) of a running daemon, in a real headless Chromium.

Screenshots go to ``tests/artifacts/`` (not versioned): ``map.png`` (the
generator's stream over its landmarks), ``map-search.png`` (hover and search
on ids that carry markup), ``map-after-refit.png`` (the switch marked).
"""

from __future__ import annotations

import json
import math
import signal
import time
from pathlib import Path

import pytest

from ..stream.helpers import dissimilarities, fitted_model, input_table, objects, write_parquet
from .browser import Browser, require_chromium
from .daemon import Daemon, directory_env, wait_for

pytestmark = pytest.mark.e2e

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"

#: Counts what the map canvas shows, read back from its pixels: saturated (coloured placements), landmark
#: (the landmarks' fill), and the number of distinct coloured hues (16 buckets).
CANVAS_PIXELS = """(() => {
  const c = document.getElementById('map'), d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let coloured = 0, landmark = 0; const hues = new Set();
  for (let i = 0; i < d.length; i += 4) {
    const r = d[i], g = d[i + 1], b = d[i + 2], hi = Math.max(r, g, b), lo = Math.min(r, g, b);
    if (r === 17 && g === 24 && b === 39) landmark++;
    else if (hi - lo > 40) {
      coloured++;
      let h = hi === r ? (g - b) / (hi - lo) : hi === g ? 2 + (b - r) / (hi - lo) : 4 + (r - g) / (hi - lo);
      hues.add(Math.floor(((h + 6) % 6) / 6 * 16));
    }
  }
  return {coloured: coloured, landmark: landmark, hues: hues.size};
})()"""

DATASET = "Object.assign({}, document.getElementById('map').dataset)"
#: Elements an id with markup could have inserted: img, script, b (the page has 4), rendered list items.
ELEMENTS = """['img', 'script', 'b', '#rendered-ids li'].map(s => document.querySelectorAll(s).length)"""
RENDERED = """[...document.querySelectorAll('#rendered-ids li, #rendered-landmarks li')].map(
  li => ({id: li.textContent, x: +li.dataset.x, y: +li.dataset.y,
          landmark: li.parentNode.id === 'rendered-landmarks'}))"""


def generator_env(out: Path, **more: str) -> dict[str, str]:
    env = {
        "STREAMEMBED_SOURCE__KIND": "generator",
        "STREAMEMBED_OUTPUT__ROOT": str(out),
        "STREAMEMBED_GENERATOR__RATE": "3000",
        "STREAMEMBED_SOURCE__BATCH_ROWS": "500",
        "STREAMEMBED_OUTPUT__ROLL_SECONDS": "1",
        "STREAMEMBED_REFIT__AUTO": "false",
        "STREAMEMBED_LOGGING__FORMAT": "json",
    }
    env.update(more)
    return env


def _ready(d: Daemon, embedded: int, timeout: float = 40.0) -> str:
    d.wait_port()
    wait_for(lambda: d.get("/readyz")[0] == 200, timeout, "readiness", d)
    wait_for(lambda: d.metric("streamembed_records_embedded_total", 'method="projection"') >= embedded, timeout,
             f"{embedded} objects embedded", d)
    return f"http://127.0.0.1:{d.port}"


def _only_local(b: Browser, base: str) -> None:
    urls = b.requested_urls()
    assert urls and all(u.startswith(base + "/") for u in urls), urls  # nothing from the internet
    b.evaluate("1")  # collect the events still queued
    assert b.errors() == []  # no exception, no CSP refusal, no failed load


@pytest.mark.slow  # about 5 s: a daemon and a headless browser
def test_the_page_draws_the_landmarks_and_the_newest_placements(tmp_path: Path) -> None:
    require_chromium()
    d = Daemon(tmp_path, generator_env(tmp_path / "out"))
    try:
        base = _ready(d, 3000)
        with Browser(tmp_path) as b:
            b.open(base + "/map")
            b.wait("document.body.dataset.state === 'ok' && +document.getElementById('map').dataset.points === 2000",
                   20, "2000 placements drawn")
            ds = b.evaluate(DATASET)
            assert ds["landmarks"] == "100" and ds["modelVersion"] == "1" and ds["switches"] == "0"
            assert b.evaluate("document.getElementById('version').textContent").startswith("v1 · 100 landmarks")
            ids = [p["id"] for p in b.evaluate(RENDERED) if not p["landmark"]]
            assert len(ids) == len(set(ids)) == 2000 and all(i.startswith("gen-0-") for i in ids)
            # the canvas holds what the DOM says: many coloured points in several hues, and 100 landmarks
            px = b.evaluate(CANVAS_PIXELS)
            assert px["coloured"] > 2000 * 5 and px["hues"] >= 3 and px["landmark"] > 100 * 15, px
            b.wait("+document.body.dataset.polls >= 3", 10, "three polls")  # it refreshes by polling
            b.screenshot(ARTIFACTS / "map.png")
            # colour by k0: the newest placements with an exact k0 (model.k0_rows of each batch)
            b.evaluate("const s = document.getElementById('colour'); s.value = 'k0'; "
                       "s.dispatchEvent(new Event('change'))")
            ds = b.evaluate(DATASET)
            doc = json.loads(d.get("/map.json")[1])
            assert ds["colour"] == "k0" and 0 < int(ds["points"]) <= doc["k0_sample"]["capacity"] == 2000
            assert all(v is not None for v in doc["k0_sample"]["k0"])
            _only_local(b, base)
        assert d.terminate() == 0
    finally:
        d.close()


EVIL = ['<script>document.title="pwned"</script>', '<img src=x onerror="document.title=\'pwned\'">',
        '"quoted" & <b>bold</b> </ol><li>x']


def test_hover_and_search_show_ids_as_text_even_when_they_hold_markup(tmp_path: Path) -> None:
    require_chromium()
    model = tmp_path / "model.npz"
    fitted_model().save(model)
    indir = tmp_path / "in"
    indir.mkdir()
    ids = EVIL + [f"obj-{i}" for i in range(57)]
    write_parquet(indir / "a.parquet", input_table(ids, dissimilarities(objects(60, seed=4))))
    d = Daemon(tmp_path, directory_env(indir, tmp_path / "out", model))
    try:
        base = _ready(d, 60)
        with Browser(tmp_path) as b:
            b.open(base + "/map")
            b.wait("+document.getElementById('map').dataset.points === 60", 20, "60 placements drawn")
            drawn = b.evaluate(RENDERED)
            assert sorted(p["id"] for p in drawn if not p["landmark"]) == sorted(ids)  # the exact strings, as text
            assert b.evaluate("document.title") == "streamembed map"
            assert b.evaluate(ELEMENTS) == [0, 1, 4, 60]  # nothing inserted: the page's own script and 4 <b>
            # hover the markup-holding placement farthest from any other point
            def isolation(p: dict) -> float:
                return min(math.hypot(p["x"] - q["x"], p["y"] - q["y"]) for q in drawn if q is not p)

            target = max((p for p in drawn if p["id"] in EVIL), key=isolation)
            assert isolation(target) > 3
            rect = b.evaluate("(() => { const r = document.getElementById('map').getBoundingClientRect(); "
                              "return [r.left, r.top]; })()")
            b.mouse_move(rect[0] + target["x"], rect[1] + target["y"])
            got = b.wait("!document.getElementById('tip').hidden && document.querySelector('#tip .id').textContent",
                         5, "the hover tooltip")
            assert got == target["id"]
            tip = b.evaluate("document.getElementById('tip').textContent")
            assert "relative unexplained" in tip and "k0" in tip and "flags" in tip
            assert b.evaluate("document.querySelector('#info .id').textContent") == target["id"]
            # search: an id in the sample is highlighted and described; one that is not, is said so
            b.mouse_move(5, 5)  # leave the canvas
            b.type_into("#search", EVIL[1])
            b.wait("document.getElementById('found').textContent === 'in the sample'", 5, "the search hit")
            assert b.evaluate(DATASET)["highlight"] == EVIL[1]
            assert b.evaluate("document.querySelector('#info .id').textContent") == EVIL[1]
            b.screenshot(ARTIFACTS / "map-search.png")
            b.evaluate("document.getElementById('search').value = ''")
            b.type_into("#search", "<script>not-there</script>")
            b.wait("document.getElementById('found').textContent === 'not in the sample'", 5, "the search miss")
            assert b.evaluate(DATASET)["highlight"] == ""
            # nothing ran, nothing was inserted
            assert b.evaluate("document.title") == "streamembed map"
            assert b.evaluate(ELEMENTS) == [0, 1, 4, 60]  # nothing inserted: the page's own script and 4 <b>
            _only_local(b, base)
        assert d.terminate() == 0
    finally:
        d.close()


def test_after_a_refit_the_page_shows_the_aligned_new_map_and_marks_the_switch(tmp_path: Path) -> None:
    require_chromium()
    d = Daemon(tmp_path, generator_env(tmp_path / "out"))
    try:
        base = _ready(d, 3000)  # the feature reservoir (2000 candidates) is full
        with Browser(tmp_path) as b:
            b.open(base + "/map")
            b.wait("document.getElementById('map').dataset.modelVersion === '1'", 20, "model v1 drawn")
            assert b.evaluate("document.getElementById('banner').hidden") is True
            d.proc.send_signal(signal.SIGUSR1)  # a manual refit (`streamembed refit`)
            wait_for(lambda: d.metric("streamembed_refits_total", 'trigger="manual"') == 1, 90, "the refit", d)
            b.wait("document.getElementById('map').dataset.modelVersion === '2'", 15, "model v2 drawn")
            b.wait("!document.getElementById('banner').hidden", 5, "the switch banner")
            assert "model v1 → v2" in b.evaluate("document.getElementById('banner').textContent")
            assert b.evaluate(DATASET)["previous"] == "100"  # the old landmarks, hollow
            b.wait("document.getElementById('history').textContent.includes('refit installed')", 5,
                   "the refit in the history")
            assert "map switched" in b.evaluate("document.getElementById('history').textContent")
            b.wait("+document.body.dataset.polls >= 2 && document.getElementById('rendered-ids').children.length "
                   "=== 2000", 10, "a full sample")
            b.screenshot(ARTIFACTS / "map-after-refit.png")
            _only_local(b, base)
        doc = json.loads(d.get("/map.json")[1])
        assert [(s["from"], s["to"]) for s in doc["switches"]] == [(1, 2)]
        assert doc["refits"][-1]["status"] == "installed" and doc["refits"][-1]["model_version"] == 2
        # the new map is aligned to the old: the landmarks both versions share have barely moved
        prev = doc["previous"]
        old = {i: (x, y) for i, x, y in zip(prev["id"], prev["x"], prev["y"], strict=True)}
        lms = doc["landmarks"]
        new = {i: (x, y) for i, x, y in zip(lms["id"], lms["x"], lms["y"], strict=True)}
        # (a manual refit installs the best candidate: a repair keeps most old landmarks, a redraw few or none;
        # its record says how far the old map moved, in map radii, whichever it was)
        assert doc["refits"][-1]["movement"] < 0.5, doc["refits"][-1]
        shared = sorted(set(old) & set(new))
        if len(shared) >= 3:
            moved = math.sqrt(sum(math.dist(old[i], new[i]) ** 2 for i in shared) / len(shared))
            xs = [v[0] for v in old.values()]
            spread = max(xs) - min(xs)
            assert moved < 0.05 * spread, (moved, spread)
        assert d.terminate() == 0
    finally:
        d.close()


def test_map_json_stays_bounded_under_a_fast_stream(tmp_path: Path) -> None:
    points = 300
    d = Daemon(tmp_path, generator_env(tmp_path / "out", STREAMEMBED_GENERATOR__RATE="0",
                                       STREAMEMBED_SOURCE__BATCH_ROWS="8192",
                                       STREAMEMBED_METRICS__MAP_POINTS=str(points)))
    try:
        _ready(d, 100_000)
        sizes, seen = [], []
        for _ in range(5):
            code, body = d.get("/map.json")
            assert code == 200
            doc = json.loads(body)
            sizes.append(len(body.encode()))
            seen.append(doc["objects_seen"])
            s = doc["sample"]
            assert s["count"] == points and doc["k0_sample"]["count"] == points
            # the newest rows, in order: the generator numbers its objects
            idx = [int(i.rsplit("-", 1)[1]) for i in s["id"]]
            assert idx == list(range(idx[0], idx[0] + points)) and idx[-1] == doc["objects_seen"] - 1
            time.sleep(0.6)  # past the document's cache
        assert seen == sorted(seen) and seen[-1] - seen[0] > 10_000  # the stream ran fast meanwhile
        assert max(sizes) < 1.1 * min(sizes) and max(sizes) < 2 * points * 400 + 100 * 300 + 4000, sizes
        assert d.terminate() == 0
    finally:
        d.close()


def test_no_map_when_map_points_is_zero(tmp_path: Path) -> None:
    d = Daemon(tmp_path, generator_env(tmp_path / "out", STREAMEMBED_METRICS__MAP_POINTS="0"))
    try:
        d.wait_port()
        wait_for(lambda: d.get("/readyz")[0] == 200, 30, "readiness", d)
        assert d.get("/map")[0] == 404 and d.get("/map.json")[0] == 404
        assert d.get("/healthz")[0] == 200
        assert d.terminate() == 0
    finally:
        d.close()
