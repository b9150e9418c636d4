"""What a learner and an instructor see, in a real browser: Debian's Chromium driven by Playwright
(``executable_path``; Playwright's own browser download fails offline). The learner's JupyterLab is
started by ``make lab`` itself, in a copy of the repository, as a learner starts it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ckptlab.twohost import free_port, stop_group

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# As root in a container: no sandbox of Chromium's own; no network: no background fetches.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update"]
URL = re.compile(r"(http://127\.0\.0\.1:\d+/\S*token=\w+)")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip("no Chromium here: `apt-get install chromium` (Debian's package; .ci/run installs it)")
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]' installs Playwright")
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Server:
    """A JupyterLab process, its output collected line by line."""

    def __init__(self, argv: list[str], cwd: Path, env: dict):
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def url(self, timeout: float = 120) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for line in self.lines:
                if m := URL.search(line):
                    return m.group(1)
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError("JupyterLab printed no address:\n" + "\n".join(self.lines[-40:]))

    def lab_pid(self) -> int:
        """The jupyter-lab process (make's grandchild)."""
        out = subprocess.run(["pgrep", "-s", str(self.proc.pid), "-f", "jupyter-lab"], capture_output=True, text=True)
        return int(out.stdout.split()[0])

    def stop(self) -> None:
        stop_group(self.proc)


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """The repository as a learner's clone has it (tracked and new files), sharing this .venv."""
    if not (ROOT / ".venv" / ".installed").exists():
        pytest.skip("needs the course's .venv (make venv)")
    dest = tmp_path_factory.mktemp("learner") / "course"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split("\n")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    (dest / ".venv").symlink_to(ROOT / ".venv")
    home = tmp_path_factory.mktemp("home")  # a first start: no JupyterLab workspace or settings yet
    return dest, home


def _env(home: Path) -> dict:
    """A learner's shell: none of this test run's Jupyter or make settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "MAKE", "MFLAGS"))}
    env["HOME"] = str(home)
    return env


@pytest.fixture(scope="module")
def lab(clone):
    dest, home = clone
    port = free_port()
    # -o: the clone shares this .venv, which `make` must not reinstall from the clone (its editable
    # install would then point into a folder this test deletes).
    server = Server(["make", "-o", ".venv/.installed", "lab", f"LAB_ARGS=--no-browser --port={port}"], dest,
                    _env(home))
    try:
        yield server
    finally:
        server.stop()


_PROMPTS = "[...document.querySelectorAll('.jp-InputPrompt')].filter(e => e.offsetParent !== null)"


def _run_all(page) -> None:
    """Run every cell of the open notebook (Run > Run All Cells) and wait until the kernel is done:
    its run has begun (a prompt of this notebook shows [*] or a count), none is running, it is idle."""
    page.wait_for_selector("text=/Python 3 \\(ipykernel\\) \\| Idle/", timeout=180_000)
    page.locator(".jp-NotebookPanel:visible .jp-Cell:visible").first.click()  # this notebook has the focus
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").click()
    page.locator(".lm-Menu-itemLabel").get_by_text("Run All Cells", exact=True).click()
    page.wait_for_function(f"() => {_PROMPTS}.some(e => /\\[(\\*|\\d+)\\]/.test(e.textContent))", timeout=180_000)
    page.wait_for_function(
        f"() => !{_PROMPTS}.some(e => e.textContent.includes('[*]')) && document.body.innerText.includes('| Idle')",
        timeout=300_000)


def _open(page, url: str) -> None:
    page.goto(url)
    # JupyterLab restores the last workspace first (the notebook open before): wait for this one's tab.
    name = url.split("?")[0].rsplit("/", 1)[-1]
    if name.endswith(".ipynb"):
        page.locator(".lm-TabBar-tab.jp-mod-current", has_text=name).wait_for(timeout=120_000)
    page.wait_for_selector(".jp-NotebookPanel:visible .jp-Cell:visible", timeout=120_000)


def _outputs(page) -> list[str]:
    """Every output of the open notebook, in order: JupyterLab renders only the cells in view, so
    scroll through it a screen at a time."""
    scroller = page.locator(".jp-NotebookPanel:visible .jp-WindowedPanel-outer")
    scroller.evaluate("e => e.scrollTop = 0")
    # Rendering lags the kernel on a busy machine: the first output is on screen before we read.
    page.wait_for_selector(".jp-NotebookPanel:visible .jp-OutputArea-output", timeout=60_000)
    seen: dict[str, None] = {}
    top = 0
    while True:
        scroller.evaluate(f"e => e.scrollTop = {top}")
        page.wait_for_timeout(300)
        seen.update(dict.fromkeys(page.locator(".jp-NotebookPanel:visible .jp-OutputArea-output").all_inner_texts()))
        height, view = scroller.evaluate("e => [e.scrollHeight, e.clientHeight]")
        if top + view >= height:
            return list(seen)
        top += view // 2


def _nbgrader_ui(page) -> dict:
    return {"menu": page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").count(),
            "validate": page.locator(".jp-NotebookPanel:visible .jp-Toolbar").get_by_text("Validate").count()}


def test_a_learner_starts_with_make_lab_and_works_without_nbgrader_or_noise(browser, lab, clone):
    url = lab.url()
    assert url.split("?")[0].endswith("/lab/tree/course/00_start_here.ipynb"), url  # with --no-browser too
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        _open(page, url)
        assert page.locator(".lm-TabBar-tab.jp-mod-current", has_text="00_start_here.ipynb").count() == 1
        _run_all(page)
        outputs = "\n".join(_outputs(page))
        assert "16 CPU devices ready" in outputs and "Traceback" not in outputs, outputs[-3000:]

        # A problem notebook: its check cells run in the learner's kernel and say the stub is not attempted.
        _open(page, url.replace("course/00_start_here.ipynb", "problems/unit1_parameter_accounting.ipynb"))
        _run_all(page)
        outputs = _outputs(page)
        assert "16 CPU devices ready" in outputs[0], outputs[:3]
        stubs = [o for o in outputs if o.startswith("Not attempted") and "still the stub" in o]
        assert len(stubs) == 4, outputs
        assert "`" not in "".join(stubs)  # the check's Markdown renders: code, not backticks
        # The course's menus are there; nbgrader's instructor tools are not.
        assert page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").count() == 1
        assert _nbgrader_ui(page) == {"menu": 0, "validate": 0}
    finally:
        page.close()
    # The terminal stayed quiet: the address, nothing per kernel, request or extension.
    log = "\n".join(lab.lines)
    for noise in ("without encryption", "nbgrader", "No nbgrader_config", "websocket", "[W ", "[I ", "make["):
        assert noise not in log, f"{noise!r} in make lab's output:\n{log[-3000:]}"
    # A terminal opened in JupyterLab inherits the server's environment: none of make's variables.
    environ = dict(item.split("=", 1) for item in
                   Path(f"/proc/{lab.lab_pid()}/environ").read_text().split("\0") if "=" in item)
    assert not {"MAKELEVEL", "MAKEFLAGS", "MFLAGS"} & set(environ), environ.keys()
    assert environ["JUPYTER_CONFIG_PATH"].split(":")[0] == str(clone[0] / "jupyter_config")


def test_the_same_check_finds_nbgrader_where_it_is_on(browser, clone):
    """Without the course's jupyter_config/, the same JupyterLab shows nbgrader's menu and Validate
    button: the assertions above can fail."""
    dest, home = clone
    port = free_port()
    server = Server([str(dest / ".venv" / "bin" / "jupyter"), "lab", "--no-browser", f"--port={port}",
                     "--allow-root", f"--ServerApp.root_dir={dest}"], dest, _env(home))
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        url = server.url()
        _open(page, url.replace("/lab?", "/lab/tree/problems/unit1_parameter_accounting.ipynb?"))
        page.wait_for_selector(".lm-MenuBar-itemLabel:has-text('Nbgrader')", timeout=60_000)
        page.locator(".jp-NotebookPanel:visible .jp-Toolbar").get_by_text("Validate").wait_for(timeout=60_000)
        assert _nbgrader_ui(page) == {"menu": 1, "validate": 1}
    finally:
        page.close()
        server.stop()


def test_a_class_feedback_page_renders_its_markdown_and_wraps(browser, tmp_path):
    """grade-batch's feedback HTML for a learner with a long message, opened in the browser."""
    import inspect

    from solutions import unit1

    subs = tmp_path / "subs"
    subs.mkdir()
    body = inspect.getsource(unit1.dense_checkpoint_accounting).replace("total / num_shards", "total // num_shards")
    body = body.replace("dtype=np.float64", "dtype=np.int64")
    (subs / "ada.py").write_text("import jax, jax.numpy as jnp, numpy as np\nfrom flax import linen as nn\n" + body
                                 + "\n\ndef param_bytes(params, dtype):\n    raise ValueError('x' * 300)\n")
    out = subprocess.run([sys.executable, "-m", "autograder", "grade-batch", str(subs), "--out", str(tmp_path / "res"),
                          "--unit", "1", "--quiet", "-j", "1"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    page = browser.new_page(viewport={"width": 800, "height": 900})
    try:
        page.goto((tmp_path / "res" / "feedback" / "ada.html").as_uri())
        body_text = page.inner_text("body")
        assert "Total: 0 / 45" in body_text and "2.1" not in body_text  # Unit 1 only
        assert "`" not in body_text  # Markdown code spans render as code, not as backticks
        assert "//" in page.locator("code").all_inner_texts()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # long lines wrap
    finally:
        page.close()
