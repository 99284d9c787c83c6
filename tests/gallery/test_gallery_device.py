"""When galleries search on GPUs.  The GPU path itself needs faiss-gpu and a GPU; this
machine's FAISS is a CPU build, so these tests cover the choice and the CPU fallback."""

from __future__ import annotations

from pathlib import Path

import faiss
import pytest
from gallery_helpers import clustered, make_card, metas

from reid.errors import ConfigError
from reid.gallery import Gallery, open_gallery
from reid.gallery.device import GPU_ENV, GpuSupport, detect_gpus, use_gpu

NO_BUILD = GpuSupport(build=False, devices=0)
NO_DEVICE = GpuSupport(build=True, devices=0)
TWO_GPUS = GpuSupport(build=True, devices=2)


@pytest.mark.parametrize("setting", [None, "", "auto", "AUTO "])
def test_auto_uses_gpus_exactly_when_faiss_can(setting: str | None) -> None:
    assert use_gpu(setting, TWO_GPUS)
    assert not use_gpu(setting, NO_DEVICE)
    assert not use_gpu(setting, NO_BUILD)


@pytest.mark.parametrize("setting", ["0", "off", "no", "false"])
def test_off_keeps_search_on_the_cpu(setting: str) -> None:
    assert not use_gpu(setting, TWO_GPUS)
    assert not use_gpu(setting, NO_BUILD)


def test_on_insists_and_says_why_it_cannot() -> None:
    assert use_gpu("1", TWO_GPUS) and use_gpu("on", TWO_GPUS)
    with pytest.raises(ConfigError, match=rf"{GPU_ENV}=1: this FAISS has no GPU support \(install faiss-gpu\)"):
        use_gpu("1", NO_BUILD)
    with pytest.raises(ConfigError, match=rf"{GPU_ENV}=on: FAISS sees no GPU"):
        use_gpu("on", NO_DEVICE)
    with pytest.raises(ConfigError, match=r"choose auto, 1 .* or 0"):
        use_gpu("maybe", TWO_GPUS)


def test_this_faiss_is_seen_as_it_is() -> None:
    support = detect_gpus()
    assert support.build == hasattr(faiss, "StandardGpuResources")
    assert support.devices == (faiss.get_num_gpus() if support.build else 0)


def test_galleries_follow_the_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vectors, labels, centres = clustered(10, 4)
    folder = tmp_path / "g"
    with Gallery.create(folder, make_card(), gpu="0") as gallery:
        gallery.add(vectors, metas(labels))
        assert gallery.info().search_device == "cpu"
    monkeypatch.setenv(GPU_ENV, "0")
    with open_gallery(folder) as gallery:
        assert gallery.info().search_device == "cpu"
        assert gallery.search(centres[2], k=1)[0][0].identity == "id0002"
    if not detect_gpus().devices:
        monkeypatch.setenv(GPU_ENV, "1")
        with pytest.raises(ConfigError, match=GPU_ENV):
            Gallery.open(folder)
        # An explicit argument wins over the environment.
        with open_gallery(folder, gpu="auto") as gallery:
            assert gallery.info().search_device == "cpu"
