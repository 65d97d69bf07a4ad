"""The culture-gen recipe (Putri et al.'s LLM_Gen): a culture's concepts → questions an LM writes in its language."""
