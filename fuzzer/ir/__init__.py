"""The case IR and what can be said about a case without running it: the closed vocabulary and
dataclasses, shapes, data flow, validation, JSON, oracles, features, static validity, verdict names.

Imports nothing else of affuzz and nothing from torch (import-linter contract in pyproject.toml)."""
