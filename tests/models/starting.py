"""Build-then-start in one call, as training does it in two steps."""

from __future__ import annotations

from reid.models.network import ReidNet
from reid.models.pretrained import load_start, resolve_start


def started(network: ReidNet, pretrained: str | None) -> ReidNet:
    """``network`` after :func:`load_start` of what ``--pretrained pretrained`` resolves to."""
    load_start(network, resolve_start(network.architecture, pretrained))
    return network
