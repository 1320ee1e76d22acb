"""What the machine refuses (a full disk, no permission) is one line naming the path, exit code 2, no temporary
file left behind and nothing already written lost, in both scripts. Before: a 30-line traceback, and a full disk
left a .tmp in per_example/."""
import errno
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
import eval as eval_cli
import inference
from Eval import storage
from Eval.args import run_main


def exit_of(main, argv) -> int:
    with pytest.raises(SystemExit) as stop:
        run_main(lambda: main(argv))
    return stop.value.code


def echo_run(out, *extra):
    return inference.main(["--backend", "echo", "--model-name", "m", "--out-dir", str(out), "--datasets",
                           "custom_en", *extra])


def test_a_full_disk_while_scoring_is_one_line_and_leaves_no_temporary(tmp_path):
    out = tmp_path / "pred"
    assert echo_run(out, "--limit", "3") == 0
    assert eval_cli.main(["--pred-root", str(out), "--quiet"]) == 0
    folder = out / "m"
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert echo_run(out, "--limit", "5") == 0  # new predictions to score
    tmp = folder / "per_example" / "custom_en.scores.jsonl.tmp"
    tmp.symlink_to("/dev/full")  # writing there fails with ENOSPC, as on a full disk
    proc = subprocess.run([sys.executable, str(ROOT / "eval.py"), "--pred-root", str(out)], capture_output=True,
                          text=True, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: {tmp}: no space left on the device: free some and rerun "
                                                "the same command (what was saved is kept)"]
    assert not list(folder.rglob("*.tmp")) and not tmp.is_symlink()
    for path in ("result.json", "result_detail.json", "per_example/custom_en.scores.jsonl"):
        assert (folder / path).read_bytes() == before[folder / path]  # the old set, whole


def test_a_full_disk_while_generating_keeps_the_saved_records(tmp_path, monkeypatch, capsys):
    out = tmp_path / "pred"
    assert echo_run(out, "--limit", "3") == 0
    path = out / "m" / "custom_en.jsonl"
    saved = path.read_bytes()

    def full(target, lines):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))

    monkeypatch.setattr("Eval.inference.predictions.append_lines", full)
    assert exit_of(inference.main, ["--backend", "echo", "--model-name", "m", "--out-dir", str(out),
                                    "--datasets", "custom_en", "--limit", "6"]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}: no space left on the device" in err and "Traceback" not in err
    assert path.read_bytes().startswith(saved)
    assert not list((out / "m").rglob("*.tmp"))


def test_no_permission_is_one_line_in_both_scripts(tmp_path, monkeypatch, capsys):
    out = tmp_path / "pred"
    assert echo_run(out, "--limit", "2") == 0
    real_write = storage._fsync_write

    def refused(path, data):  # as when a file of that name is read-only, or the folder is not ours
        if str(path).endswith(("result_detail.json.tmp", ".run.json.tmp")):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_write(path, data)

    monkeypatch.setattr(storage, "_fsync_write", refused)
    assert exit_of(eval_cli.main, ["--pred-root", str(out)]) == 2
    assert exit_of(inference.main, ["--backend", "echo", "--model-name", "m", "--out-dir", str(out),
                                    "--datasets", "custom_en", "--limit", "4"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert lines == [f"error: {out / 'm' / 'result_detail.json.tmp'}: permission denied: choose a folder you can "
                     "write (--out-dir, --pred-root) or fix the permissions",
                     f"error: {out / 'm' / 'custom_en.run.json.tmp'}: permission denied: choose a folder you can "
                     "write (--out-dir, --pred-root) or fix the permissions"]
    assert not list(out.rglob("*.tmp")) and len((out / "m" / "custom_en.jsonl").read_text().splitlines()) == 2
    assert json.loads((out / "m" / "custom_en.run.json").read_text())["output"]["records"] == 2


def test_an_out_dir_under_a_file_is_one_line_naming_it(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    for argv in ([], ["dry-run"]):
        assert exit_of(inference.main, [*argv, "--backend", "echo", "--datasets", "custom_en", "--limit", "1",
                                        "--out-dir", str(tmp_path / "notes.txt" / "pred")]) == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"error: {tmp_path}/notes.txt/pred/tiny-qwen2: a part of this path is a file, not a folder: choose another "
            "path (--out-dir, --pred-root)")
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_a_file_system_without_locks_still_gets_its_records(tmp_path, monkeypatch):
    """Appends hold the file's flock (a repair never cuts one in flight); where the file system has no locks (some
    network mounts: ENOLCK), records are appended unlocked, as before, not refused."""
    import fcntl

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    storage.append_lines(tmp_path / "a.jsonl", ['{"id": 1}\n'])
    (tmp_path / "a.jsonl").write_bytes(b'{"id": 1}\n{"id')  # a torn line, cut all the same
    assert storage.read_complete_lines(tmp_path / "a.jsonl", repair=True) == ([(1, b'{"id": 1}')], True)
    assert (tmp_path / "a.jsonl").read_bytes() == b'{"id": 1}\n'
