"""Test configuration: Hypothesis profiles.

``default`` keeps the suite fast and reproducible; ``thorough`` (``HYPOTHESIS_PROFILE=thorough``)
randomises and, through ``strategies.examples``, multiplies the example counts of the
end-to-end properties into the thousands.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, derandomize=True)
settings.register_profile(
    "thorough", deadline=None, derandomize=False, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
