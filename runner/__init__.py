"""teamrun: run teams of LLM agents declared in YAML."""
__version__ = "0.1.0"
