"""Shared test setup.

Git commits made by the tests (GitPython repositories in temp dirs, the
pre-commit test) need an identity; a CI machine may have none configured.
"""

import os

for _key, _value in {
    "GIT_AUTHOR_NAME": "patchaudit tests",
    "GIT_AUTHOR_EMAIL": "tests@patchaudit.invalid",
    "GIT_COMMITTER_NAME": "patchaudit tests",
    "GIT_COMMITTER_EMAIL": "tests@patchaudit.invalid",
}.items():
    os.environ.setdefault(_key, _value)
# never let a developer's global git config (hooks, signing) leak into test repos
os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
# the test suite never downloads: an engine a test tree's recipe pins by version is found
# only where the test puts it (tests of the download itself unset this, with pip pointed
# at a local --find-links folder: tests/test_engine_resolve.py)
os.environ["PATCHAUDIT_OFFLINE"] = "1"

# Hypothesis profiles (tests/test_hostile_*.py): "ci", the default, runs a bounded,
# derandomized number of examples; HYPOTHESIS_PROFILE=long runs 10,000 per test.
try:
    from hypothesis import HealthCheck as _HealthCheck
    from hypothesis import settings as _hyp_settings
except ImportError:  # pragma: no cover
    pass
else:
    _slow = [_HealthCheck.too_slow, _HealthCheck.data_too_large]
    _hyp_settings.register_profile("ci", max_examples=150, derandomize=True, deadline=None, database=None,
                                   suppress_health_check=_slow, print_blob=True)
    _hyp_settings.register_profile("dev", max_examples=300, deadline=None, suppress_health_check=_slow)
    _hyp_settings.register_profile("long", max_examples=10_000, deadline=None, suppress_health_check=_slow)
    _hyp_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
