"""The scoring worker under attack: a completion that reaches reasoning-gym's eval or sympy's
parse_expr changes nothing in the trainer, and every honest answer keeps its exact score.

Attacks are sent to the worker raw (past the guard) to test the sandbox itself; through
``score_rg`` they are stopped by the guard before they are sent. Expected values come from
calling the datasets' own ``score_answer`` here on honest answers only.
"""

import builtins
import contextlib
import math
import os
import signal
import site
import subprocess
import sys
import threading
import time

import pytest

from grpo_lab.rewards import scoring
from grpo_lab.rewards.scoring import ScoringWorker, protocol
from grpo_lab.rewards.sandbox import UnsafeSandboxWarning
from grpo_lab.rewards.scoring.guard import EVAL
from grpo_lab.rewards.scoring.reach import scorer_modes

pytest.importorskip("reasoning_gym")
import reasoning_gym.factory as factory  # noqa: E402

NINE = ("spiral_matrix", "string_insertion", "binary_matrix", "n_queens", "countdown", "puzzle24",
        "polynomial_multiplication", "simple_integration", "intermediate_integration")
GUARDED = sorted(name for name in factory.DATASETS if scorer_modes(name))
CONFIG = {"seed": 11, "size": 1000}
SITE = site.getsitepackages()[0]
# Each reaches eval in the scorer of every dataset of NINE (shown by test_the_payloads_are_real).
PAYLOADS = {
    "import": "__import__('os').system('touch {mark}')",
    "open": "open('{mark}', 'w').write('x')",
    "attribute walk": "getattr.__self__.open('{mark}', 'w').write('x')",
    "eval": "eval(\"open('{mark}', 'w').write('x')\")",
    "site-packages": f"open('{SITE}/{{name}}-attack.pth', 'w').write('import os')",
    "patch the scorers": "exec(\"import sys\\nfor c, _ in sys.modules['reasoning_gym.factory'].DATASETS.values():"
                         "\\n    c.score_answer = lambda *a, **k: 1.0\")",
    "patch builtins": "exec(\"import builtins\\nbuiltins.len = lambda x: 0\\nbuiltins.float = lambda *a: 1.0\")",
    "fork": "__import__('os').fork()",
}
FORGE = "exec(\"import os\\nfor fd in range(3, 64):\\n    try:\\n        os.write(fd, b'1.0')\\n    except OSError:\\n" \
        "        pass\\nos._exit(0)\")"


def _honest(dataset):
    """(entries, answers, expected): reference answers, near misses, the eval scorers' list
    forms and no answer, with the dataset's own score of each computed here."""
    ds = factory.create_dataset(dataset, **CONFIG)
    entries, answers = [], []
    for index in range(4):
        entry = ds[index]
        reference = str(entry["answer"])
        wrong = reference[:-1] + ("2" if reference.endswith("1") else "1")  # a near miss
        listed = repr(reference.split()) if EVAL in scorer_modes(dataset) else "1"
        for answer in (reference, wrong, listed, None):
            entries.append(entry)
            answers.append(answer)
    return entries, answers, [_own(ds, a, e) for a, e in zip(answers, entries)]


def _own(ds, answer, entry):
    try:
        value = float(ds.score_answer(answer, entry))
    except Exception:
        return 0.0
    return min(max(value, 0.0), 1.0) if math.isfinite(value) else 0.0


@pytest.fixture(scope="module", params=["bwrap", "unsafe-local"])
def worker(request):
    with pytest.warns(UnsafeSandboxWarning) if request.param == "unsafe-local" else contextlib.nullcontext():
        box = ScoringWorker(request.param, timeout_s=1.0)
    yield box
    box.close()


def _prepared(worker, dataset):
    key = scoring._key(dataset, CONFIG)
    worker.prepare("rg", key, (dataset, CONFIG))
    return key


def test_the_payloads_are_real(tmp_path):
    """Called in-process (a throw-away process calling score_answer directly), every payload
    that writes does write, for every one of the nine datasets: the attacks below are real."""
    script = ("import sys, reasoning_gym.factory as f\nds = f.create_dataset(sys.argv[1], seed=11, size=1000)\n"
              "for p in sys.argv[2:]:\n    try:\n        ds.score_answer(p, ds[0])\n    except Exception:\n        pass\n")
    for dataset in NINE:
        marks = {k: tmp_path / f"{dataset}-{k.replace(' ', '-')}" for k in ("import", "open", "attribute walk", "eval")}
        payloads = [PAYLOADS[k].format(mark=m) for k, m in marks.items()]
        subprocess.run([sys.executable, "-c", script, dataset, *payloads], check=True, capture_output=True)
        assert all(m.exists() for m in marks.values()), dataset


def test_attacks_change_nothing_in_the_trainer_and_honest_scores_stay_exact(worker, tmp_path):
    honest_sets = {dataset: _honest(dataset) for dataset in GUARDED}  # imports what scoring them here needs
    scorers = {name: cls.score_answer for name, (cls, _) in factory.DATASETS.items()}
    builtin_ids = {k: id(v) for k, v in vars(builtins).items()}
    modules = set(sys.modules)
    jobs, expected = [], []
    for dataset, (entries, answers, own) in honest_sets.items():
        key = _prepared(worker, dataset)
        for kind, payload in PAYLOADS.items():
            text = payload.format(mark=tmp_path / f"{dataset}-{kind.replace(' ', '-')}", name=dataset)
            jobs.append(protocol.job("rg", key, entries[0], text))
            expected.append(None)
        jobs += [protocol.job("rg", key, e, a) for e, a in zip(entries, answers)]  # after the attacks
        expected += own
    values = worker.score(jobs)
    honest = [(v, e) for v, e in zip(values, expected) if e is not None]
    assert [v for v, _ in honest] == [e for _, e in honest]
    # countdown pays 0.05 for any expression it can evaluate (os.system's status is one); no more
    assert max(v for v, e in zip(values, expected) if e is None) <= 0.05
    assert list(tmp_path.iterdir()) == []
    assert not [p for p in os.listdir(SITE) if p.endswith("-attack.pth")]
    assert {name: cls.score_answer for name, (cls, _) in factory.DATASETS.items()} == scorers
    assert {k: id(v) for k, v in vars(builtins).items()} == builtin_ids and set(sys.modules) == modules
    # the next batch, from fresh children, scores the same honest answers the same
    again = worker.score([j for j, e in zip(jobs, expected) if e is not None])
    assert again == [e for _, e in honest]


@pytest.mark.slow
def test_every_dataset_scores_in_the_worker_exactly_as_in_process():
    """The allowlist, the rlimits and the read-only file system take nothing a scorer needs:
    reference answers, near misses and no answer score the same in the worker as here."""
    worker = scoring.worker_for("bwrap")
    jobs, expected = [], []
    for dataset in sorted(factory.DATASETS):
        try:
            ds = factory.create_dataset(dataset, **CONFIG)
            entries = [ds[0], ds[1]]
        except Exception:  # composite needs a list of datasets to draw from
            continue
        key = _prepared(worker, dataset)
        for entry in entries:
            for answer in (str(entry["answer"]), str(entry["answer"])[:-1] + "1", None):
                jobs.append(protocol.job("rg", key, entry, answer))
                expected.append(_own(ds, answer, entry))
    assert len(jobs) >= 600
    values = worker.score(jobs)
    assert [(job, v) for job, v, e in zip(jobs, values, expected) if v != e] == []


def test_a_forged_reply_is_stopped_by_the_guard_not_the_sandbox(worker):
    """Code inside a child can write its own "1.0" where sympy evaluates it; only the guard
    keeps such code from running."""
    dataset = "countdown"
    key = _prepared(worker, dataset)
    entries, answers, own = _honest(dataset)
    raw = worker.score([protocol.job("rg", key, entries[0], FORGE)] + [protocol.job("rg", key, e, a)
                                                                      for e, a in zip(entries, answers)])
    assert raw == [1.0] + own  # the forgery works inside the child; its batch-mates are untouched
    shared = scoring.worker_for("bwrap")
    sent = shared.answers_scored
    assert scoring.score_rg(dataset, [CONFIG], [entries[0]], [FORGE]) == [0.0]
    assert shared.answers_scored == sent  # refused before it was sent


def test_a_name_in_an_answer_reads_nothing_of_the_scorer(worker):
    """string_insertion's scorer evals the answer where ``oracle_answer`` is a local: inside
    the worker its eval reads literals only, and the guard refuses names inside a display."""
    dataset = "string_insertion"
    key = _prepared(worker, dataset)
    entries, answers, own = _honest(dataset)
    reads = ["oracle_answer", "[oracle_answer]", "list(oracle_answer)", "entry['answer']"]
    raw = worker.score([protocol.job("rg", key, entries[0], a) for a in reads]
                       + [protocol.job("rg", key, e, a) for e, a in zip(entries, answers)])
    assert raw == [0.0] * len(reads) + own
    assert scoring.score_rg(dataset, [CONFIG] * len(reads), [entries[0]] * len(reads), reads) == [0.0] * len(reads)


@pytest.mark.parametrize("dataset", NINE)
def test_the_guard_sends_no_payload_and_every_honest_answer(dataset, tmp_path):
    worker = scoring.worker_for("bwrap")
    entries, answers, own = _honest(dataset)
    payloads = [p.format(mark=tmp_path / "m", name=dataset) for p in PAYLOADS.values()] + [FORGE]
    before = worker.answers_scored
    values = scoring.score_rg(dataset, [CONFIG] * (len(payloads) + len(answers)),
                              [entries[0]] * len(payloads) + entries, payloads + answers)
    assert values == [0.0] * len(payloads) + own
    assert worker.answers_scored - before <= len(answers)  # the honest ones only


def test_spinning_sleeping_and_hoarding_answers_end_at_the_deadline(worker):
    dataset = "spiral_matrix"
    key = _prepared(worker, dataset)
    entries, answers, own = _honest(dataset)
    honest = [protocol.job("rg", key, e, a) for e, a in zip(entries, answers)]
    start = time.monotonic()
    assert worker.score(honest) == own
    honest_s = time.monotonic() - start
    hostile = ["exec('while True: pass')", "__import__('time').sleep(600)", "9**9**9**9",
               "exec('x = bytearray(1 << 34)')", "exec('x = [0] * (1 << 27)\\nwhile True: pass')"]
    start = time.monotonic()
    values = worker.score([protocol.job("rg", key, entries[0], h) for h in hostile] + honest)
    elapsed = time.monotonic() - start
    assert values == [0.0] * len(hostile) + own
    deadline = worker.timeout_s * worker.stretch
    assert elapsed < deadline + 10 * honest_s + 5  # one deadline, not one per answer
    assert _busy_cpu_s(worker) < 0.2  # nothing of the batch still runs


def test_a_batch_of_k_spinning_answers_costs_one_deadline_then_timeout_s_per_workers_of_them():
    """The bound docs/sandbox.md states: D + ceil((k - workers) / workers) * timeout_s (D the
    stretched deadline), plus the honest answers' own time; honest mates keep their scores."""
    cores = os.cpu_count() or 1
    worker = ScoringWorker("bwrap", timeout_s=1.0, workers=2 * cores)
    try:
        key = _prepared(worker, "countdown")
        entries, answers, own = _honest("countdown")
        honest = [protocol.job("rg", key, e, a) for e, a in zip(entries, answers)]
        assert worker.score(honest) == own
        start = time.monotonic()
        assert worker.score(honest) == own
        honest_s = time.monotonic() - start
        k = 8 * worker.workers
        spin = [protocol.job("rg", key, entries[0], f"exec('while True: pass; {i}')") for i in range(k)]
        start = time.monotonic()
        values = worker.score(spin + honest)
        elapsed = time.monotonic() - start
        assert values == [0.0] * k + own
        deadline = worker.timeout_s * worker.stretch
        bound = deadline + math.ceil((k - worker.workers) / worker.workers) * worker.timeout_s
        assert elapsed < bound + 3 * honest_s + 1.5
        assert elapsed < 0.75 * k / worker.workers * deadline  # every spinner at D would cost k / workers * D
    finally:
        worker.close()


def test_math_verify_payloads_change_nothing_and_honest_pairs_stay_exact(tmp_path):
    from math_verify import parse, verify

    pairs = [("\\frac{1}{2}", "0.5"), ("\\sqrt{8}", "2\\sqrt{2}"), ("\\{1,2\\}", "\\{2, 1\\}"), ("3", "4"),
             ("x^2+2x+1", "(x+1)^2"), ("\\pi", "3.14"), ("(1,2]", "(1, 2]")]
    own = [bool(verify(parse(f"${t}$"), parse(f"${m}$"))) for t, m in pairs]
    mark = tmp_path / "m"
    hostile = [p.format(mark=mark, name="math") for p in PAYLOADS.values()] + [
        f"\\text{{{PAYLOADS['import'].format(mark=mark)}}}", f"$ {PAYLOADS['open'].format(mark=mark)} $",
        "1+" * 2000 + "1", "\\frac{" * 300 + "1" + "}" * 300]
    values = scoring.math_verify_equal(["1"] * len(hostile) + [t for t, _ in pairs],
                                       hostile + [m for _, m in pairs])
    assert values[len(hostile):] == own and list(tmp_path.iterdir()) == []


def test_a_template_killed_mid_batch_is_replaced_and_honest_scores_stay_exact(worker):
    dataset = "countdown"
    key = _prepared(worker, dataset)
    entries, answers, own = _honest(dataset)
    jobs = [protocol.job("rg", key, e, a) for e, a in zip(entries, answers)]
    spin = protocol.job("rg", key, entries[0], "exec('while True: pass')")
    worker.score(jobs[:1])  # started
    lost = worker.templates_lost
    killer = threading.Timer(0.5, os.kill, (_template_pid(worker), signal.SIGKILL))
    killer.start()
    assert worker.score([spin] + jobs) == [0.0] + own
    killer.join()
    assert worker.templates_lost == lost + 1


def test_a_stopped_template_is_replaced_and_honest_scores_stay_exact(worker):
    dataset = "countdown"
    key = _prepared(worker, dataset)
    entries, answers, own = _honest(dataset)
    jobs = [protocol.job("rg", key, e, a) for e, a in zip(entries, answers)]
    worker.score(jobs[:1])
    lost, worker.stall_s = worker.templates_lost, 2.0
    try:
        os.kill(_template_pid(worker), signal.SIGSTOP)
        assert worker.score(jobs) == own and worker.templates_lost == lost + 1
        assert worker.score(jobs) == own and worker.templates_lost == lost + 1
    finally:
        worker.stall_s = 20.0


def test_a_template_killed_between_batches_does_not_break_prepare_or_the_next_batch(worker):
    """prepare on a dead control socket replaces the template instead of raising into training."""
    dataset = "countdown"
    key = _prepared(worker, dataset)
    entries, answers, own = _honest(dataset)
    jobs = [protocol.job("rg", key, e, a) for e, a in zip(entries, answers)]
    worker.score(jobs[:1])
    os.killpg(worker._proc.pid, signal.SIGKILL)
    worker._proc.wait()
    worker.prepare("module", "json", None)
    assert worker.score(jobs) == own


def test_a_child_forked_while_another_thread_scores_scores_by_itself():
    """The worker's lock is held by a thread that does not exist in a forked child: the child
    gets it back released, starts its own template and scores exactly."""
    dataset = "countdown"
    entries, answers, own = _honest(dataset)
    shared = scoring.worker_for("bwrap")
    key = _prepared(shared, dataset)
    spin = protocol.job("rg", key, entries[0], "exec('while True: pass; 0')")
    busy = threading.Thread(target=shared.score, args=([spin],))
    busy.start()
    time.sleep(0.5)  # the thread holds the worker's lock until the spinner's deadline
    pid = os.fork()
    if pid == 0:
        values = scoring.score_rg(dataset, [CONFIG] * len(answers), entries, answers)
        os._exit(0 if values == own else 1)
    deadline = time.monotonic() + 120
    while (status := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    if status[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    busy.join()
    assert status[0] == pid and os.waitstatus_to_exitcode(status[1]) == 0


def test_plugin_scorers_run_in_the_worker_and_their_values_are_read_strictly():
    assert scoring.score_calls("operator:truediv", [(1, 4), (1, 0), (3, 1)]) == [0.25, 0.0, 1.0]
    assert scoring.score_calls("builtins:float", [("nan",), ("inf",), ("-1",), ("0.5",)]) == [0.0, 0.0, 0.0, 0.5]
    with pytest.raises(scoring.ScoringError, match="grpo_lab"):  # the project is not visible inside
        scoring.score_calls("grpo_lab.rewards.extract:normalize_number", [("1",)])


@pytest.mark.parametrize("reply, value", [
    (b"1.0", 1.0), (b"0.1", 0.1), (b"0", 0.0), (b"1e-05", 1e-05), (b"0.30000000000000004", 0.30000000000000004),
    (b"", 0.0), (b"nan", 0.0), (b"inf", 0.0), (b"-0.5", 0.0), (b"1.5", 0.0), (b"0x1", 0.0), (b" 1.0", 0.0),
    (b"1.0\n", 0.0), (b"1.0 1.0", 0.0), (b"1" * 40, 0.0), (b"1e5", 0.0), (b"\xff", 0.0), (b"1_0", 0.0)])
def test_a_reply_is_one_finite_number_in_the_unit_interval_or_zero(reply, value):
    assert protocol.parse_reply(reply) == value


def test_without_bwrap_the_worker_refuses_to_start_with_the_fix(tmp_path, monkeypatch):
    from grpo_lab.rewards.sandbox import check_for

    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(scoring.ScoringError, match="apt-get install bubblewrap.*unsafe-local"):
        ScoringWorker("bwrap")
    with pytest.raises(scoring.ScoringError, match="rg:<dataset>"):
        check_for(["rg:leg_counting"], "bwrap")
    with pytest.raises(scoring.ScoringError):
        check_for(["math"], "bwrap", "math-verify")
    check_for(["math", "logic"], "bwrap")  # extract and logic run no third-party scorer


def _tree(pid):
    try:
        kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
    except OSError:
        kids = []
    return [pid] + [p for k in kids for p in _tree(int(k))]


def _template_pid(worker):
    for pid in _tree(worker._proc.pid):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if b"_template.py" in cmd and not cmd.startswith(b"bwrap"):
            return pid
    raise AssertionError("no template process")


def _busy_cpu_s(worker, window_s=0.5):
    """CPU seconds the worker's processes use over ``window_s`` (its idle children wait)."""
    def ticks():
        total = 0
        for pid in _tree(worker._proc.pid):
            try:
                fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])
        return total
    before = ticks()
    time.sleep(window_s)
    return (ticks() - before) / os.sysconf("SC_CLK_TCK")
