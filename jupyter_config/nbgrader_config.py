# nbgrader, as a learner's terminal inside `make lab` sees it (this folder is on JUPYTER_CONFIG_PATH).
# `nbgrader validate problems/<notebook>.ipynb` runs the notebook and lists every cell that
# errors: a problem's check cell raises while nbgrader validates, unless its public examples pass.
# (nbgrader's default counts only its own test cells, which problems/ notebooks do not have, and
# so said "Success!" of any notebook.) Instructors keep their own nbgrader_config.py in their
# course folder; see the README's "Teaching with nbgrader".
c = get_config()  # noqa: F821 - provided by nbgrader
c.Validator.validate_all = True
