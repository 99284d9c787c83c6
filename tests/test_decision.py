"""One rule for distance thresholds, and every command that takes one applies it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from reid import ConfigError, Threshold, check_distance_threshold, pair_distance, resolve_threshold, similarity_to_distance
from reid.decision import (
    GALLERY_CALIBRATION,
    THRESHOLD_SOURCES,
    check_quantiles,
    far_at,
    impostor_quantiles,
    squared_distances_from_gram,
)
from reid.cli.app import app
from reid.pipeline import QueryConfig
from reid.track import TrackerConfig

LINE = "--threshold is a distance between unit embeddings, in (0, 2]; got"


@pytest.mark.parametrize("value", [0.0, -1.0, 2.0001, 75.0, math.nan, math.inf])
def test_thresholds_outside_the_unit_sphere_range_are_refused(value: float) -> None:
    with pytest.raises(ConfigError, match=r"\(0, 2\]"):
        check_distance_threshold(value)


@pytest.mark.parametrize("value", [None, 1e-6, 0.5, 2.0])
def test_thresholds_inside_are_kept(value: float | None) -> None:
    assert check_distance_threshold(value) == value


def test_query_and_tracker_use_the_same_rule() -> None:
    with pytest.raises(ConfigError, match=r"^threshold is a distance"):
        QueryConfig(threshold=75.0)
    with pytest.raises(ConfigError, match=r"^appearance is a distance"):
        TrackerConfig(appearance=-1.0)


@pytest.mark.parametrize("value", ["75", "-1", "0"])
def test_verify_refuses_what_query_refuses_with_the_same_line(tmp_path: Path, value: str) -> None:
    pytest.importorskip("dlib", reason="the dlib extra gives a model that needs no training")
    image = tmp_path / "a.png"
    cv2.imwrite(str(image), np.full((128, 64, 3), 100, np.uint8))
    result = CliRunner().invoke(app, ["verify", "-m", "dlib-face", str(image), str(image), "--threshold", value])
    assert result.exit_code == 1
    assert LINE in result.output and "Traceback" not in result.output


@dataclass
class Card:
    name: str = "m"
    threshold: float | None = None
    threshold_source: str = ""


@dataclass
class Store:
    """A gallery as the threshold rule reads it: its recorded threshold, its own
    calibration (``own``), and the threshold its own pairs give at a rate."""

    threshold: float | None = None
    location: str = "galleries/g"
    own: Threshold | None = None
    at_rate: float | None = None

    def current_calibration(self) -> Calibrated | None:
        return None if self.own is None else Calibrated(self.own)

    def calibrate(self, far: float, *, store: bool) -> Calibrated:
        assert not store, "a query never stores a calibration"
        if self.at_rate is None:
            raise ConfigError(f"too few pairs for FAR {far:g}")
        return Calibrated(Threshold(self.at_rate, GALLERY_CALIBRATION, f"FAR {far:g} on 50 identities"))

    def items(self, identity: str | None = None, limit: int | None = None) -> list[object]:
        return []


@dataclass
class Calibrated:
    """A gallery's calibration as the rule reads it."""

    threshold: Threshold

    def as_threshold(self) -> Threshold:
        return self.threshold


def test_resolve_threshold_says_where_the_value_came_from() -> None:
    calibrated = Card(threshold=0.4, threshold_source="reid calibrate: FAR <= 0.01")
    assert resolve_threshold(0.9, calibrated, Store(0.7), given_detail="--threshold") == Threshold(
        0.9, "given", "--threshold"
    )
    chosen = resolve_threshold(None, calibrated, Store(0.7))
    assert chosen == Threshold(0.4, "model card", "reid calibrate: FAR <= 0.01")
    assert chosen.describe() == "model card (reid calibrate: FAR <= 0.01)"
    assert resolve_threshold(None, Card(), Store(0.7)).describe() == "gallery (galleries/g)"
    assert resolve_threshold(None, Card(), Store(), default=1.0) == Threshold(1.0, "default")
    assert resolve_threshold(None, Card(), None, default=1.0).describe() == "default"
    assert {t.source for t in (chosen, Threshold(1.0, "given"))} <= set(THRESHOLD_SOURCES)


def test_resolve_threshold_refuses_a_bad_value_and_names_what_has_none() -> None:
    # The library names the key; the command line (above) names it by its option.
    with pytest.raises(ConfigError, match="^" + LINE.removeprefix("--").replace("(", r"\(").replace("]", r"\]")):
        resolve_threshold(75.0, Card(threshold=0.4))
    with pytest.raises(
        ConfigError,
        match=r"^m: the model card has no calibrated threshold and gallery galleries/g records none; run 'reid calibrate "
        r"--model m --data KIND:PATH' \(labelled images of people\), 'reid gallery calibrate galleries/g', or pass --threshold",
    ):
        resolve_threshold(None, Card(), Store())
    with pytest.raises(ConfigError, match=r"^models/x: the model card has no calibrated threshold; run 'reid calibrate --model"):
        resolve_threshold(None, Card(), model_name="models/x")
    with pytest.raises(ConfigError, match=r"^default threshold is a distance"):
        resolve_threshold(None, Card(), default=3.0)


def unit_rows(count: int, dim: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(count, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_distance_rule_agrees_with_itself() -> None:
    a, b = unit_rows(50, 16, 0), unit_rows(50, 16, 1)
    direct = pair_distance(a, b)
    via_similarity = similarity_to_distance(np.einsum("ij,ij->i", a, b))
    assert direct.dtype == np.float64 and direct.shape == (50,)
    np.testing.assert_allclose(via_similarity, direct, atol=1e-6)
    assert pair_distance(a[:1], a[:1])[0] == 0.0
    # Opposite and identical directions are the two ends of 0..2, even past rounding.
    np.testing.assert_array_equal(similarity_to_distance(np.array([1.0000001, -1.0000001])), [0.0, 2.0])
    gram = np.asarray(a @ b.T, dtype=np.float32)
    squared = squared_distances_from_gram(gram.copy(), np.ones((50, 1), np.float32), np.ones((1, 50), np.float32))
    np.testing.assert_allclose(np.sqrt(squared[np.arange(50), np.arange(50)]), direct, atol=1e-5)
    assert (squared >= 0).all()


def test_numpy_and_torch_give_the_same_squared_distances() -> None:
    torch = pytest.importorskip("torch")
    x, y = unit_rows(40, 8, 2) * 3.0, unit_rows(30, 8, 3)
    x_sq, y_sq = np.einsum("ij,ij->i", x, x)[:, None], np.einsum("ij,ij->i", y, y)[None, :]
    gram = x @ y.T
    from_torch = squared_distances_from_gram(torch.from_numpy(gram.copy()), torch.from_numpy(x_sq), torch.from_numpy(y_sq))
    from_numpy = squared_distances_from_gram(gram, x_sq, y_sq)
    np.testing.assert_array_equal(from_torch.numpy(), from_numpy)
    assert (from_numpy >= 0).all() and from_numpy.dtype == np.float32


def test_nearest_identity_names_within_the_threshold_else_unknown() -> None:
    from reid.decision import Threshold, nearest_identity
    from reid.gallery import IdentityMatch

    found = [IdentityMatch("ann", 0.4, 1), IdentityMatch("bob", 0.7, 2)]
    assert nearest_identity(found, Threshold(0.5, "given")) == "ann"
    assert nearest_identity(found, Threshold(0.4, "given")) == "ann", "at the threshold is within"
    assert nearest_identity(found, Threshold(0.39, "given")) is None
    assert nearest_identity([], Threshold(2.0, "given")) is None
    assert nearest_identity([IdentityMatch("ann", float("nan"), 1)], Threshold(2.0, "given")) is None


def normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


@dataclass
class CalibratedCard:
    """A card calibrated on impostor pairs whose distances are normal(mean, spread)."""

    mean: float
    spread: float
    threshold: float | None = None
    name: str = "m"
    threshold_source: str = "reid calibrate"
    pairs: int = 200_000

    @property
    def impostor_quantiles(self) -> tuple[tuple[float, float], ...]:
        rng = np.random.default_rng(7)
        return impostor_quantiles(rng.normal(self.mean, self.spread, self.pairs))

    def rate(self, threshold: float) -> float:
        return normal_cdf((threshold - self.mean) / self.spread)


# dlib-face-like: impostors close (normalized descriptors), the card's 0.4231 from dlib's 0.6;
# arcface-like: impostors near orthogonal, the card's threshold at FAR 1e-3.
DLIB_LIKE = CalibratedCard(0.55, 0.07, threshold=0.4231)
ARCFACE_LIKE = CalibratedCard(1.38, 0.06, threshold=1.38 - 3.09 * 0.06)


@pytest.mark.parametrize(
    ("card", "given"),
    [
        (DLIB_LIKE, 0.6),  # face_recognition's tolerance, on raw descriptors
        (DLIB_LIKE, 0.5),  # a cosine similarity
        (DLIB_LIKE, 0.8),
        (DLIB_LIKE, 0.45),
        (DLIB_LIKE, 0.3),
        (ARCFACE_LIKE, 1.0),  # insightface's similarity 0.5 converted: sqrt(2 - 2 * 0.5)
        (ARCFACE_LIKE, 0.894),  # deepface's cosine distance 0.40 converted: sqrt(2 * 0.40)
        (ARCFACE_LIKE, 1.3),
        (ARCFACE_LIKE, 1.25),
        (ARCFACE_LIKE, 1.5),
    ],
)
def test_a_given_threshold_far_looser_than_the_cards_says_so_with_its_rate(card: CalibratedCard, given: float) -> None:
    chosen = resolve_threshold(given, card, given_detail="--threshold")
    assert chosen.value == given and chosen.source == "given"
    looser = card.rate(given) >= 10 * max(card.rate(card.threshold), 1 / card.pairs)
    # Ratios within 30% of the factor 10 depend on interpolation between quantiles: not asserted.
    if abs(math.log10(card.rate(given) / max(card.rate(card.threshold), 1 / card.pairs)) - 1) < 0.12:
        return
    assert bool(chosen.note) == looser
    if looser:
        rate = float(chosen.note.split("accepts about ")[1].split("%")[0]) / 100
        assert rate == pytest.approx(card.rate(given), rel=0.15, abs=0.002)
        assert "Euclidean distance between unit embeddings" in chosen.note and "\n" not in chosen.note
        assert "sqrt(2-2s)" in chosen.note


@pytest.mark.parametrize("far", [0.3, 1e-1, 1e-2, 3e-3, 1e-3, 1e-4])
def test_far_reads_the_threshold_from_the_cards_impostor_quantiles(far: float) -> None:
    card = DLIB_LIKE
    chosen = resolve_threshold(None, card, far=far)
    assert chosen.source == "given" and "--far" in chosen.describe()
    assert card.rate(chosen.value) == pytest.approx(far, rel=0.25)
    assert far_at(card.impostor_quantiles, chosen.value) == pytest.approx(far, rel=1e-6)


def test_far_is_refused_where_the_card_cannot_answer_it() -> None:
    with pytest.raises(ConfigError, match=r"^far 0.001: m's card records no impostor distances to read a false-accept rate from"):
        resolve_threshold(None, Card(threshold=0.4), far=1e-3)
    small = CalibratedCard(0.55, 0.07, threshold=0.42, pairs=500)
    with pytest.raises(ConfigError, match=r"^far 0.0001 is below what m's card's calibration pairs resolve"):
        resolve_threshold(None, small, far=1e-4)
    for bad in (0.0, 1.0, 5.0, -0.1, math.nan, 75.0):
        with pytest.raises(ConfigError, match=r"^far is a false-accept rate, a fraction in \(0, 1\)"):
            resolve_threshold(None, DLIB_LIKE, far=bad)
    with pytest.raises(ConfigError, match="^far .*: give a threshold or a false-accept rate, not both"):
        resolve_threshold(0.5, DLIB_LIKE, far=1e-3)


def test_a_galleries_own_calibration_wins_over_the_card_and_loses_to_a_given_value() -> None:
    own = Threshold(0.7, GALLERY_CALIBRATION, "FAR 0.001 on 200 identities")
    card = Card(threshold=0.4, threshold_source="reid calibrate")
    assert resolve_threshold(None, card, Store(0.9, own=own)) == own
    assert resolve_threshold(0.5, card, Store(0.9, own=own)).value == 0.5
    assert resolve_threshold(None, card, Store(0.9)).source == "model card"
    assert own.source in THRESHOLD_SOURCES


def test_far_reads_the_cards_pairs_first_then_the_gallerys_own() -> None:
    # A card with impostor quantiles answers a rate itself, even beside a gallery.
    from_card = resolve_threshold(None, DLIB_LIKE, Store(at_rate=0.33), far=1e-2)
    assert from_card.source == "given" and "card was calibrated on" in from_card.detail
    assert from_card.value != 0.33
    # A card without them: the gallery's own pairs at that rate, saying so.
    from_gallery = resolve_threshold(None, Card(threshold=0.4), Store(at_rate=0.33), far=1e-2)
    assert from_gallery.value == 0.33 and from_gallery.source == "given"
    assert from_gallery.detail == "--far 0.01 on gallery galleries/g's own pairs: FAR 0.01 on 50 identities"
    with pytest.raises(ConfigError, match="^far 0.01: m's card records no impostor distances .*, and gallery galleries/g: too few"):
        resolve_threshold(None, Card(threshold=0.4), Store(), far=1e-2)


def test_quantiles_descend_and_are_checked() -> None:
    quantiles = impostor_quantiles(np.linspace(0.2, 1.2, 1000))
    assert quantiles[0] == (1.0, 1.2) and quantiles[-1][0] >= 1e-3
    assert all(a[0] > b[0] and a[1] >= b[1] for a, b in zip(quantiles, quantiles[1:]))
    assert check_quantiles(quantiles) == quantiles and impostor_quantiles([]) == ()
    with pytest.raises(ValueError, match="rates must descend"):
        check_quantiles([(0.1, 0.5), (0.5, 0.9)])


@pytest.mark.parametrize(
    "command",
    [("reid", "verify"), ("reid", "query"), ("reid", "calibrate"), ("reid", "gallery", "calibrate"),
     ("camera_search",), ("face_checkin",)],
)
def test_every_threshold_option_says_its_unit(command: tuple[str, ...]) -> None:
    from apps.camera_search.cli import app as camera_search
    from apps.face_checkin.cli import app as face_checkin

    program = {"reid": app, "camera_search": camera_search, "face_checkin": face_checkin}[command[0]]
    result = CliRunner().invoke(program, [*command[1:], "--help"], terminal_width=400)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.replace("│", " ").split())
    assert "Euclidean distance between unit embeddings" in text
    if "--threshold" in text:
        assert "sqrt(2-2s)" in text and "sqrt(2c)" in text


def test_one_identity_each_gives_a_name_to_the_nearest_of_people_seen_together() -> None:
    from reid.decision import one_identity_each
    from reid.gallery import IdentityMatch

    rule = Threshold(0.5, "given")
    first = [IdentityMatch("ann", 0.3, 1), IdentityMatch("bob", 0.45, 2)]
    second = [IdentityMatch("ann", 0.35, 1), IdentityMatch("cat", 0.9, 3)]
    # Alone each is ann; together ann goes where the total is least, and the first, whose
    # next identity is within the threshold, becomes bob.
    assert one_identity_each([first, second], rule) == ["bob", "ann"]
    assert one_identity_each([second, [IdentityMatch("ann", 0.2, 1)]], rule) == [None, "ann"]
    assert one_identity_each([[IdentityMatch("ann", 0.5, 1)]], rule) == ["ann"], "at the threshold is within"
    assert one_identity_each([[], [IdentityMatch("ann", 0.6, 1)]], rule) == [None, None]
    assert one_identity_each([], rule) == []


def test_an_identity_taken_by_someone_seen_beside_a_track_is_barred_to_it() -> None:
    from reid.decision import one_identity_each, taken_from
    from reid.gallery import IdentityMatch

    rule = Threshold(0.5, "given")
    enrolled = [IdentityMatch("ann", 0.2, 1)]
    stranger = [IdentityMatch("ann", 0.4, 1), IdentityMatch("bob", 0.45, 2)]
    beside = [IdentityMatch("ann", 0.45, 1), IdentityMatch("cat", 0.9, 3)]
    named = one_identity_each([enrolled, stranger, beside], rule)
    assert named == ["ann", "bob", None]
    # The stranger lost ann and the third lost ann to the enrolled person beside them; what
    # they took or what lies beyond the threshold is not barred.
    assert taken_from([enrolled, stranger, beside], named, rule) == [set(), {"ann"}, {"ann"}]
    # Later, alone, the stranger would be ann; barred from ann, the next within the
    # threshold names them, and with nothing else within it they stay unknown.
    assert one_identity_each([stranger], rule) == ["ann"]
    assert one_identity_each([stranger], rule, [{"ann"}]) == ["bob"]
    assert one_identity_each([beside], rule, [{"ann"}]) == [None]
    assert one_identity_each([beside, enrolled], rule, [{"ann"}, set()]) == [None, "ann"]
    assert taken_from([], [], rule) == []


def test_one_identity_each_is_the_least_total_distance_assignment() -> None:
    from itertools import product

    from reid.decision import nearest_identity, one_identity_each
    from reid.gallery import IdentityMatch

    rng = np.random.default_rng(11)
    rule = Threshold(0.6, "given")
    names = ["ann", "bob", "cat", "dan"]
    for _ in range(200):
        people = int(rng.integers(1, 4))
        distances = rng.uniform(0.2, 1.0, size=(people, len(names)))
        answers = [
            sorted(
                (IdentityMatch(n, float(d), k) for k, (n, d) in enumerate(zip(names, row, strict=True))),
                key=lambda m: m.distance,
            )
            for row in distances
        ]
        chosen = one_identity_each(answers, rule)
        named = [c for c in chosen if c is not None]
        assert len(named) == len(set(named))
        if people == 1:
            assert chosen == [nearest_identity(answers[0], rule)]

        def total(choice: tuple[int | None, ...]) -> float:
            return sum(rule.value if c is None else distances[p, c] for p, c in enumerate(choice))

        feasible = [
            choice
            for choice in product([None, *range(len(names))], repeat=people)
            if len({c for c in choice if c is not None}) == sum(c is not None for c in choice)
            and all(c is None or distances[p, c] <= rule.value for p, c in enumerate(choice))
        ]
        best = min(total(choice) for choice in feasible)
        got = tuple(None if c is None else names.index(c) for c in chosen)
        assert got in feasible and total(got) == pytest.approx(best, abs=1e-6)


@pytest.mark.parametrize("share", [0.05, 0.3, 0.5])
def test_a_given_threshold_far_stricter_than_the_cards_says_so(share: float) -> None:
    # OpenCV's SFace cosine similarity 0.363, face_recognition's 0.6 or a deepface cosine
    # distance given as our distance all sit far below a card's threshold of about 1.1.
    for card in (DLIB_LIKE, ARCFACE_LIKE):
        given = share * card.threshold
        note = resolve_threshold(given, card, given_detail="--threshold").note
        assert "under half" in note and "sqrt(2-2s)" in note and "\n" not in note


def test_a_given_threshold_near_the_cards_says_nothing() -> None:
    for card in (DLIB_LIKE, ARCFACE_LIKE):
        assert resolve_threshold(0.9 * card.threshold, card, given_detail="--threshold").note == ""


def test_people_who_shared_a_frame_never_share_a_name() -> None:
    from reid.decision import one_identity_each_together
    from reid.gallery import IdentityMatch

    rule = Threshold(0.5, "given")
    near = [IdentityMatch("ann", 0.2, 1)]
    nearer = [IdentityMatch("ann", 0.1, 1)]
    both = [IdentityMatch("ann", 0.3, 1), IdentityMatch("bob", 0.4, 2)]
    # 0 and 1 shared a frame: ann goes to the nearer, 1.  2 was seen with no one: ann too.
    assert one_identity_each_together([near, nearer, near], [[0, 1], [1], [2]], rule) == [None, "ann", "ann"]
    # 2 is ann beside 0 (who falls back to bob), unknown beside the nearer 1: frames disagree.
    assert one_identity_each_together([both, nearer, near], [[0, 2], [1, 2]], rule) == ["bob", "ann", None]
    # A person in no group is named alone; beyond the threshold is unknown.
    assert one_identity_each_together([near, [IdentityMatch("ann", 0.7, 1)]], [], rule) == ["ann", None]
    assert one_identity_each_together([], [], rule) == []
