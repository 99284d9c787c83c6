"""Encoders: networks, model cards, model folders, the Encoder contract and its
implementations (own PyTorch model, ONNX file, OpenVINO IR, dlib's face descriptor, SFace),
published models by name (the zoo), and export."""

from typing import TYPE_CHECKING

from reid.lazy import lazy_names

if TYPE_CHECKING:
    from reid.models.backbones import BACKBONES
    from reid.models.card import ModelCard, load_card, save_card
    from reid.models.dlib_face import DlibFaceEncoder
    from reid.models.encoder import (
        NO_FACE_CHOICES,
        EmbedResult,
        Encoder,
        TorchEncoder,
        check_embeddings,
        embed_images,
        l2_normalize,
        preprocess,
    )
    from reid.models.export import EXPORT_FORMATS, ExportResult, export_model
    from reid.models.folder import load_encoder, load_model, recorded_model, save_model
    from reid.models.names import DLIB_FACE, READY_MADE_FACES, SFACE
    from reid.models.network import ReidNet, build_network
    from reid.models.onnx import OnnxEncoder, Preprocessing, card_path_for
    from reid.models.openvino import OpenVinoEncoder
    from reid.models.sface import SFaceEncoder
    from reid.models.stand_in import stand_in_model, untrained_network

__getattr__, __dir__ = lazy_names(__name__, __file__)

__all__ = [
    "BACKBONES",
    "DLIB_FACE",
    "NO_FACE_CHOICES",
    "READY_MADE_FACES",
    "EmbedResult",
    "EXPORT_FORMATS",
    "DlibFaceEncoder",
    "Encoder",
    "ExportResult",
    "ModelCard",
    "OnnxEncoder",
    "OpenVinoEncoder",
    "Preprocessing",
    "ReidNet",
    "SFACE",
    "SFaceEncoder",
    "TorchEncoder",
    "build_network",
    "card_path_for",
    "check_embeddings",
    "embed_images",
    "export_model",
    "l2_normalize",
    "load_card",
    "load_encoder",
    "recorded_model",
    "load_model",
    "preprocess",
    "save_card",
    "save_model",
    "stand_in_model",
    "untrained_network",
]
