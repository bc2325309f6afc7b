"""The case IR and what can be said about a case without running it: the closed vocabulary and
dataclasses (:mod:`.case`), shapes (:mod:`.shapes`), data flow (:mod:`.dataflow`), validation
(:mod:`.validate`), JSON (:mod:`.serde`), oracles, features, static validity, verdict names, the base
class of user-facing errors (:mod:`.errors`) and atomic file writes (:mod:`.files`).

Imports nothing else of affuzz and nothing from torch (import-linter contracts, NOTE [layers] in
pyproject.toml)."""
