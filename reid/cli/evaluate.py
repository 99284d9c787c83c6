"""``reid eval``: Rank-1/5/10, mAP and mINP of a model on a dataset's query/gallery split."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from reid.cli.common import RANKING, console, detector_option, handle_errors, make_progress, percent, print_skipped, print_table, printable, write_json
from reid.cli.defaults import default_of, given, with_config_options
from reid.cli.model_options import INPUT_SIZE_OPTION, MEAN_OPTION, RGB_OPTION, STD_OPTION, preprocessing_from_flags
from reid.evaluation.names import count
from reid.evaluation.rerank import rerank_distances
from reid.photos import EvalConfig, PhotoConfig

# The engine is imported when the command runs, never to print help.
if TYPE_CHECKING:
    from reid.data import ReidDataset

PHOTOS = "Photos"
HELD_OUT = {True: "yes", False: "NO (the model trained on these identities)", None: "not known"}


def ranking_rows(metrics: dict[str, Any], computed_on: dict[str, Any]) -> list[list[Any]]:
    """The one layout of a ranking evaluation's table (``reid eval``, ``reid train``'s final
    evaluation): a metric a row, then what it was computed on.  ``metrics`` as
    :meth:`reid.evaluation.RankingResult.to_dict` gives them, ``computed_on`` as
    :meth:`reid.data.ReidDataset.evaluation_split`."""
    rows: list[list[Any]] = [[name, percent(metrics[key])] for key, name in RANKING if key in metrics]
    if "num_valid_queries" in metrics:
        rows.append(["queries evaluated", f"{count(metrics['num_valid_queries'])} of {count(metrics.get('num_query', 0))}"])
    if "num_gallery" in metrics:
        rows.append(["gallery images", count(metrics["num_gallery"])])
    if computed_on:
        cameras = computed_on.get("cameras_known")
        rows += [
            ["same-camera filtering", "on" if cameras or cameras is None else "OFF (no camera ids in file names)"],
            [
                "computed on",
                f"{printable(computed_on.get('dataset'))}: {count(computed_on.get('query_images', 0))} query and "
                f"{count(computed_on.get('gallery_images', 0))} gallery images of "
                f"{count(computed_on.get('identities', 0))} identities",
            ],
            ["held out from training", HELD_OUT.get(computed_on.get("held_out"), "not known")],
        ]
    return rows



def evaluated_on(dataset: ReidDataset, training_data: dict[str, Any]) -> dict[str, Any]:
    """What an evaluation of a model trained on ``training_data`` (its card's) is computed
    on (:meth:`ReidDataset.evaluation_split`), with ``trained_on`` the training data's name
    and ``held_out`` None (not known) unless the model was trained on this data set's own
    training split."""
    split: dict[str, Any] = dict(dataset.evaluation_split())
    trained_on = training_data.get("name")
    split["trained_on"] = trained_on
    if trained_on != dataset.name:
        split["held_out"] = None
    return split


@handle_errors
@with_config_options(EvalConfig, more=[(PhotoConfig, None, None)], panels={PHOTOS: ("detect", "no_face")})
def eval_command(
    model: str = typer.Option(
        ..., "--model", "-m", help="Model folder, a model's name under models/, an .onnx file, a ready-made face encoder (sface, dlib-face), or a published Re-ID model by name (`reid models list`)."
    ),
    data: str = typer.Option(
        ..., "--data", "-d", help="Dataset: synthetic, market1501:PATH, dukemtmc:PATH, msmt17:PATH or folder:PATH."
    ),
    json_file: Path | None = typer.Option(None, "--json", help="Also write the figures to this JSON file."),
    rerank: bool = typer.Option(
        False, "--rerank", help="k-reciprocal re-ranking (Zhong et al. 2017; "
        + ", ".join(f"{key.removesuffix('_value')}={default_of(rerank_distances, key)}" for key in ("k1", "k2", "lambda_value"))
        + ")."
    ),
    plot: Path | None = typer.Option(None, "--plot", help="Write ranked_list.png and cmc.png into this folder."),
    detector: str | None = detector_option(panel=PHOTOS),
    input_size: str | None = INPUT_SIZE_OPTION,
    mean: str | None = MEAN_OPTION,
    std: str | None = STD_OPTION,
    rgb: bool | None = RGB_OPTION,
    **given_options: Any,
) -> None:
    """Evaluate a model under the Market-1501 protocol (same-identity same-camera gallery items removed)."""
    from reid.data import load_dataset
    from reid.evaluation.plots import write_ranking_plots
    from reid.models import load_encoder
    from reid.pipeline import evaluate_encoder, photo_rule

    detect, no_face = given_options.get("detect"), given_options.get("no_face")
    options = given(batch_size=given_options.get("batch_size"), no_face=no_face)
    # The data first: a wrong path is named before a published model is downloaded.
    dataset = load_dataset(data)
    encoder = load_encoder(model, preprocessing=preprocessing_from_flags(input_size, mean, std, rgb))
    subject = photo_rule(
        **given(detect=detect, detector=detector, no_face=no_face),
        aligned_face_size=encoder.aligned_face_size,
        kind=encoder.card.kind,
    )
    total = len(dataset.query) + len(dataset.gallery)
    with make_progress() as progress:
        task = progress.add_task("embedding", total=total)
        evaluation = evaluate_encoder(
            encoder,
            dataset.query,
            dataset.gallery,
            rerank=rerank,
            on_progress=lambda done, _total: progress.update(task, completed=done),
            skip_unreadable=True,
            subject=subject,
            **options,
        )
    result = evaluation.result
    computed_on = evaluated_on(dataset, encoder.card.training_data)
    print_table(
        f"{encoder.card.name} on {dataset.name}" + (" (re-ranked)" if rerank else ""),
        ["metric", "value"],
        ranking_rows(result.to_dict(), {**computed_on, "dataset": dataset.name}),
    )
    console.print(
        f"AP: {result.ap_definition}; mINP: Ye et al. 2021.  "
        f"{count(result.num_skipped_queries)} queries without a cross-camera true match were skipped.",
    )
    if not dataset.cameras_known:
        console.print(
            "note: the split has no camera ids, so same-identity same-camera gallery items are not removed "
            "and figures are not comparable with the Market-1501 protocol.",
        )
    print_skipped(dataset.skipped, "not taken")
    print_skipped(evaluation.skipped)
    if json_file is not None:
        payload = {
            **result.to_dict(include_cmc=True),
            "model": encoder.card.name,
            "data": data,
            "same_camera_filtering": dataset.cameras_known,
            "computed_on": computed_on,
            "not_taken": [{"path": str(p), "reason": r} for p, r in dataset.skipped],
            "skipped": [{"path": str(p), "reason": r} for p, r in evaluation.skipped],
        }
        write_json(json_file, payload)
        console.print(f"wrote {printable(json_file)}")
    if plot is not None:
        for path in write_ranking_plots(
            plot,
            result,
            evaluation.query_features,
            evaluation.gallery_features,
            evaluation.query_records,
            evaluation.gallery_records,
        ):
            console.print(f"wrote {printable(path)}")


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
