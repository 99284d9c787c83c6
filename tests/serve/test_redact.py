"""The one redaction of server paths: known paths become what a client is told, any other
absolute path its last part; words, URLs and relative paths stay as they are."""

from __future__ import annotations

from reid.serve.redact import hide_paths


def test_known_paths_first_then_every_absolute_path_cut_to_its_name() -> None:
    known = {"/srv/reid/galleries/": "", "/srv/reid/galleries": "the galleries' root", "/etc/reid/keys.json": "the keys file"}
    line = "/srv/reid/galleries/staff/gallery.db: locked; /etc/reid/keys.json: no key; (/opt/models/m/card.json) '/home/x/a.jpg'"
    assert hide_paths(line, known) == "staff/gallery.db: locked; the keys file: no key; (card.json) 'a.jpg'"
    assert hide_paths("cannot create /srv/reid/galleries", known) == "cannot create the galleries' root"


def test_words_urls_and_relative_paths_stay() -> None:
    for text in (
        "send multipart/form-data or application/json", "read/write", "rtsp://10.0.0.5:554/live", "videos/a.mp4",
        "gallery name '../etc'", "1/2 of the galleries", "a%2Fb",
    ):  # fmt: skip
        assert hide_paths(text) == text
    assert hide_paths("no such file /") == "no such file /"
