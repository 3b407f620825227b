"""Engine sources (SGLang/vLLM folders, wheels, sdists, git revisions), their versions, symbol index and lookups."""
