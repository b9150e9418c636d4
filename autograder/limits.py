"""Limits the registry declares and the sandbox enforces, in a module of their own: a learner's
kernel imports the registry (for checks and hints) without loading any sandbox code."""

DEFAULT_TIMEOUT = 60.0  # seconds for a problem's worker tree, on the clock and of CPU time
WALL_FACTOR = 2.0  # a tree that used less CPU time than that may go on this many times as long
JOIN_MARGIN = 30.0  # seconds past the clock cap before wait() gives up on the drive (a grader bug)
DEFAULT_MEMORY = 4 * 2**30
DEFAULT_FILE_BYTES = 256 * 2**20
MAX_TASKS = 400  # processes and threads of one worker (JAX on 16 devices runs about 45 threads)
# A strict worker writes only its scratch folder: a tmpfs of its own (its mount namespace's), so
# filling a disk or its inodes costs that worker only, and the pages are the worker's memory.
SCRATCH_BYTES = 512 * 2**20
SCRATCH_INODES = 20_000
SCRATCH_DEPTH = 64  # folders nested deeper than this in a scratch folder count as over its limits
SCRATCH_POLL = 0.05  # seconds between two measures of a scratch folder with no tmpfs of its own
