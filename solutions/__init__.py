"""Reference solutions. Never shipped to learners; the grader computes expected values with them."""
