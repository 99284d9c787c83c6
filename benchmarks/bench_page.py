"""The web page in headless Chromium against a real uvicorn on loopback, in one run:

1. the page's first paint: first contentful paint and largest contentful paint (Chromium's
   paint timing; "first meaningful paint" is no longer reported by Chromium) and the load
   event, over ``--loads`` fresh loads;
2. a search round trip from the page on a 768x576 street scene (gallery with ``detect:
   person``): from the file input's change to the drawn answer, beside the same search
   over HTTP (httpx) and called in process (``Service.search``); the ratios say what the
   page and the HTTP layer add.

Run: ``python benchmarks/bench_page.py`` (an untrained stand-in model; Chromium and
chromedriver from the system, selenium from the dev extra).
"""

from __future__ import annotations

import argparse
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import uvicorn
from PIL import Image

from reid.models import load_encoder, stand_in_model
from reid.pipeline.synthetic import street_frames
from reid.serve import AdminKey, KeyStore, Service, Upload, create_app, crop_rules, load_serve_config
from reid.serve.run import uvicorn_options

ADMIN = "bench-admin-key-0123456789abcdef"
# Seconds between two measured searches (a small machine finishes the last one's work).
SETTLE = 0.5
PAINTS = """
const done = arguments[arguments.length - 1];
new PerformanceObserver((list) => {
  const entries = list.getEntries();
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  const nav = performance.getEntriesByType('navigation')[0];
  done([fcp ? fcp.startTime : null, entries[entries.length - 1].startTime, nav.loadEventEnd]);
}).observe({type: 'largest-contentful-paint', buffered: true});
"""
ROUND_TRIP = """
window.roundTrip = null;
const input = document.getElementById('search-file');
input.addEventListener('change', () => { window.started = performance.now(); }, {once: true});
const status = document.getElementById('search-status');
const watch = new MutationObserver(() => {
  if (status.textContent.startsWith('searched') && window.started) {
    window.roundTrip = performance.now() - window.started;
    watch.disconnect();
  }
});
watch.observe(status, {childList: true, characterData: true, subtree: true});
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stats(ms: list[float]) -> str:
    return f"median {np.median(ms):7.1f} ms  (min {min(ms):.1f}, max {max(ms):.1f}, n={len(ms)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", type=int, default=10)
    parser.add_argument("--searches", type=int, default=10)
    args = parser.parse_args()
    chromium, driver_path = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        raise SystemExit("Chromium and chromedriver are not installed; nothing measured")
    from selenium import webdriver

    work = Path(tempfile.mkdtemp(prefix="bench-page-"))
    model = stand_in_model(work / "m", "person", name="untrained-stand-in", embedding_dim=64, input_size=(64, 32), threshold=0.3)
    encoder = load_encoder(model, device="cpu")
    config = load_serve_config(None, root=str(work / "root"), models={"m": str(model)},
                               galleries={"street": {"detect": "person", "detector": "hog"}})  # fmt: skip
    (work / "root").mkdir()
    models = {"m": encoder}
    service = Service(config, models, crop_rules(config, models), KeyStore(config.keys_path), AdminKey(ADMIN, "bench"))
    frame, _ = next(street_frames(1, size=(768, 576), seed=5))
    photos = [work / f"scene{n}.jpg" for n in range(2)]
    for photo in photos:
        Image.fromarray(frame).save(photo, quality=90)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(service), host="127.0.0.1", port=port, log_config=None,
                                           access_log=False, **uvicorn_options()))  # fmt: skip
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    admin = {"Authorization": f"Bearer {ADMIN}"}
    httpx.post(f"{url}/v1/galleries", json={"name": "street"}, headers=admin).raise_for_status()
    key = httpx.post(f"{url}/v1/keys", json={"gallery": "street", "scopes": ["read"]}, headers=admin).json()["key"]

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900"):
        options.add_argument(flag)
    browser = webdriver.Chrome(service=webdriver.ChromeService(executable_path=driver_path), options=options)
    browser.set_script_timeout(30)
    try:
        fcp, lcp, load = [], [], []
        for _ in range(args.loads):
            browser.get("about:blank")
            browser.get(url + "/")
            first, largest, loaded = browser.execute_async_script(PAINTS)
            fcp.append(first)
            lcp.append(largest)
            load.append(loaded)
        print(f"page load ({args.loads} fresh loads, 1280x900, loopback)")
        print(f"  first contentful paint   {stats(fcp)}")
        print(f"  largest contentful paint {stats(lcp)}")
        print(f"  load event end           {stats(load)}")

        browser.find_element("id", "key").send_keys(key)
        browser.find_element("css selector", "#connect button[type=submit]").click()
        while "connected" not in browser.find_element("id", "status").text:
            time.sleep(0.05)
        # Interleaved, one of each in turn: the three see the same load on the machine.
        data = photos[0].read_bytes()
        page, over_http, in_process, subjects = [], [], [], 0
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
            for n in range(args.searches + 1):
                browser.execute_script(ROUND_TRIP)
                browser.find_element("id", "search-file").send_keys(str(photos[n % 2]))
                deadline = time.monotonic() + 60
                while (took := browser.execute_script("return window.roundTrip")) is None and time.monotonic() < deadline:
                    time.sleep(0.01)
                if took is None:
                    status = browser.find_element("id", "search-status").text
                    raise SystemExit(f"the page did not answer a search in 60 s (its status: {status!r})")
                subjects = len(browser.find_elements("css selector", "#search-subjects .subject"))
                # The browser goes on painting the answer after its status line: let it settle.
                time.sleep(SETTLE)
                tick = time.perf_counter()
                client.post("/v1/galleries/street/search", files={"image": ("scene.jpg", data, "image/jpeg")}).raise_for_status()
                http_ms = (time.perf_counter() - tick) * 1000
                time.sleep(SETTLE)
                tick = time.perf_counter()
                service.search("street", Upload("scene.jpg", data))
                local_ms = (time.perf_counter() - tick) * 1000
                time.sleep(SETTLE)
                if n:  # the first of each warms up
                    page.append(took)
                    over_http.append(http_ms)
                    in_process.append(local_ms)
        print(f"\nsearch of a 768x576 street scene (JPEG, {len(data)} bytes; {subjects} people found, HOG)")
        print(f"  page round trip (change to drawn answer) {stats(page)}")
        print(f"  over HTTP (httpx)                        {stats(over_http)}")
        print(f"  in process (Service.search)              {stats(in_process)}")
        print(f"  ratio page / in process: {np.median(page) / np.median(in_process):.2f}; "
              f"HTTP / in process: {np.median(over_http) / np.median(in_process):.2f}")  # fmt: skip
    finally:
        browser.quit()
        server.should_exit = True


if __name__ == "__main__":
    main()
