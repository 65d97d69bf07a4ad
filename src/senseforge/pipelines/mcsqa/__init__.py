"""The mCSQA recipe (Sakai et al.): ConceptNet question sets → LM-written, LM-verified and human-verified questions."""

from senseforge.pipelines.mcsqa.config import McsqaConfig
from senseforge.pipelines.mcsqa.recipe import BuildSummary, build, default_run_dir

__all__ = ["BuildSummary", "McsqaConfig", "build", "default_run_dir"]
