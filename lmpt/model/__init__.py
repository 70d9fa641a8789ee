"""One transformer block assembled into decoder, encoder and encoder-decoder stacks."""

from lmpt.model.build import build_model, count_parameters
from lmpt.model.language_model import LanguageModel
from lmpt.model.output import ModelOutput

__all__ = ["LanguageModel", "ModelOutput", "build_model", "count_parameters"]
