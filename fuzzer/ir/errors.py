"""The one base class of user-facing errors.

NOTE [user errors]
Bad input (a case file, a corpus entry, a registry, a campaign's OUT, a command line) is the user's to
fix, so it is reported as one line that says which file, what is wrong and what to do, with exit code 2,
and nothing else is lost: a corpus loader skips the bad entry, a campaign keeps going. Every such error
is an :class:`AffuzzError`; :func:`fuzzer.cli.main` is the one place that turns it into that line and
exit code. Errors that are affuzz's own bugs are never AffuzzErrors (they keep their traceback).
"""


class AffuzzError(Exception):
    """A user-facing error (NOTE [user errors]): its message is the whole story, on one line."""
