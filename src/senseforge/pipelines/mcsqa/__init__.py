"""The mCSQA recipe (Sakai et al.): ConceptNet question sets → LM-written, LM-verified and human-verified questions."""

from senseforge.pipelines.mcsqa.config import McsqaConfig
from senseforge.pipelines.mcsqa.recipe import MCSQA

__all__ = ["MCSQA", "McsqaConfig"]
