"""Encoders: networks, model cards, model folders and the Encoder contract."""

from reid.models.backbones import BACKBONES
from reid.models.card import ModelCard, load_card, save_card
from reid.models.encoder import Encoder, TorchEncoder, l2_normalize, preprocess
from reid.models.folder import load_encoder, load_model, save_model
from reid.models.network import ReidNet, build_network

__all__ = [
    "BACKBONES",
    "Encoder",
    "ModelCard",
    "ReidNet",
    "TorchEncoder",
    "build_network",
    "l2_normalize",
    "load_card",
    "load_encoder",
    "load_model",
    "preprocess",
    "save_card",
    "save_model",
]
