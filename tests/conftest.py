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
