"""One file per unit: its ``UNIT`` record and its ``PROBLEMS`` (gathered by :mod:`autograder.registry`)."""
