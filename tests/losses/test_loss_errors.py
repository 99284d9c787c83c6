"""Bad batches raise the project's own error, one line naming the loss or the problem."""

from __future__ import annotations

import pytest
import torch

from reid.errors import BatchError, ReidError
from reid.losses import LOSS_NAMES, build_loss

NEEDS_CLASSES = {"softtriple", "cross_entropy"}


def make(name: str, classes: int = 3, dim: int = 4) -> torch.nn.Module:
    torch.manual_seed(0)
    options = {"num_classes": classes, "embedding_dim": dim} if name in NEEDS_CLASSES else {}
    return build_loss(name, **options)


BAD_BATCHES = {
    "one-dimensional embeddings": (torch.randn(4), torch.tensor([0, 0, 1, 1]), "float \\(N, D\\) tensor"),
    "integer embeddings": (torch.ones(4, 4, dtype=torch.long), torch.tensor([0, 0, 1, 1]), "float \\(N, D\\) tensor"),
    "one label short": (torch.randn(4, 4), torch.tensor([0, 0, 1]), "labels must be a \\(N,\\) tensor with N = 4"),
    "float labels": (torch.randn(4, 4), torch.tensor([0.0, 0.0, 1.0, 1.0]), "labels must be integers"),
    "NaN embedding": (torch.tensor([[0.0, 1, 0, 0], [1, 0, 0, 0], [float("nan"), 0, 0, 0], [0, 0, 1, 0]]),
                      torch.tensor([0, 0, 1, 1]), "1 of 4 rows hold NaN or inf \\(first row 2\\)"),
    "infinite embedding": (torch.tensor([[float("inf"), 1, 0, 0]] * 4), torch.tensor([0, 0, 1, 1]), "4 of 4 rows hold NaN or inf"),
}


@pytest.mark.parametrize("case", list(BAD_BATCHES))
@pytest.mark.parametrize("name", LOSS_NAMES)
def test_a_bad_batch_is_a_batch_error(name: str, case: str) -> None:
    embeddings, labels, message = BAD_BATCHES[case]
    with pytest.raises(BatchError, match=message) as error:
        make(name)(embeddings, labels)
    assert isinstance(error.value, ReidError) and isinstance(error.value, ValueError)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("name", sorted(NEEDS_CLASSES))
def test_labels_outside_the_classes_are_a_batch_error(name: str) -> None:
    with pytest.raises(BatchError, match=rf"{name}: labels must lie in \[0, 3\), got 0..3"):
        make(name)(torch.randn(2, 4), torch.tensor([0, 3]))
    with pytest.raises(BatchError, match=rf"{name}: labels must lie in \[0, 3\), got -1..1"):
        make(name)(torch.randn(2, 4), torch.tensor([-1, 1]))


def test_a_dimension_other_than_the_centers_is_a_batch_error() -> None:
    with pytest.raises(BatchError, match="softtriple: embeddings have dimension 5, the centers 4"):
        make("softtriple")(torch.randn(2, 5), torch.tensor([0, 1]))


def test_the_finite_check_can_be_left_to_the_caller() -> None:
    """The trainer checks its features itself, so that every process stops at the same step."""
    loss = make("triplet")
    batch = torch.full((4, 4), float("nan")), torch.tensor([0, 0, 1, 1])
    with pytest.raises(BatchError):
        loss(*batch)
    loss.check_finite = False
    assert loss(*batch).dim() == 0
