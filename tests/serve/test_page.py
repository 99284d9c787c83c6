"""The web page in a real browser: headless Chromium (Debian's chromium and chromium-driver,
driven by Selenium) against a real uvicorn on loopback: enter a key, enrol a person from
two photos, search and see the match and the unknown, delete with the confirmation; and each
flow of the page (first screen, connect, search a scene, the server's refusals, enrol and
counts, the admin's galleries, keys and watches) with screenshots at 1280x900 and 390x844
in $REID_PAGE_SCREENSHOTS (else the test's folder) for a person to look at."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image
from serve_helpers import ADMIN, Served, bearer, files, serve_root, store_legacy, uvicorn_in_thread

from reid.gallery import Gallery
from reid.models import Encoder
from reid.pipeline.synthetic import street_frames

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ready  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


@pytest.fixture
def browser() -> Iterator:  # type: ignore[type-arg]
    if CHROMIUM is None or DRIVER is None:
        pytest.skip("Chromium and chromedriver are not installed (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_enter_a_key_enrol_search_and_delete(browser, served: Served, crops: dict[str, list[Path]]) -> None:  # type: ignore[no-untyped-def]
    known, stranger = list(crops)[:2]
    wait = WebDriverWait(browser, 60)
    with uvicorn_in_thread(served.service) as url:
        browser.get(url + "/")
        browser.find_element(By.ID, "key").send_keys(served.keys["both"])
        browser.find_element(By.CSS_SELECTOR, "#connect button").click()
        wait.until(ready.text_to_be_present_in_element((By.ID, "status"), "connected"))
        assert browser.find_element(By.ID, "gallery").get_attribute("value") == "staff"

        browser.find_element(By.CSS_SELECTOR, "nav button[data-tab=enrol]").click()
        browser.find_element(By.ID, "enrol-identity").send_keys("Alice <b>")
        browser.find_element(By.ID, "enrol-files").send_keys("\n".join(str(p) for p in crops[known][:2]))
        browser.find_element(By.CSS_SELECTOR, "#enrol-form button").click()
        wait.until(ready.text_to_be_present_in_element((By.ID, "enrol-status"), "enrolled 2 of 2"))
        outcomes = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#enrol-outcome td.outcome")]
        assert outcomes == ["added", "added"]

        browser.find_element(By.CSS_SELECTOR, "nav button[data-tab=search]").click()
        browser.find_element(By.ID, "search-file").send_keys(str(crops[known][0]))
        wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "#search-subjects .subject")))
        assert browser.find_element(By.CSS_SELECTOR, "#search-subjects .known").text == "Alice <b>"
        # The match's thumbnail came from the gallery, through the key.
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#search-subjects img.thumb").get_attribute("src").startswith("blob:"))
        assert "given" in browser.find_element(By.ID, "search-threshold").text

        browser.find_element(By.ID, "search-file").send_keys(str(crops[stranger][0]))
        wait.until(ready.text_to_be_present_in_element((By.ID, "search-status"), "searched " + crops[stranger][0].name))
        wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "#search-subjects .unknown")))
        assert browser.find_element(By.CSS_SELECTOR, "#search-subjects .unknown").text == "unknown"

        browser.find_element(By.CSS_SELECTOR, "nav button[data-tab=people]").click()
        entry = wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "#people-list li")))
        assert entry.find_element(By.CSS_SELECTOR, ".name").text == "Alice <b>"
        entry.find_element(By.CSS_SELECTOR, "button.delete").click()
        alert = wait.until(ready.alert_is_present())
        assert "Delete Alice <b>" in alert.text
        alert.accept()
        wait.until(ready.text_to_be_present_in_element((By.ID, "people-status"), "deleted Alice <b> (2 photos)"))
        assert browser.find_elements(By.CSS_SELECTOR, "#people-list li") == []
    gone = served.client.get("/v1/galleries/staff/identities/Alice <b>", headers=served.key("read"))
    assert gone.status_code == 404


def test_the_page_refuses_a_wrong_key(browser, served: Served) -> None:  # type: ignore[no-untyped-def]
    with uvicorn_in_thread(served.service) as url:
        browser.get(url + "/")
        browser.find_element(By.ID, "key").send_keys("not-a-key")
        browser.find_element(By.CSS_SELECTOR, "#connect button").click()
        WebDriverWait(browser, 30).until(ready.text_to_be_present_in_element((By.ID, "status"), "401"))
        assert "error" in browser.find_element(By.ID, "status").get_attribute("class")


def test_the_page_deletes_a_person_named_dot_dot_and_only_them(browser, served: Served, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A label stored before the naming rule: the page addresses people by id, so deleting
    ".." deletes that person, never the gallery (a browser normalises .../identities/..)."""
    store_legacy(served.root / "staff", monkeypatch, ["..", ".", "\u200b", "bob"])
    wait = WebDriverWait(browser, 60)
    with uvicorn_in_thread(served.service) as url:
        browser.get(url + "/")
        browser.find_element(By.ID, "key").send_keys(served.keys["both"])
        browser.find_element(By.CSS_SELECTOR, "#connect button").click()
        wait.until(ready.text_to_be_present_in_element((By.ID, "status"), "connected"))
        browser.find_element(By.CSS_SELECTOR, "nav button[data-tab=people]").click()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#people-list li")) == 4)
        # An invisible name is shown as its escape.
        for label in ("..", ".", "\\u200b"):
            entry = next(
                li for li in browser.find_elements(By.CSS_SELECTOR, "#people-list li")
                if li.find_element(By.CSS_SELECTOR, ".name").text == label
            )  # fmt: skip
            entry.find_element(By.CSS_SELECTOR, "button.delete").click()
            wait.until(ready.alert_is_present()).accept()
            wait.until(ready.text_to_be_present_in_element((By.ID, "people-status"), f"deleted {label} (1 photos)"))
    with Gallery.open(served.root / "staff") as gallery:
        assert [s.identity for s in gallery.identities()] == ["bob"]


def test_the_page_draws_each_label_where_the_answer_lays_it_out(  # type: ignore[no-untyped-def]
    browser, tmp_path: Path, model_folder: Path, encoder: Encoder
) -> None:
    """A street photo of two walkers: the canvas shows each label's fill inside the label
    rectangle the answer gave (reid.draw's layout, as in the annotated video); the page is
    written as a PNG ($REID_DRAW_PICTURES, else the test's folder) for a person to look at."""
    frame, _ = next(street_frames(1, seed=5))
    photo = tmp_path / "street.png"
    Image.fromarray(frame).save(photo)
    service, client = serve_root(
        tmp_path / "root", model_folder, encoder, galleries={"street": {"detect": "person", "detector": "hog"}}
    )
    served = Served(tmp_path / "root", service, client, {})
    served.create("street")
    key = served.new_key("street", "read")
    wait = WebDriverWait(browser, 60)
    with uvicorn_in_thread(served.service) as url:
        browser.get(url + "/")
        browser.find_element(By.ID, "key").send_keys(key)
        browser.find_element(By.CSS_SELECTOR, "#connect button").click()
        wait.until(ready.text_to_be_present_in_element((By.ID, "status"), "connected"))
        browser.find_element(By.ID, "search-file").send_keys(str(photo))
        wait.until(ready.text_to_be_present_in_element((By.ID, "search-status"), "searched street.png"))
        folder = Path(os.environ.get("REID_DRAW_PICTURES") or tmp_path)
        folder.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(folder / "page_search_street.png"))
        pixels = "const [x, y, w, h] = arguments; return Array.from(document.getElementById('search-canvas')" \
                 ".getContext('2d').getImageData(x, y, w, h).data);"  # fmt: skip
        answer = client.post("/v1/galleries/street/search", files=files([photo], "image"), headers=bearer(key)).json()
        labels = [s["label"] for s in answer["subjects"]]
        assert len(labels) == 2 and None not in labels
        for label in labels:
            x, y, w, h = label["rect"]
            expected = [int(label["fill"][i : i + 2], 16) for i in (1, 3, 5)]
            # Inside the label's 1-pixel border most pixels are its fill (the letters are thin).
            inside = np.array(browser.execute_script(pixels, x + 1, y + 1, w - 2, h - 2)).reshape(-1, 4)[:, :3]
            assert np.abs(np.median(inside, axis=0) - expected).max() <= 8, (label, np.median(inside, axis=0))


# ---------------------------------------------------------------- each flow, with screenshots

SIZES = ((1280, 900), (390, 844))
# The elements that reach past the viewport's right edge, for the failure's message.
WIDE = """return Array.from(document.querySelectorAll('body *')).filter((e) => e.getBoundingClientRect().right > arguments[0])
  .slice(0, 8).map((e) => e.tagName + '#' + e.id + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));"""


def shots_folder(tmp_path: Path) -> Path:
    """Where the flows' screenshots go: $REID_PAGE_SCREENSHOTS, else the test's folder."""
    folder = Path(os.environ.get("REID_PAGE_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def shoot(browser, folder: Path, name: str) -> None:  # type: ignore[no-untyped-def]
    """``page_<name>_<w>x<h>.png`` at a desktop and a phone viewport; at each, nothing is
    wider than the viewport (no sideways scrolling)."""
    for width, height in SIZES:
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600}
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        overflow = browser.execute_script("return document.documentElement.scrollWidth")
        assert overflow <= width, (name, width, browser.execute_script(WIDE, width))
        path = folder / f"page_{name}_{width}x{height}.png"
        browser.save_screenshot(str(path))
        assert Image.open(path).size == (width, height)
    browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def connect(browser, wait, key: str) -> None:  # type: ignore[no-untyped-def]
    browser.find_element(By.ID, "key").send_keys(key)
    browser.find_element(By.CSS_SELECTOR, "#connect button[type=submit]").click()
    wait.until(ready.text_to_be_present_in_element((By.ID, "status"), "connected"))


def street_photo(folder: Path, seed: int = 5, name: str = "street.png") -> Path:
    frame, _ = next(street_frames(1, seed=seed))
    path = folder / name
    Image.fromarray(frame).save(path)
    return path


@pytest.fixture
def street(tmp_path: Path, model_folder: Path, encoder: Encoder) -> Served:
    """Gallery "street" finds each person (HOG), "staff" takes photos whole (the default),
    a synthetic video the admin may watch, and a read key of "street"."""
    video = tmp_path / "walk.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 10, (480, 360))
    for frame, _ in street_frames(12, seed=2):
        writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    writer.release()
    service, client = serve_root(
        tmp_path / "root", model_folder, encoder, watch_files=[str(video)],
        galleries={"street": {"detect": "person", "detector": "hog"}},
    )  # fmt: skip
    served = Served(tmp_path / "root", service, client, {})
    served.create("street")
    served.create("staff")
    served.keys = {"street": served.new_key("street", "read"), "staff": served.new_key("staff", "read", "write")}
    return served


def test_first_screen_asks_for_a_key_then_searches_the_photo_chosen_before(browser, street: Served, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The empty state says a key is needed; a photo chosen before connecting is explained,
    kept, and searched once connected: a street scene gives each person; the key is kept
    for the tab only (nothing in localStorage unless "remember" is ticked)."""
    folder, photo = shots_folder(tmp_path), street_photo(tmp_path)
    wait = WebDriverWait(browser, 60)
    with uvicorn_in_thread(street.service) as url:
        browser.get(url + "/")
        welcome = browser.find_element(By.ID, "welcome")
        assert welcome.is_displayed() and "key" in welcome.text
        assert browser.find_element(By.LINK_TEXT, "API docs").get_attribute("href") == url + "/docs"
        assert browser.execute_script("return document.querySelector('link[rel=icon]').href").endswith("favicon.svg")
        shoot(browser, folder, "first_screen")

        browser.find_element(By.ID, "search-file").send_keys(str(photo))
        status = browser.find_element(By.ID, "search-status")
        assert "connect first" in status.text and "error" in status.get_attribute("class")
        shoot(browser, folder, "photo_before_key")

        connect(browser, wait, street.keys["street"])
        wait.until(ready.text_to_be_present_in_element((By.ID, "search-status"), "searched street.png"))
        assert not welcome.is_displayed()
        assert len(browser.find_elements(By.CSS_SELECTOR, "#search-subjects .subject")) >= 2
        assert "person (hog)" in browser.find_element(By.ID, "search-mode").text
        # A gallery key: no Admin tab.
        assert not browser.find_element(By.CSS_SELECTOR, "#tabs button[data-tab=admin]").is_displayed()
        stored = browser.execute_script("return [sessionStorage.getItem('reid-key'), localStorage.getItem('reid-key')]")
        assert stored == [street.keys["street"], None]
        shoot(browser, folder, "search_person_scene")


def test_the_server_words_every_refusal_and_the_page_shows_them(browser, street: Served, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An unreadable file is sent, not decoded first: the tab shows the server's 422 line;
    a PGM, which the browser cannot show, is searched by the server all the same."""
    folder = shots_folder(tmp_path)
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"this is not a picture")
    face = tmp_path / "face.pgm"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (112, 92), dtype=np.uint8)).save(face)
    expected = street.client.post(
        "/v1/galleries/staff/search", files=files([broken], "image"), headers=street.key("staff")
    ).json()["error"]["message"]
    wait = WebDriverWait(browser, 60)
    with uvicorn_in_thread(street.service) as url:
        browser.get(url + "/")
        connect(browser, wait, street.keys["staff"])
        # A person model taking photos whole says so, and why, before any search.
        assert "takes each photo whole" in browser.find_element(By.ID, "search-mode").text
        browser.find_element(By.ID, "search-file").send_keys(str(broken))
        wait.until(ready.text_to_be_present_in_element((By.ID, "search-status"), "422"))
        status = browser.find_element(By.ID, "search-status")
        assert status.text == f"422: {expected}" and "broken.jpg" in expected and "error" in status.get_attribute("class")
        assert browser.find_elements(By.CSS_SELECTOR, "#search-subjects li") == []
        shoot(browser, folder, "server_error")

        browser.find_element(By.ID, "search-file").send_keys(str(face))
        wait.until(ready.text_to_be_present_in_element((By.ID, "search-status"), "searched face.pgm: 1 subject"))
        assert "cannot show" in browser.find_element(By.ID, "search-status").text
        assert not browser.find_element(By.ID, "search-figure").is_displayed()


def test_enrolment_refreshes_the_counts(browser, street: Served, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = shots_folder(tmp_path)
    photos = [street_photo(tmp_path, seed, f"walk{seed}.png") for seed in (11, 12)]
    wait = WebDriverWait(browser, 60)
    with uvicorn_in_thread(street.service) as url:
        browser.get(url + "/")
        connect(browser, wait, street.keys["staff"])
        option = browser.find_element(By.CSS_SELECTOR, "#gallery option")
        assert option.text == "staff (0 people, 0 photos)"
        browser.find_element(By.CSS_SELECTOR, "#tabs button[data-tab=enrol]").click()
        browser.find_element(By.ID, "enrol-identity").send_keys("Alice")
        browser.find_element(By.ID, "enrol-files").send_keys("\n".join(str(p) for p in photos))
        browser.find_element(By.CSS_SELECTOR, "#enrol-form button").click()
        wait.until(ready.text_to_be_present_in_element((By.ID, "enrol-status"), "enrolled 2 of 2 photos of Alice"))
        wait.until(ready.text_to_be_present_in_element((By.CSS_SELECTOR, "#gallery option"), "staff (1 person, 2 photos)"))
        # Each tab keeps its own status line.
        assert browser.find_element(By.ID, "search-status").text == ""
        shoot(browser, folder, "enrol")
        browser.find_element(By.CSS_SELECTOR, "#tabs button[data-tab=people]").click()
        wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "#people-list li .name")))
        shoot(browser, folder, "people")


def test_the_admin_makes_a_gallery_a_key_and_a_watch(browser, street: Served, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = shots_folder(tmp_path)
    video = str(tmp_path / "walk.avi")
    wait = WebDriverWait(browser, 60)
    with uvicorn_in_thread(street.service) as url:
        browser.get(url + "/")
        connect(browser, wait, ADMIN)
        tab = browser.find_element(By.CSS_SELECTOR, "#tabs button[data-tab=admin]")
        assert tab.is_displayed()
        tab.click()
        browser.find_element(By.ID, "new-gallery").send_keys("lobby")
        browser.find_element(By.CSS_SELECTOR, "#gallery-form button").click()
        wait.until(ready.text_to_be_present_in_element((By.ID, "admin-status"), "created gallery lobby (model m)"))
        wait.until(ready.text_to_be_present_in_element((By.ID, "gallery"), "lobby (0 people, 0 photos)"))

        Select(browser.find_element(By.ID, "new-key-gallery")).select_by_value("lobby")
        browser.find_element(By.ID, "new-key-write").click()
        browser.find_element(By.CSS_SELECTOR, "#key-form button").click()
        wait.until(ready.text_to_be_present_in_element((By.ID, "admin-status"), "created key"))
        token = browser.find_element(By.CSS_SELECTOR, "#new-key code").text
        assert street.client.get("/v1/galleries/lobby", headers=bearer(token)).status_code == 200
        rows = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#admin-keys tbody tr")]
        assert any("lobby" in row and "read, write" in row for row in rows)

        Select(browser.find_element(By.ID, "new-watch-gallery")).select_by_value("lobby")
        browser.find_element(By.ID, "new-watch-source").send_keys(video)
        browser.find_element(By.ID, "new-watch-frames").send_keys("5")
        browser.find_element(By.CSS_SELECTOR, "#watch-form button").click()
        wait.until(ready.text_to_be_present_in_element((By.ID, "admin-status"), "started watch"))
        shoot(browser, folder, "admin")
        # A source the settings do not allow: the server's words.
        browser.find_element(By.ID, "new-watch-source").clear()
        browser.find_element(By.ID, "new-watch-source").send_keys(str(tmp_path / "elsewhere.avi"))
        browser.find_element(By.CSS_SELECTOR, "#watch-form button").click()
        wait.until(ready.text_to_be_present_in_element((By.ID, "admin-status"), "422"))
        browser.find_element(By.CSS_SELECTOR, "#tabs button[data-tab=watches]").click()
        wait.until(ready.text_to_be_present_in_element((By.ID, "watches-list"), "lobby: "))
        shoot(browser, folder, "watches")
    assert [w.gallery for w in street.service.watches.list()] == ["lobby"]
