"""The web page in a real browser: headless Chromium (Debian's chromium and chromium-driver,
driven by Selenium) against a real uvicorn on loopback: enter a key, enrol a person from
two photos, search and see the match and the unknown, delete with the confirmation."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from serve_helpers import Served, bearer, files, serve_root, store_legacy, uvicorn_in_thread

from reid.gallery import Gallery
from reid.models import Encoder
from reid.pipeline.synthetic import street_frames

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ready  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

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
