"""Every git command patchaudit runs goes through this module (a package of four:
`gitrun` runs git, and is the only module that starts a program; `gitfiles` reads a
repository's refs as data; `gitobjects` holds `ObjectRepo`, `gitworktree` `WorkTree`;
their names are re-exported here).

A checkout under review is hostile, and git is a program runner: a repository's
config can name programs for it to run (`core.fsmonitor`, `gpg.program` with
`log.showSignature`, `core.pager`/`pager.<cmd>`, `diff.external`,
`diff.<driver>.textconv/command`, `filter.<driver>.clean/smudge/process` chosen
by a committed `.gitattributes`, `core.hooksPath` and hooks, `core.sshCommand`,
`core.askPass`, credential helpers, a partial clone's lazy fetch from a
promisor remote whose URL is an `ext::` command, ...), and git looks for the
repository itself, in the folder it is started in and above it, where a
checkout can commit a folder that looks like a git directory.  Two kinds of
repository are read here, each in the most robust way it allows:

* **an engine repository** (`ObjectRepo`, `--engine PATH@REV`, `bump`): only its
  objects and refs are wanted, and it may be committed in the checkout, config
  and all.  So git never opens it as a repository: every command runs in a
  private, temporary git directory whose config, HEAD and refs patchaudit
  writes itself, with the engine's object folder as ``GIT_OBJECT_DIRECTORY``.
  The engine's refs are read here as data (loose refs, `packed-refs`, `HEAD`,
  `shallow`: validated text) and written into the private directory; the
  engine's own config, hooks, info/attributes and index are never read by git
  at all, so no setting of it can matter, even one git does not know yet.
* **the user's own checkout** (`WorkTree`, `check --diff-base REF`): git has to
  read its index and its work tree, so it runs there, but only in the
  repository of the current directory (found by git from there, with
  ``safe.bareRepository=explicit``: a folder that merely looks like a git
  directory is not taken for one), then with ``GIT_DIR``/``GIT_WORK_TREE``
  set explicitly; never in a repository found next to a path.  Its config is
  the clone's own (the checkout cannot write `.git/config`), and still every
  setting that makes git run a program is overridden: the fixed set below,
  plus every filter, diff and merge driver, pager, protocol and credential
  helper the repository's config defines (listed with `git config --list`
  under the same environment, so the list is the one git will read).  Only
  plumbing commands that never write the index run there (`diff-index`, not
  `diff`, which refreshes and writes the index and so runs the
  `post-index-change` hook).

Every command, of either kind, runs with:

* an environment without any ``GIT_*`` variable of the caller (no
  ``GIT_EXTERNAL_DIFF``, ``GIT_PAGER``, ``GIT_SSH_COMMAND``, ``GIT_ASKPASS``,
  ``GIT_CONFIG_COUNT``/``GIT_CONFIG_PARAMETERS``, ``GIT_DIR``, ``GIT_TRACE``
  ...), nor ``PAGER``/``EDITOR``/``VISUAL``/``SSH_ASKPASS``; with no system
  and no global config (``GIT_CONFIG_NOSYSTEM=1``, ``GIT_CONFIG_GLOBAL`` and
  ``HOME``/``XDG_CONFIG_HOME`` pointing at nothing), no terminal prompt, no
  pager (``GIT_PAGER=`` and ``--no-pager``), no transport at all
  (``GIT_ALLOW_PROTOCOL=`` allows none, so no fetch, lazy or not, can start a
  transport program), no lazy fetch (``GIT_NO_LAZY_FETCH=1``), no optional
  locks, no replace objects, literal pathspecs;
* the ``-c`` overrides of `SAFE_CONFIG` (``core.fsmonitor=`` and
  ``core.hooksPath=/dev/null``, ``log.showSignature=false``, ...) - `-c` wins
  over every config file, and unknown keys are ignored by older git;
* arguments that can never be options (revisions and paths are checked by the
  callers, or passed after ``--``), and no shell.

The git executable is looked up on ``PATH`` without its relative entries, so a
`git` planted in the checkout is never the one run.
"""

from __future__ import annotations

from patchaudit.inputs.gitfiles import MAX_PACKED_REFS, MAX_REF_FILE, MAX_REFS, find_gitdir, refname_ok
from patchaudit.inputs.gitobjects import ObjectRepo
from patchaudit.inputs.gitrun import SAFE_CONFIG, GitError, NotARepository, git_executable, run, safe_env
from patchaudit.inputs.gitworktree import WorkTree

__all__ = [
    "GitError",
    "NotARepository",
    "SAFE_CONFIG",
    "git_executable",
    "safe_env",
    "run",
    "ObjectRepo",
    "WorkTree",
    "find_gitdir",
    "refname_ok",
    "MAX_REF_FILE",
    "MAX_PACKED_REFS",
    "MAX_REFS",
]
