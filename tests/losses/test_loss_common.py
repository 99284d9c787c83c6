"""Properties every loss must have: gradients, order invariance, degenerate batches, half
precision, and that optimizing it alone actually learns a metric."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import torch
from torch import nn

from reid.losses import build_loss

NUM_CLASSES = 4
DIM = 3

CONFIGS = [
    ("triplet", {"mining": "hard"}),
    ("triplet", {"mining": "hard", "soft": True}),
    ("triplet", {"mining": "hard", "swap": True}),
    ("triplet", {"mining": "all"}),
    ("triplet", {"mining": "all", "swap": True}),
    ("triplet", {"mining": "semihard", "margin": 1.0}),
    ("triplet", {"mining": "hard", "squared": True, "normalize": True}),
    ("contrastive", {"form": "hadsell"}),
    ("contrastive", {"form": "chopra", "q": 4.0}),
    ("contrastive", {"form": "two_margin", "pos_margin": 0.2}),
    ("contrastive", {"form": "hadsell", "squared": True, "normalize": True}),
    ("lifted", {"smooth": True}),
    ("lifted", {"smooth": False}),
    ("centroid_triplet", {}),
    ("centroid_triplet", {"smooth_loss": True}),
    ("softtriple", {"centers_per_class": 3}),
    ("cross_entropy", {}),
]
IDS = [name + "".join(f"-{k}={v}" for k, v in options.items()) for name, options in CONFIGS]

# Losses that learn from the batch's own pairs or triplets: a batch of one class, or of
# singletons, gives them nothing.  The contrastive forms still have pairs there (one class:
# only similar pairs; singletons: only dissimilar ones) and the center/classifier losses
# always compare an example with every class, so those stay non-zero.
NEEDS_PAIRS_AND_NEGATIVES = {"triplet", "lifted", "centroid_triplet"}
OWN_PARAMETERS = {"softtriple", "cross_entropy"}


def make(name: str, options: dict, dim: int = DIM, classes: int = NUM_CLASSES) -> nn.Module:
    torch.manual_seed(0)
    if name in OWN_PARAMETERS:
        options = {**options, "num_classes": classes, "embedding_dim": dim}
    return build_loss(name, **options)


def pk_batch(seed: int = 0, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 3])
    x = torch.randn(len(labels), DIM, generator=generator, dtype=torch.float64) * 0.6
    return x.to(dtype), labels


@pytest.mark.parametrize(("name", "options"), CONFIGS, ids=IDS)
def test_gradcheck_float64(name: str, options: dict) -> None:
    loss = make(name, options).double()
    x, labels = pk_batch()
    x.requires_grad_(True)
    assert loss(x, labels).item() > 0  # a real case, not a trivially zero one
    assert torch.autograd.gradcheck(lambda e: loss(e, labels), (x,))
    for key, parameter in loss.named_parameters():
        value = parameter.detach().clone().requires_grad_(True)

        def with_parameter(p: torch.Tensor, key: str = key) -> torch.Tensor:
            return torch.func.functional_call(loss, {key: p}, (x.detach(), labels))

        assert torch.autograd.gradcheck(with_parameter, (value,))


@pytest.mark.parametrize(("name", "options"), CONFIGS, ids=IDS)
def test_invariant_to_the_order_of_the_batch(name: str, options: dict) -> None:
    loss = make(name, options).double()
    x, labels = pk_batch(1)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(5))
    first = x.clone().requires_grad_(True)
    second = x[order].clone().requires_grad_(True)
    a = loss(first, labels)
    b = loss(second, labels[order])
    a.backward()
    b.backward()
    assert a.item() == pytest.approx(b.item(), rel=1e-12, abs=1e-15)
    torch.testing.assert_close(first.grad[order], second.grad)


DEGENERATE = {
    "one class": torch.zeros(6, dtype=torch.long),
    "all singletons": torch.arange(6),
    "one embedding": torch.tensor([2]),
    "empty": torch.zeros(0, dtype=torch.long),
}


@pytest.mark.parametrize("case", list(DEGENERATE))
@pytest.mark.parametrize(("name", "options"), CONFIGS, ids=IDS)
def test_degenerate_batches_are_finite_and_differentiable(name: str, options: dict, case: str) -> None:
    loss = make(name, options, classes=6)
    labels = DEGENERATE[case]
    x = torch.randn(len(labels), DIM, requires_grad=True)
    value = loss(x, labels)
    assert value.dim() == 0 and value.requires_grad and torch.isfinite(value)
    value.backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    nothing_to_learn = case in ("one embedding", "empty") or (
        name in NEEDS_PAIRS_AND_NEGATIVES and case in ("one class", "all singletons")
    )
    if case == "one embedding" and name in OWN_PARAMETERS:
        nothing_to_learn = False  # one example against every class is still a lesson
    if nothing_to_learn:
        assert value.item() == 0.0
        assert torch.count_nonzero(x.grad) == 0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("name", "options"), CONFIGS, ids=IDS)
def test_half_precision_inputs_are_computed_in_float32(name: str, options: dict, dtype: torch.dtype) -> None:
    loss = make(name, options)
    x, labels = pk_batch(2, dtype=torch.float32)
    half = x.to(dtype).requires_grad_(True)
    value = loss(half, labels)
    value.backward()
    assert value.dtype == torch.float32
    assert half.grad.dtype == dtype and torch.isfinite(half.grad.float()).all()
    reference = loss(half.detach().float(), labels)
    assert value.item() == pytest.approx(reference.item(), rel=1e-6, abs=1e-7)


def toy_set(
    generator: torch.Generator, per_class: int, classes: int = 6
) -> tuple[torch.Tensor, torch.Tensor]:
    """8-D points: identity in 2 dimensions (classes on a circle), loud nuisance in 6."""
    labels = torch.arange(classes).repeat_interleave(per_class)
    angle = 2 * math.pi * labels / classes
    identity = 2 * torch.stack([torch.cos(angle), torch.sin(angle)], 1)
    identity = identity + 0.3 * torch.randn(len(labels), 2, generator=generator)
    nuisance = 2.0 * torch.randn(len(labels), 6, generator=generator)
    return torch.cat([identity, nuisance], 1), labels


def nearest_neighbour_accuracy(
    query: torch.Tensor, query_labels: torch.Tensor, gallery: torch.Tensor, gallery_labels: torch.Tensor
) -> float:
    nearest = torch.cdist(query, gallery).argmin(1)
    return (gallery_labels[nearest] == query_labels).float().mean().item()


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Tensors of a few dozen rows gain nothing from threads, and on a loaded machine
    every matrix product would wait at a thread barrier."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize(("name", "options"), CONFIGS, ids=IDS)
def test_optimizing_the_loss_alone_improves_nearest_neighbour_accuracy(name: str, options: dict) -> None:
    generator = torch.Generator().manual_seed(0)
    train, train_labels = toy_set(generator, 20)
    held_out, held_out_labels = toy_set(generator, 20)
    torch.manual_seed(0)
    model = nn.Linear(8, 4)
    loss = make(name, options, dim=4, classes=6)
    groups = [{"params": list(model.parameters()), "lr": 0.05}]
    if list(loss.parameters()):
        groups.append({"params": list(loss.parameters()), "lr": getattr(loss, "center_lr", 0.05)})
    optimizer = torch.optim.Adam(groups)

    def accuracy() -> float:
        with torch.no_grad():
            return nearest_neighbour_accuracy(model(held_out), held_out_labels, model(train), train_labels)

    before = accuracy()
    for _ in range(60):
        # P x K batches: all 6 identities, 4 random images each.
        index = torch.cat([torch.randperm(20, generator=generator)[:4] + 20 * c for c in range(6)])
        optimizer.zero_grad()
        loss(model(train[index]), train_labels[index]).backward()
        optimizer.step()
    after = accuracy()
    assert after >= before + 0.3, (before, after)
    assert after >= 0.6, (before, after)
