"""The Hypothesis settings profile campaigns run under.

NOTE [hypothesis settings]
Campaigns (case decoding in the workers, the Hypothesis stage of shrinking) run Hypothesis under this
explicit profile, never the one Hypothesis picks by itself: where the ``CI`` variable is set that is
its ``ci`` profile, which derandomizes and would change what a seed means. The example database is a
directory under OUT (``OUT/hypothesis``) when the worker can reach OUT, and only a cache: nothing in a
campaign reads it back as a source of truth.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

PROFILE = "affuzz-campaign"
settings.register_profile(
    PROFILE,
    database=None,
    deadline=None,
    derandomize=False,
    print_blob=False,
    suppress_health_check=list(HealthCheck),
)


def campaign_settings(**overrides: object) -> settings:
    """The campaign profile with ``overrides`` (e.g. ``database=...``), independent of the loaded one."""
    return settings(settings.get_profile(PROFILE), **overrides)
