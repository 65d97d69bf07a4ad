"""The mCSQA recipe (Sakai et al.): ConceptNet question sets → LM-written, LM-verified and human-verified questions."""

from senseforge.pipelines.mcsqa.config import McsqaConfig
from senseforge.pipelines.mcsqa.recipe import MCSQA, BuildSummary, build, default_run_dir

__all__ = ["MCSQA", "BuildSummary", "McsqaConfig", "build", "default_run_dir"]
