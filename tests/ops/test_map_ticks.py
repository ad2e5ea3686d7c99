"""The map page's axis ticks read as numbers a person wrote: 0, 0.2, -0.4, never ``-2.776e-17`` (issue 35).

The page computed each tick by adding the step to the previous one, so -0.2 + 0.2 printed as -2.776e-17. The
tick functions are taken from ``ops/static/map.html`` itself and run in node.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from streamembed.ops.map_page import MapPage

NODE = shutil.which("node")


def _function(html: str, name: str) -> str:
    m = re.search(rf"^  function {name}\(.*?^  }}$|^  function {name}\(.*?}}$", html, flags=re.S | re.M)
    assert m, f"map.html has no function {name}"
    return m.group(0)


@pytest.mark.skipif(NODE is None, reason="node not installed")
def test_tick_labels_are_whole_multiples_of_the_step_without_round_off() -> None:
    html = MapPage.load().html.decode()
    code = "\n".join(_function(html, f) for f in ("fmt", "tickValue", "niceStep"))
    script = code + """
const out = [];
for (const [lo, hi] of [[-0.6, 0.6], [-1.3, 0.7], [-0.03, 0.03], [-250, 130], [0.1, 0.9], [-7e-4, 9e-4]]) {
  const step = niceStep(hi - lo);
  for (let k = Math.ceil(lo / step); k * step <= hi; k++) out.push(fmt(tickValue(k, step)));
}
console.log(JSON.stringify(out));
"""
    r = subprocess.run([NODE, "-e", script], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    labels = json.loads(r.stdout)
    assert "0" in labels and "-0.2" in labels and "0.2" in labels
    bad = [x for x in labels if re.search(r"e-(1\d|[2-9]\d)", x) or len(x.replace("-", "")) > 8]
    assert not bad, bad
    # the page uses them: no running sum of steps left
    assert "x += step" not in html and "y += step" not in html
