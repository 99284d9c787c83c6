"""``reid verify`` (one pair, or a labelled pair file) and ``reid calibrate``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.text import Text

from reid.cli.common import console, detector_option, handle_errors, make_progress, print_table, printable, write_json
from reid.cli.defaults import given, with_config_options, with_default
from reid.cli.model_options import INPUT_SIZE_OPTION, MEAN_OPTION, RGB_OPTION, STD_OPTION, preprocessing_from_flags
from reid.decision import FAR_HELP, THRESHOLD_HELP, check_far
from reid.errors import ConfigError, DataError
from reid.evaluation.names import count, distance, far_percent, percent
from reid.photos import NO_FACE_HELP, CalibrateConfig, PairConfig, PhotoConfig

# The engine is imported when a command runs, never to print help.
if TYPE_CHECKING:
    from reid.evaluation import VerificationResult
    from reid.models import Preprocessing
    from reid.pipeline import PairScores

MODEL_HELP = "Model folder, or a model's name under models/."
ENCODER_HELP = "Model folder, a model's name under models/, an .onnx file, a ready-made face encoder (sface, dlib-face), or a published Re-ID model by name (`reid models list`)."
FACE_DETECTOR_HELP = "Face detector for the crops: haar (default for --detect face) or yunet (default for aligned chips)."
PAIRS_HELP = "Pair file: LFW pairs.txt, or CSV lines 'path_a,path_b,label' (label 1 same, 0 different)."
DATA_PAIRS_HELP = (
    "Instead of --pairs: a labelled data set (market1501:PATH, dukemtmc:PATH, msmt17:PATH, folder:PATH, synthetic); "
    "every query x gallery pair of its evaluation split is a genuine (one identity, two cameras) or impostor pair. "
    "Use people the model was not trained on."
)
ROOT_HELP = "Folder the pair file's paths are relative to (default: the pair file's folder)."
VERIFY_NO_FACE_HELP = NO_FACE_HELP + " With --pairs a skipped photo's pairs count as unscored; two images: skip is an error."
# The sections of the help of verify and calibrate; the rest under "Options".
PAIRS, PHOTOS, DECISION = "Pair file", "Photos", "Decision"
PHOTO_HELPS = {"no_face": with_default(VERIFY_NO_FACE_HELP, PhotoConfig.no_face)}
SHOWN_FAILURES = 5


def far_option() -> float | None:
    """A ``--far RATE`` option (a fraction in (0, 1))."""
    return typer.Option(None, "--far", help=FAR_HELP, rich_help_panel=DECISION)


def _report_skipped(scores: PairScores) -> None:
    if not scores.skipped_images:
        return
    console.print(
        f"skipped {len(scores.skipped_images)} images (unreadable, or no face found) and the "
        f"{scores.num_pairs_skipped} pairs using them (unscored):",
        highlight=False,
    )
    for path, reason in scores.skipped_images[:SHOWN_FAILURES]:
        console.print(f"  {printable(path)}: {printable(reason)}", highlight=False, soft_wrap=True)
    if len(scores.skipped_images) > SHOWN_FAILURES:
        console.print(f"  ... and {len(scores.skipped_images) - SHOWN_FAILURES} more", highlight=False)


def _print_histogram(result: VerificationResult, bins: int = 10) -> None:
    """Genuine and impostor distance counts on a coarse grid, empty rows left out."""
    edges = result.histogram_edges
    group = max(1, (len(edges) - 1) // bins)
    rows = []
    for start in range(0, len(edges) - 1, group):
        genuine = int(result.genuine_histogram[start : start + group].sum())
        impostor = int(result.impostor_histogram[start : start + group].sum())
        if genuine or impostor:
            rows.append([f"{distance(edges[start])}-{distance(edges[min(start + group, len(edges) - 1)])}", genuine, impostor])
    print_table("pair distances", ["distance", "genuine", "impostor"], rows)


def _verify_pair_file(
    model: str,
    pairs: Path,
    root: Path,
    folds: int | None,
    crop: dict[str, str],
    batch_size: int | None,
    json_file: Path | None,
    plot: Path | None,
    preprocessing: Preprocessing | None,
) -> None:
    from reid.evaluation import read_pairs
    from reid.evaluation.plots import write_verification_plots
    from reid.evaluation.verification import unresolved_far_note
    from reid.models import load_encoder
    from reid.pipeline import photo_rule, verify_pairs

    pair_set = read_pairs(pairs, root)
    encoder = load_encoder(model, preprocessing=preprocessing)
    subject = photo_rule(**crop, aligned_face_size=encoder.aligned_face_size, kind=encoder.card.kind)
    with make_progress() as progress:
        task = progress.add_task("embedding", total=len(pair_set.image_paths()))
        verification = verify_pairs(
            encoder,
            pair_set,
            **given(folds=folds, batch_size=batch_size, no_face=crop.get("no_face")),
            subject=subject,
            on_progress=lambda done, _total: progress.update(task, completed=done),
        )
    result, scores = verification
    _report_skipped(scores)
    if scores.note:
        console.print(printable(scores.note), highlight=False)
    rows = [
        [f"accuracy ({result.folds}-fold, scored pairs)", f"{percent(result.accuracy)} ± {percent(result.accuracy_std)}"],
        ["accuracy (unscored pairs as errors)", percent(verification.accuracy_with_unscored)],
        ["pairs scored", f"{count(scores.distances.size)} of {count(scores.num_pairs_total)}"],
        ["ROC AUC", f"{result.auc:.4f}"],
        ["EER", percent(result.eer)],
    ]
    rows += [[f"TAR@FAR={far:g}", percent(tar)] for far, tar in result.tar_at_far.items()]
    rows += [
        ["best-accuracy threshold", distance(result.threshold)],
        ["pairs", f"{count(result.num_pairs)} ({count(result.num_genuine)} genuine, {count(result.num_impostor)} impostor)"],
    ]
    print_table(f"{encoder.card.name} on {pair_set.describe()}", ["metric", "value"], rows)
    _print_histogram(result)
    for far in result.tar_at_far:
        note = unresolved_far_note(
            result.num_impostor,
            far,
            f"TAR@FAR={far:g} is read where the threshold admits at most {count(math.floor(far * result.num_impostor))}",
        )
        if note is not None:
            console.print(note, highlight=False)
    console.print(
        "distance: Euclidean between L2-normalized embeddings; same when distance <= threshold", highlight=False
    )
    if json_file is not None:
        payload = {
            **result.to_dict(),
            "model": encoder.card.name,
            "pairs": str(pairs),
            **verification.summary(),
            "skipped_images": len(scores.skipped_images),
            "skipped": [{"path": str(p), "reason": r} for p, r in scores.skipped_images],
            "skipped_pairs": scores.num_pairs_skipped,
        }
        write_json(json_file, payload)
        console.print(f"wrote {printable(json_file)}", highlight=False)
    if plot is not None:
        for path in write_verification_plots(plot, result):
            console.print(f"wrote {printable(path)}", highlight=False)


@handle_errors
@with_config_options(PairConfig, panels={PAIRS: ("folds",), PHOTOS: ("detect", "no_face")}, more=[(PhotoConfig, None, PHOTO_HELPS)])
def verify_command(
    image_a: Path | None = typer.Argument(None, help="First image (with IMAGE_B; or use --pairs)."),
    image_b: Path | None = typer.Argument(None, help="Second image."),
    model: str = typer.Option(..., "--model", "-m", help=ENCODER_HELP),
    threshold: float | None = typer.Option(
        None, "--threshold", help=f"{THRESHOLD_HELP} Default: the model card's calibrated one.", rich_help_panel=DECISION
    ),
    far: float | None = far_option(),
    pairs: Path | None = typer.Option(None, "--pairs", help=PAIRS_HELP, rich_help_panel=PAIRS),
    root: Path | None = typer.Option(None, "--root", help=ROOT_HELP, rich_help_panel=PAIRS),
    plot: Path | None = typer.Option(
        None, "--plot", help="With --pairs: write roc.png and distance_histogram.png here.", rich_help_panel=PAIRS
    ),
    detector: str | None = detector_option(FACE_DETECTOR_HELP, panel=PHOTOS),
    json_file: Path | None = typer.Option(None, "--json", help="Also write the result to this JSON file."),
    input_size: str | None = INPUT_SIZE_OPTION,
    mean: str | None = MEAN_OPTION,
    std: str | None = STD_OPTION,
    rgb: bool | None = RGB_OPTION,
    **options: Any,
) -> None:
    """Are two images the same identity?  Or, with --pairs, LFW-style verification metrics."""
    from reid.models import load_encoder
    from reid.pipeline import compare_images, photo_rule

    preprocessing = preprocessing_from_flags(input_size, mean, std, rgb)
    no_face = options.get("no_face")
    crop = given(detect=options.get("detect"), detector=detector, no_face=no_face)
    if pairs is not None:
        if image_a is not None:
            raise ConfigError("give either two images or --pairs FILE, not both")
        folds, batch_size = options.get("folds"), options.get("batch_size")
        _verify_pair_file(model, pairs, root or pairs.parent, folds, crop, batch_size, json_file, plot, preprocessing)
        return
    if image_a is None or image_b is None:
        raise ConfigError("give two images (reid verify A B --model M) or --pairs FILE")
    if plot is not None:
        raise ConfigError("--plot needs --pairs")
    check_far(far)
    # The images first: a wrong path is named before a published model is downloaded.
    for image in (image_a, image_b):
        if not image.is_file():
            raise DataError(f"{image}: no such image file")
    encoder = load_encoder(model, preprocessing=preprocessing)
    decision = compare_images(
        encoder,
        image_a,
        image_b,
        threshold=threshold,
        far=far,
        model_name=model,
        subject=photo_rule(**crop, aligned_face_size=encoder.aligned_face_size, kind=encoder.card.kind),
        **given(no_face=no_face),
    )
    verdict = ("same identity", "green") if decision.same else ("different identities", "red")
    console.print(
        Text.assemble(
            f"distance {distance(decision.distance)} {'<=' if decision.same else '>'} threshold {distance(decision.threshold)}: ",
            verdict,
        )
    )
    console.print(f"threshold from: {printable(decision.threshold_source)}", highlight=False)
    for note in (decision.note, decision.kind_note):
        if note:
            console.print(printable(note), highlight=False, soft_wrap=True)
    if json_file is not None:
        write_json(
            json_file,
            {
                "image_a": str(image_a),
                "image_b": str(image_b),
                "distance": decision.distance,
                "threshold": decision.threshold,
                "same": bool(decision.same),
                "threshold_source": decision.threshold_source,
                "note": decision.note,
                "kind_note": decision.kind_note,
            },
        )


@handle_errors
@with_config_options(CalibrateConfig, panels={PHOTOS: ("detect", "no_face")}, more=[(PhotoConfig, None, PHOTO_HELPS)])
def calibrate_command(
    model: str = typer.Option(..., "--model", "-m", help=MODEL_HELP),
    pairs: Path | None = typer.Option(None, "--pairs", help=PAIRS_HELP, rich_help_panel=PAIRS),
    data: str | None = typer.Option(None, "--data", help=DATA_PAIRS_HELP, rich_help_panel=PAIRS),
    root: Path | None = typer.Option(None, "--root", help=ROOT_HELP, rich_help_panel=PAIRS),
    best_accuracy: bool = typer.Option(False, "--best-accuracy", help="Choose the threshold of best accuracy instead."),
    detector: str | None = detector_option(FACE_DETECTOR_HELP, panel=PHOTOS),
    json_file: Path | None = typer.Option(None, "--json", help="Also write the choice to this JSON file."),
    **options: Any,
) -> None:
    """Choose the model's verification threshold (a Euclidean distance between unit embeddings, in
    (0, 2]) on labelled pairs (a pair file, or the pairs of a labelled data set) and write it into its
    card, with its impostor distance quantiles (for --far)."""
    from reid.data import load_dataset
    from reid.models import load_card
    from reid.pipeline import calibrate_model, calibrate_model_on_data, model_folder, photo_rule

    far, no_face, batch_size = options.get("far"), options.get("no_face"), options.get("batch_size")
    if best_accuracy and far is not None:
        raise ConfigError("give --far or --best-accuracy, not both")
    if (pairs is None) == (data is None):
        raise ConfigError("give --pairs FILE or --data KIND:PATH (labelled images, such as market1501:PATH), one of them")
    if data is not None and root is not None:
        raise ConfigError("--root is where a pair file's paths start; --data names its own folder")
    target = None if best_accuracy else (CalibrateConfig.far if far is None else far)
    # A labelled set is read first: a wrong path is named before a model is looked for or a bar drawn.
    dataset = None if data is None else load_dataset(data)
    # The threshold is chosen on the crops the model is given: aligned chips when its card asks.
    card = load_card(model_folder(model))
    subject = photo_rule(
        **given(detect=options.get("detect"), detector=detector, no_face=no_face),
        aligned_face_size=card.aligned_face_size,
        kind=card.kind,
    )
    with make_progress() as progress:
        task = progress.add_task("embedding", total=None)
        options = {
            "target_far": target,
            **given(batch_size=batch_size, no_face=no_face),
            "subject": subject,
            "on_progress": lambda done, total: progress.update(task, completed=done, total=total),
        }
        if data is not None:
            calibration = calibrate_model_on_data(model, data, dataset=dataset, **options)
        else:
            calibration = calibrate_model(model, pairs, root or pairs.parent, **options)
    choice = calibration.choice
    _report_skipped(calibration.scores)
    print_table(
        f"threshold for {model} ({choice.criterion})",
        ["metric", "value"],
        [
            ["threshold", distance(choice.threshold)],
            ["FAR", f"{far_percent(choice.far)} ({count(choice.admitted)} of {count(choice.num_impostor)} impostor pairs)"],
            ["TAR", percent(choice.tar)],
            ["accuracy", percent(choice.accuracy)],
            ["pairs", f"{count(choice.num_genuine)} genuine, {count(choice.num_impostor)} impostor"],
        ],
    )
    if choice.note is not None:
        console.print(choice.note, highlight=False)
    console.print(f"wrote threshold {distance(choice.threshold)} into {printable(calibration.card_path)}", highlight=False)
    if json_file is not None:
        payload = {**choice.to_dict(), "note": choice.note, "card": str(calibration.card_path), "source": calibration.source}
        write_json(json_file, payload)


def register(app: typer.Typer) -> None:
    app.command("verify")(verify_command)
    app.command("calibrate")(calibrate_command)

