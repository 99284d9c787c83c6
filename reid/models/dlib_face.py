"""A ready-made face encoder: dlib's ResNet face descriptor (128-d), ``--model dlib-face``.

Each image goes through dlib's own pipeline: its HOG frontal face detector (the largest
face is the subject), its 5-point landmark model, alignment to a 150x150 chip with
``dlib.get_face_chip`` (padding 0.25), and the ResNet descriptor.  The weights come from
the ``face-recognition-models`` package (CC0) and dlib from ``dlib-bin``: ``reid-toolkit[dlib]``.

**Distances and threshold.**  dlib's descriptors are not unit vectors: their norm is about
1.418 (median over the 397 ORL faces its detector finds, spread 1.25-1.57).  The Encoder
contract wants unit rows, so they are L2-normalized like every other encoder's, and every
distance reid reports for this model is the Euclidean distance between normalized
descriptors, the same distance as for every other model.  dlib's authors recommend 0.6 on
the raw descriptors' distance; since both descriptors of a pair have about the same norm
n, the raw distance is about n times the normalized one, so the card carries 0.6 / 1.418 =
0.4231 on the normalized distance until ``reid calibrate`` sets another.
``benchmarks/bench_dlib_orl.py`` measures the norms and both distances on ORL.

**No face, no embedding.**  When the detector finds no face, even after upsampling the
image (up to twice, each doubling its size, as long as it stays under ``max_pixels``),
``embed`` raises DataError saying which image of the batch it was; it never guesses a box.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from reid.errors import ModelError
from reid.models.card import ModelCard, file_fingerprint, ready_made_card, seal_card
from reid.models.encoder import l2_normalize
from reid.models.face_encoder import FaceEncoder
from reid.models.names import DLIB_FACE

DLIB_EXTRA = 'pip install "reid-toolkit[dlib]"'
MODELS_PACKAGE = "face_recognition_models"
LANDMARKS_FILE = "shape_predictor_5_face_landmarks.dat"
DESCRIPTOR_FILE = "dlib_face_recognition_resnet_model_v1.dat"
EMBEDDING_DIM = 128
CHIP_SIZE = 150
CHIP_PADDING = 0.25
AUTHORS_THRESHOLD = 0.6
MEDIAN_DESCRIPTOR_NORM = 1.418
THRESHOLD = round(AUTHORS_THRESHOLD / MEDIAN_DESCRIPTOR_NORM, 4)
THRESHOLD_SOURCE = (
    f"dlib's recommended {AUTHORS_THRESHOLD} on raw descriptor distance, divided by the median descriptor "
    f"norm {MEDIAN_DESCRIPTOR_NORM} (measured on ORL): Euclidean distance between L2-normalized descriptors"
)
# (rate, distance) over the 78,000 impostor pairs of the 400 ORL photos, as printed by
# ``python benchmarks/bench_faces.py --calibrate``: what --far and the far-looser note read.
IMPOSTOR_QUANTILES = (
    (1.0, 0.753697), (0.99, 0.670286), (0.95, 0.629049), (0.9, 0.606576),
    (0.8, 0.580357), (0.7, 0.561389), (0.6, 0.546083), (0.56234132519, 0.540775),
    (0.5, 0.53216), (0.4, 0.518659), (0.316227766017, 0.50697), (0.3, 0.504643),
    (0.2, 0.487692), (0.177827941004, 0.483156), (0.1, 0.464229), (0.056234132519, 0.447889),
    (0.031622776602, 0.432371), (0.0177827941, 0.418888), (0.01, 0.407134), (0.005623413252, 0.394799),
    (0.00316227766, 0.383942), (0.00177827941, 0.373953), (0.001, 0.366367), (0.000562341325, 0.357943),
    (0.000316227766, 0.35286), (0.000177827941, 0.349248), (0.0001, 0.342849), (5.6234133e-05, 0.340644),
    (3.1622777e-05, 0.339417), (1.7782794e-05, 0.338484),
)
DEFAULT_MAX_UPSAMPLE = 2
DEFAULT_MAX_PIXELS = 4_000_000


def _import_dlib() -> Any:
    try:
        import dlib
    except ImportError:
        raise ModelError(f"{DLIB_FACE}: dlib is not installed: {DLIB_EXTRA}") from None
    return dlib


def model_files() -> tuple[Path, Path]:
    """The landmark and descriptor files shipped by face-recognition-models.

    The package is located without importing it: its ``__init__`` needs pkg_resources,
    which recent Python environments no longer carry.
    """
    spec = importlib.util.find_spec(MODELS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"{DLIB_FACE}: face-recognition-models (dlib's weights) is not installed: {DLIB_EXTRA}")
    folder = Path(next(iter(spec.submodule_search_locations))) / "models"
    files = (folder / LANDMARKS_FILE, folder / DESCRIPTOR_FILE)
    for path in files:
        if not path.is_file():
            raise ModelError(f"{path}: dlib model file missing; reinstall face-recognition-models ({DLIB_EXTRA})")
    return files


def models_fingerprint(files: Sequence[Path]) -> str:
    """One fingerprint for the landmark and descriptor weights together."""
    joined = "+".join(file_fingerprint(path) for path in files)
    return hashlib.sha256(joined.encode()).hexdigest()[:16]


def dlib_face_card(fingerprint: str) -> ModelCard:
    """The built-in card of ``dlib-face``, sealed for the weights whose fingerprint is ``fingerprint``."""
    card = ModelCard(
        name=DLIB_FACE,
        architecture="dlib_face_recognition_resnet_model_v1",
        embedding_dim=EMBEDDING_DIM,
        input_size=(CHIP_SIZE, CHIP_SIZE),
        mean=(0.0, 0.0, 0.0),
        std=(1.0, 1.0, 1.0),
        neck="none",
        pretrained="face-recognition-models (CC0): dlib's ResNet face descriptor by Davis King",
        kind="face",
        training_data={"source": "about 3 million faces (dlib's authors)"},
        training={
            "preprocessing": (
                f"dlib HOG face detector, 5-point landmarks, dlib.get_face_chip {CHIP_SIZE}x{CHIP_SIZE} "
                f"padding {CHIP_PADDING}; mean and std on this card are unused"
            )
        },
        metrics={"lfw_accuracy_reported_by_authors": 0.9938},
        threshold=THRESHOLD,
        threshold_source=THRESHOLD_SOURCE,
        impostor_quantiles=IMPOSTOR_QUANTILES,
        format="dlib",
        normalized_output=False,
    )
    return seal_card(card, fingerprint)


class DlibFaceEncoder(FaceEncoder):
    """dlib's face detector, 5-point alignment and ResNet descriptor behind the Encoder contract.

    ``card`` replaces the built-in card (a calibrated one from a model folder); it must
    describe the installed weights.  ``max_upsample`` and ``max_pixels`` bound how far a
    photo is enlarged to find small faces.
    """

    chip_size = (CHIP_SIZE, CHIP_SIZE)

    def __init__(
        self,
        card: ModelCard | None = None,
        max_upsample: int = DEFAULT_MAX_UPSAMPLE,
        max_pixels: int = DEFAULT_MAX_PIXELS,
    ) -> None:
        dlib = _import_dlib()
        landmarks, descriptor = model_files()
        fingerprint = models_fingerprint((landmarks, descriptor))
        self.card = ready_made_card(
            card,
            fingerprint,
            dlib_face_card,
            lambda c: None if c.format == "dlib" and c.embedding_dim == EMBEDDING_DIM
            else f"{DLIB_FACE} (format {c.format!r})",
            "the installed dlib weights",
        )
        self.max_upsample = max_upsample
        self.max_pixels = max_pixels
        self._dlib = dlib
        self._detector = dlib.get_frontal_face_detector()
        self._landmarks = dlib.shape_predictor(str(landmarks))
        self._descriptor = dlib.face_recognition_model_v1(str(descriptor))

    def find_face(self, image: np.ndarray) -> Any:
        """The largest face (a dlib rectangle) of an RGB uint8 image at the first upsampling level that finds one, or None."""
        pixels = image.shape[0] * image.shape[1]
        for upsample in range(self.max_upsample + 1):
            if upsample and pixels * 4**upsample > self.max_pixels:
                break
            found = self._detector(image, upsample)
            if len(found):
                # A face photo's subject is its largest face; bystanders are smaller.
                return max(found, key=lambda rect: rect.area())
        return None

    def no_face_reason(self) -> str:
        return f"no face found by dlib's HOG detector (upsampled up to {self.max_upsample} times)"

    def chip_of(self, image: np.ndarray, face: Any) -> np.ndarray:
        """The aligned 150x150 chip of ``face`` (from :meth:`find_face`) in ``image``."""
        shape = self._landmarks(image, face)
        return self._dlib.get_face_chip(image, shape, size=CHIP_SIZE, padding=CHIP_PADDING)

    def raw_descriptors(self, chips: Sequence[np.ndarray]) -> np.ndarray:
        """dlib's descriptors of chips from :meth:`face_chip` as it returns them (not unit norm)."""
        if len(chips) == 0:
            return np.zeros((0, EMBEDDING_DIM), dtype=np.float64)
        raw = self._descriptor.compute_face_descriptor([np.ascontiguousarray(chip) for chip in chips])
        return np.asarray([np.asarray(row) for row in raw], dtype=np.float64).reshape(len(chips), EMBEDDING_DIM)

    def embed_chips(self, chips: Sequence[np.ndarray]) -> np.ndarray:
        """Unit-norm descriptors of chips from :meth:`face_chip`."""
        return l2_normalize(self.raw_descriptors(chips))
