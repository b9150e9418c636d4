"""Limits the registry declares and the sandbox enforces, in a module of their own: a learner's
kernel imports the registry (for checks and hints) without loading any sandbox code."""

DEFAULT_TIMEOUT = 60.0  # seconds for a problem's worker tree, on the clock and of CPU time
