"""How far apart person encoders put the people of a street scene: PETS09-S2L1's ground-truth boxes.

Every scored ground-truth box of ``../shared/data/video/pets09-s2l1/gt.txt`` (flag 1;
MOTChallenge 2015's 19 people of ``../shared/data/video/vtest.avi``, ground-truth frame f
being decoded frame f-1) is cut from its frame and embedded as the product does
(:class:`reid.track.appearance.VideoAppearance`: :func:`reid.detect.crop_detections` with
the person margin, then :func:`reid.models.embed_images`).  Per model it prints:

- quartiles (25%, median, 75%) of the distance between two boxes of one person at least
  ``APART`` (10) frames apart (nearer boxes are near copies of each other), of two
  different people seen in the same frame, and of two different people overall; as
  cosine distance ``c = 1 - u.v`` and as the project's Euclidean distance between unit
  embeddings ``sqrt(2 c)`` (0..2, :func:`reid.decision.similarity_to_distance`);
- the share of those same-person pairs within DeepSORT's appearance gate, cosine 0.2
  (Wojke et al. 2017; Euclidean 0.632), the distance at which a tracker re-finds a person;
- ROC AUC of same-person against different-person pairs (the probability that a random
  same-person pair is nearer than a random different-person pair, ties counted half),
  against all different pairs and against same-frame pairs; and each model's AUC divided
  by that of the first model (the reference, by default the demo model) in the same run;
- nearest-neighbour identity over tracks.  Each person's boxes are cut in two windows of
  their own track: the earlier half of their boxes, and those more than ``APART`` frames
  after the last of it.  In each direction (later windows against earlier ones, and
  earlier against later), each person's window is a query track, looked up among the
  other windows of every person (all 19 people, 38 query tracks).  "crops" is the share of query
  boxes whose nearest gallery box is the same person's; "tracks, vote" the share of query
  tracks whose boxes' most frequent nearest person is their own; "tracks, mean" the share
  whose mean embedding (renormalised) is nearest the same person's mean embedding.
  Chance is one in the number of people.

``--centre`` adds, per model, the same figures after *scene centring*, an unsupervised
domain step: the mean embedding of the public Faster R-CNN detections of frames 1-299
(``det-frcnn.txt``; no identities, no ground truth) is subtracted from every embedding,
which is then renormalised.  It is measured here only; the product does not do it.

Models: a model folder (``models/demo``), or ``imagenet:ARTEFACT`` for a backbone with
ImageNet weights and no Re-ID training at the demo model's 128x64 input
(``imagenet:efficientnet_lite0.imagenet``, ``imagenet:mobilenet_v2.imagenet-deepsort``;
``reid models list``).  The ground truth is read for scoring only.

Run: ``python benchmarks/bench_separation.py --models models/demo imagenet:efficientnet_lite0.imagenet``
(nearly all of the time is embedding the 4,476 crops: 22 s for a 128x64 MobileNetV2 on 2
cores at load average 1.5, 20 minutes for a 256x128 one at 8).  ``--cache DIR`` keeps each
model's embeddings under its card's fingerprint, so a later run over the same models
reads them back instead.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mot import APART, SEQUENCE, VIDEO, truth  # noqa: E402

from reid.decision import similarity_to_distance  # noqa: E402
from reid.errors import ReidError  # noqa: E402
from reid.models import BACKBONES, ModelCard, load_encoder  # noqa: E402
from reid.models.folder import save_model  # noqa: E402
from reid.models.registry import get_artefact  # noqa: E402
from reid.models.stand_in import untrained_network  # noqa: E402
from reid.track.appearance import VideoAppearance  # noqa: E402
from reid.track.mot import MotRow, read_mot  # noqa: E402

# DeepSORT's appearance gate (Wojke et al. 2017): cosine distance 0.2.
DEEPSORT_COSINE = 0.2
# Frames whose public detections give the scene's mean embedding (--centre): ground-truth
# frames 1-299, the scene part bench_openset.py lets a calibration see.
SCENE_FRAMES = (1, 299)
DEMO_SIZE = (128, 64)


@dataclass
class Separation:
    """One model's figures; distances are cosine distances (1 - u.v), flattened pairs."""

    boxes: int
    same: np.ndarray
    other_frame: np.ndarray
    other: np.ndarray
    auc: float
    auc_frame: float
    within_gate: float
    nn_crops: float
    nn_vote: tuple[int, int]
    nn_mean: tuple[int, int]
    chance: float


def imagenet_model(folder: Path, artefact_name: str) -> Path:
    """A backbone with the ImageNet weights ``artefact_name`` (its own mean and std) at the
    demo model's input size, no Re-ID training, written as a model folder."""
    artefact = get_artefact(artefact_name)
    card = ModelCard(
        name=f"{artefact.architecture}-imagenet", architecture=artefact.architecture,
        embedding_dim=BACKBONES[artefact.architecture].out_dim, input_size=DEMO_SIZE, num_classes=0, kind="person",
        mean=artefact.mean, std=artefact.std, pretrained=f"{artefact_name}, no Re-ID training",
    )  # fmt: skip
    save_model(untrained_network(card, pretrained=artefact_name), card, folder)
    return folder


def auc(same: np.ndarray, other: np.ndarray) -> float:
    """P(a same-person distance < a different-person distance), ties counted half (Mann-Whitney)."""
    ordered = np.sort(other)
    below = np.searchsorted(ordered, same, side="left")
    upto = np.searchsorted(ordered, same, side="right")
    greater = len(ordered) - upto
    return float(np.mean((greater + 0.5 * (upto - below)) / len(ordered)))


def unit(features: np.ndarray) -> np.ndarray:
    return features / np.linalg.norm(features, axis=1, keepdims=True)


def windows(who: np.ndarray, when: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks of every person's earlier and later window (the module docstring)."""
    early = np.zeros(len(who), dtype=bool)
    late = np.zeros(len(who), dtype=bool)
    for person in np.unique(who):
        mine = np.flatnonzero(who == person)
        frames = np.sort(when[mine])
        split = frames[(len(frames) - 1) // 2]
        early[mine[when[mine] <= split]] = True
        late[mine[when[mine] > split + APART]] = True
    return early, late


def nearest_neighbour(features: np.ndarray, who: np.ndarray, when: np.ndarray) -> tuple[float, tuple, tuple, float]:
    """Crop accuracy, (tracks right, tracks) by vote and by mean embedding, and chance,
    over both directions of :func:`windows` (see the module docstring)."""
    early, late = windows(who, when)
    right_crops = crops = vote = mean = tracks = 0
    chances = []
    for query_window, gallery_window in ((late, early), (early, late)):
        gallery, gallery_who = features[gallery_window], who[gallery_window]
        people = np.unique(gallery_who)
        centres = unit(np.stack([gallery[gallery_who == p].mean(axis=0) for p in people]))
        for person in np.unique(who[query_window]):
            mine = features[query_window & (who == person)]
            nearest = gallery_who[np.argmax(mine @ gallery.T, axis=1)]
            right_crops += int(np.sum(nearest == person))
            crops += len(mine)
            vote += int(Counter(nearest.tolist()).most_common(1)[0][0] == person)
            mean += int(people[np.argmax(centres @ unit(mine.mean(axis=0, keepdims=True))[0])] == person)
            tracks += 1
            chances.append(1.0 / len(people))
    return right_crops / crops, (vote, tracks), (mean, tracks), float(np.mean(chances))


def separation(features: np.ndarray, rows: list[MotRow]) -> Separation:
    """The figures of :class:`Separation` for unit ``features`` (N, D) of ground-truth ``rows``."""
    who = np.array([r.id for r in rows])
    when = np.array([r.frame for r in rows])
    cosine = 1.0 - features @ features.T
    upper = np.triu(np.ones(cosine.shape, dtype=bool), 1)
    same_person = who[:, None] == who[None, :]
    apart = np.abs(when[:, None] - when[None, :]) >= APART
    same = cosine[upper & same_person & apart]
    other = cosine[upper & ~same_person]
    other_frame = cosine[upper & ~same_person & (when[:, None] == when[None, :])]
    crops, vote, mean, chance = nearest_neighbour(features, who, when)
    return Separation(
        boxes=len(rows), same=same, other_frame=other_frame, other=other, auc=auc(same, other),
        auc_frame=auc(same, other_frame), within_gate=float(np.mean(same <= DEEPSORT_COSINE)),
        nn_crops=crops, nn_vote=vote, nn_mean=mean, chance=chance,
    )  # fmt: skip


def embed_rows(model: Path, rows: list[MotRow], cache: Path | None, what: str) -> tuple[np.ndarray, float]:
    """(len(rows), D) unit embeddings of ``rows`` cut from vtest.avi (zeros where a box has no
    pixels) and the seconds it took; kept in ``cache`` as ``FINGERPRINT-WHAT.npy`` (the
    model card's fingerprint covers the weights and every field that changes an embedding)
    and read back from there when present (0 seconds)."""
    encoder = load_encoder(model, device="cpu")
    kept = cache / f"{encoder.card.fingerprint}-{what}.npy" if cache is not None else None
    if kept is not None and kept.is_file():
        features = np.load(kept)
        if features.shape == (len(rows), encoder.dim):
            return features, 0.0
    appearance = VideoAppearance(VIDEO, encoder)
    features = appearance.embed(rows)
    if kept is not None:
        cache.mkdir(parents=True, exist_ok=True)
        np.save(kept, features)
    return features, appearance.seconds


def quartiles(values: np.ndarray) -> str:
    return "/".join(f"{v:.3f}" for v in np.percentile(values, [25, 50, 75]))


def report(label: str, s: Separation, reference: float) -> None:
    pairs = (("same", s.same), ("frame", s.other_frame), ("other", s.other))
    euclid = {name: similarity_to_distance(1.0 - cosine) for name, cosine in pairs}
    print(f"{label}: {s.boxes} boxes")
    print(
        f"  cosine q1/median/q3: same person {APART}+ frames apart {quartiles(s.same)}; two people, same frame "
        f"{quartiles(s.other_frame)}; two people {quartiles(s.other)}"
    )
    print(
        f"  euclid q1/median/q3: same person {APART}+ frames apart {quartiles(euclid['same'])}; two people, same frame "
        f"{quartiles(euclid['frame'])}; two people {quartiles(euclid['other'])}"
    )
    print(
        f"  same-person pairs within cosine {DEEPSORT_COSINE} (euclid {np.sqrt(2 * DEEPSORT_COSINE):.3f}): "
        f"{100 * s.within_gate:.1f}% of {len(s.same)}; AUC same vs different {s.auc:.3f} (vs same frame "
        f"{s.auc_frame:.3f}); AUC / reference {s.auc / reference:.3f}"
    )
    print(
        f"  nearest neighbour across windows: crops {100 * s.nn_crops:.1f}%, tracks by vote "
        f"{s.nn_vote[0]}/{s.nn_vote[1]}, by mean {s.nn_mean[0]}/{s.nn_mean[1]} (chance {100 * s.chance:.1f}%)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--models", nargs="+", default=["models/demo"],
        help="model folders or imagenet:ARTEFACT; the first is the reference of the AUC ratios",
    )  # fmt: skip
    parser.add_argument(
        "--centre", action="store_true",
        help="also score each model after subtracting the mean embedding of the scene's unlabeled detections",
    )  # fmt: skip
    parser.add_argument(
        "--cache", type=Path, default=None,
        help="folder keeping each model's embeddings of the boxes, reused by later runs (default: none)",
    )  # fmt: skip
    args = parser.parse_args()
    for needed in (SEQUENCE / "gt.txt", SEQUENCE / "det-frcnn.txt", VIDEO):
        if not needed.is_file():
            raise SystemExit(f"{needed}: not found (the PETS09-S2L1 data this benchmark measures on)")
    work = Path(tempfile.mkdtemp(prefix="bench-separation-"))
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    rows = truth()
    scene = [r for r in read_mot(SEQUENCE / "det-frcnn.txt") if SCENE_FRAMES[0] <= r.frame <= SCENE_FRAMES[1]]
    reference: float | None = None
    summary: list[tuple[str, Separation]] = []
    for number, spec in enumerate(args.models):
        try:
            if spec.startswith("imagenet:"):
                model = imagenet_model(work / f"model-{number}", spec.partition(":")[2])
            else:
                model = Path(spec)
            features, seconds = embed_rows(model, rows, args.cache, "truth")
            if args.centre:
                scene_features, _ = embed_rows(model, scene, args.cache, "scene")
                shift = scene_features[np.linalg.norm(scene_features, axis=1) > 0].mean(axis=0)
        except ReidError as error:
            raise SystemExit(str(error)) from None
        keep = np.linalg.norm(features, axis=1) > 0
        kept = [r for r, k in zip(rows, keep, strict=True) if k]
        print(f"{spec}: {int(keep.sum())} of {len(rows)} boxes embedded in {seconds:.1f} s")
        result = separation(features[keep], kept)
        reference = reference or result.auc
        summary.append((spec, result))
        report(spec, result, reference)
        if args.centre:
            centred = separation(unit(features[keep] - shift), kept)
            summary.append((f"{spec}, scene-centred", centred))
            report(f"{spec}, scene-centred ({len(scene)} detections of frames 1-299)", centred, reference)
    print(
        f"{'model':<52} {'same med':>8} {'frame med':>9} {'other med':>9} {'gate':>6} {'AUC':>6} {'ratio':>6} "
        f"{'NN crop':>7} {'vote':>6} {'mean':>6}"
    )
    for label, s in summary:
        print(
            f"{label:<52} {np.median(s.same):>8.3f} {np.median(s.other_frame):>9.3f} {np.median(s.other):>9.3f} "
            f"{100 * s.within_gate:>5.1f}% {s.auc:>6.3f} {s.auc / reference:>6.3f} {100 * s.nn_crops:>6.1f}% "
            f"{s.nn_vote[0]:>3}/{s.nn_vote[1]:<2} {s.nn_mean[0]:>3}/{s.nn_mean[1]:<2}"
        )
    print(f"(medians are cosine distances; gate: same-person pairs within cosine {DEEPSORT_COSINE})")


if __name__ == "__main__":
    main()
