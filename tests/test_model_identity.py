"""What identifies a model (Eval/models/identity.py): every file that determines its outputs, hashed in full and
cached. A checkpoint changed in place is run again; a copied or renamed one is not. Each edit below resumed
silently before (only the first shard's first MiB was hashed, and config, tokenizer and adapter not at all)."""
import json
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from api_fakes import fake  # noqa: F401  (a pytest fixture)
from conftest import ROOT, needs_package
import inference
from Eval.models import identity

DEMO = ROOT / "demo" / "tiny-qwen2"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """The demo model saved as two safetensors shards (its own tokenizer files beside them)."""
    from transformers import AutoModelForCausalLM

    folder = tmp_path_factory.mktemp("sharded") / "ckpt"
    AutoModelForCausalLM.from_pretrained(DEMO).save_pretrained(folder, max_shard_size="4MB")
    for name in TOKENIZER_FILES:
        shutil.copy(DEMO / name, folder)
    assert (folder / "model-00002-of-00002.safetensors").is_file()
    return folder


def run(model, out, capsys, *extra):
    code = inference.main(["--model", str(model), "--model-name", "m", "--datasets", "custom_en", "--limit", "2",
                           "--out-dir", str(out), *extra])
    assert code == 0
    return next(line for line in capsys.readouterr().out.splitlines() if line.startswith("custom_en:"))


def model_hashes(out):
    return {json.loads(line)["model_sha256"] for line in (out / "m" / "custom_en.jsonl").open(encoding="utf-8")}


def edit_second_shard(folder):
    """One value of the last tensor of the second shard: same size, same first MiB (as a LoRA merge leaves it)."""
    shard = folder / "model-00002-of-00002.safetensors"
    head, size = shard.read_bytes()[: 1 << 20], shard.stat().st_size
    tensors = load_file(shard)
    last = sorted(tensors)[-1]
    tensors[last] = tensors[last].clone()
    tensors[last].view(-1)[-1] += 0.5
    save_file(tensors, shard, metadata={"format": "pt"})
    assert shard.stat().st_size == size and shard.read_bytes()[: 1 << 20] == head
    return "model-00002-of-00002.safetensors"


def edit_json(name, change):
    def edit(folder):
        path = folder / name
        content = json.loads(path.read_text(encoding="utf-8"))
        change(content)
        path.write_text(json.dumps(content, ensure_ascii=False), encoding="utf-8")
        return name
    return edit


def halve_merges(content):
    content["model"]["merges"] = content["model"]["merges"][: len(content["model"]["merges"]) // 2]


EDITS = {"a tensor deep in the second shard": edit_second_shard,
         "config.json": edit_json("config.json", lambda c: c.update(rms_norm_eps=1e-3)),
         # the window, which is --max-length's default: had been refused as "other settings" instead
         "config.json's window": edit_json("config.json", lambda c: c.update(max_position_embeddings=4096)),
         "generation_config.json": edit_json("generation_config.json", lambda c: c.update(eos_token_id=[0])),
         "tokenizer.json": edit_json("tokenizer.json", halve_merges)}


@pytest.mark.parametrize("edit", EDITS.values(), ids=EDITS.keys())
def test_a_checkpoint_changed_in_place_is_run_again(edit, sharded, tmp_path, capsys):
    folder = tmp_path / "ckpt"
    shutil.copytree(sharded, folder)
    out = tmp_path / "pred"
    assert run(folder, out, capsys).startswith("custom_en: 2 new")
    before = model_hashes(out)
    changed = edit(folder)
    line = run(folder, out, capsys)
    assert "2 made by another model" in line and changed in line and "0 already done" in line
    after = model_hashes(out)
    assert len(after) == 1 and after != before
    assert run(folder, out, capsys) == "custom_en: 0 new, 2 already done (nothing to do: no model loaded)"


def test_a_copied_or_renamed_checkpoint_redoes_nothing(sharded, tmp_path, capsys):
    out = tmp_path / "pred"
    copy = tmp_path / "copy"
    shutil.copytree(sharded, copy)
    assert run(copy, out, capsys).startswith("custom_en: 2 new")
    renamed = tmp_path / "renamed"
    copy.rename(renamed)  # a checkpoint is its files: moved, copied, linked or named relatively, nothing to do
    assert run(renamed, out, capsys) == "custom_en: 0 new, 2 already done (nothing to do: no model loaded)"
    shutil.copytree(renamed, tmp_path / "again")
    (tmp_path / "link").symlink_to(tmp_path / "again", target_is_directory=True)
    for model in (os.path.relpath(tmp_path / "again"), tmp_path / "link"):  # from the project folder
        assert run(model, out, capsys) == "custom_en: 0 new, 2 already done (nothing to do: no model loaded)"
    line = run(tmp_path / "link", out, capsys, "-M", "threads=1")  # another request: the model loads, finds nothing
    assert "0 new, 2 already done" in line and line.endswith("0 generated tokens, 0 cut, 0.0 s, 0.0 gen tok/s")


def test_another_checkpoint_with_the_same_folder_name_is_refused_not_replaced(tmp_path, capsys):
    """run1/checkpoint-500 and run2/checkpoint-500 share the default output folder: the second run used to redo
    (replace) the first one's records as if the checkpoint had been retrained in place."""
    first, second = tmp_path / "run1" / "checkpoint-500", tmp_path / "run2" / "checkpoint-500"
    shutil.copytree(DEMO, first)
    shutil.copytree(DEMO, second)
    edit_json("config.json", lambda c: c.update(rms_norm_eps=1e-3))(second)
    out = tmp_path / "pred"
    argv = ["--datasets", "custom_en", "--limit", "2", "--out-dir", str(out)]
    assert inference.main(["--model", str(first), *argv]) == 0
    folder = out / "checkpoint-500"
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    capsys.readouterr()
    assert inference.main(["--model", str(second), *argv]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: {folder / 'custom_en.jsonl'}: its records were made by another model, {first} (hf backend), not "
        f"this run's {second} (hf backend); set --model-name NAME to keep both (or --overwrite to replace them)")
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    assert inference.main(["--model", str(second), *argv, "--model-name", "run2"]) == 0
    assert inference.main(["--model", str(first), *argv]) == 0
    assert "custom_en: 0 new, 2 already done" in capsys.readouterr().out
    assert inference.main(["--model", str(second), *argv, "--overwrite"]) == 0
    assert "custom_en: 2 new" in capsys.readouterr().out


def test_the_echo_backends_records_in_the_models_folder_are_refused_naming_the_backend(tmp_path, capsys):
    """`inference.py --backend echo` writes to the default model's folder; the real run then said only
    "the existing predictions were made with different max_length", and with the same settings would have
    replaced them as a retrained checkpoint's."""
    argv = ["--model", str(DEMO), "--datasets", "custom_en", "--limit", "2", "--out-dir", str(tmp_path)]
    assert inference.main([*argv, "--backend", "echo"]) == 0
    folder = tmp_path / DEMO.name
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    capsys.readouterr()
    assert inference.main([*argv, "--max-length", "4096"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: {folder / 'custom_en.jsonl'}: its records were made by another model, the echo backend's, not "
        f"this run's {DEMO} (hf backend); set --model-name NAME to keep both (or --overwrite to replace them)")
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    assert inference.main([*argv, "--max-length", "4096", "--model-name", "tiny"]) == 0


def test_a_moved_checkpoint_with_another_dtype_is_redone_per_record_not_refused(tmp_path, capsys):
    """The same files at another path are the same model: another setting (dtype) redoes its records."""
    first, moved = tmp_path / "run1" / "checkpoint-500", tmp_path / "run2" / "checkpoint-500"
    shutil.copytree(DEMO, first)
    argv = ["--datasets", "custom_en", "--limit", "2", "--out-dir", str(tmp_path / "pred")]
    assert inference.main(["--model", str(first), *argv]) == 0
    path = tmp_path / "pred" / "checkpoint-500" / "custom_en.jsonl"
    before = {json.loads(line)["model_sha256"] for line in path.read_text(encoding="utf-8").splitlines()}
    shutil.move(first, moved)
    capsys.readouterr()
    assert inference.main(["--model", str(moved), "-M", "dtype=bfloat16", *argv]) == 0
    after = {json.loads(line)["model_sha256"] for line in path.read_text(encoding="utf-8").splitlines()}
    assert len(before) == len(after) == 1 and before != after
    assert "another model" not in capsys.readouterr().err


def test_the_done_line_counts_the_records_made_by_another_model(tmp_path, capsys):
    folder = tmp_path / "ckpt"
    shutil.copytree(DEMO, folder)
    run(folder, tmp_path / "pred", capsys)
    edit_json("config.json", lambda c: c.update(rms_norm_eps=1e-3))(folder)
    assert inference.main(["--model", str(folder), "--model-name", "m", "--datasets", "custom_en", "--limit", "2",
                           "--out-dir", str(tmp_path / "pred")]) == 0
    done = capsys.readouterr().out.splitlines()[-1]
    assert done.startswith("done: 2 examples (0 new, 0 changed, 2 made by another model, 0 failed "
                           "before; 0 already done, 0 removed)"), done


def test_a_retrained_adapter_is_run_again(tmp_path, capsys):
    peft = needs_package("peft")
    from transformers import AutoModelForCausalLM

    def save_adapter(seed):
        torch.manual_seed(seed)
        config = peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        peft.get_peft_model(AutoModelForCausalLM.from_pretrained(DEMO), config).save_pretrained(tmp_path / "lora")

    save_adapter(0)
    out = tmp_path / "pred"
    assert run(DEMO, out, capsys, "-M", f"peft={tmp_path / 'lora'}").startswith("custom_en: 2 new")
    save_adapter(1)  # the same folder, other weights
    line = run(DEMO, out, capsys, "-M", f"peft={tmp_path / 'lora'}")
    assert "2 made by another model" in line and "adapter_model.safetensors" in line


def test_a_hub_model_is_its_cached_snapshot_and_a_new_revision_is_run_again(tmp_path, capsys, monkeypatch):
    """--model org/name loads the revision the Hugging Face cache's main points at; once another is fetched, its
    records are redone (before: 'nothing to do', the old revision's answers kept as the new one's)."""
    from huggingface_hub import constants

    repo = tmp_path / "hub" / "models--acme--tiny"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # as on a cluster node: the cache only
    (repo / "refs").mkdir(parents=True)
    for revision in ("a1", "b2"):
        shutil.copytree(DEMO, repo / "snapshots" / revision)
    tensors = load_file(repo / "snapshots" / "b2" / "model.safetensors")
    tensors["model.embed_tokens.weight"] *= 0.5  # another revision: other weights
    save_file(tensors, repo / "snapshots" / "b2" / "model.safetensors", metadata={"format": "pt"})
    (repo / "refs" / "main").write_text("a1")
    assert run("acme/tiny", tmp_path / "pred", capsys).startswith("custom_en: 2 new")
    assert run("acme/tiny", tmp_path / "pred", capsys).endswith("(nothing to do: no model loaded)")
    (repo / "refs" / "main").write_text("b2")  # what `hf download acme/tiny` does for a new revision
    line = run("acme/tiny", tmp_path / "pred", capsys)
    assert "2 made by another model" in line and "model.safetensors" in line, line
    assert run("acme/tiny", tmp_path / "pred", capsys).endswith("(nothing to do: no model loaded)")


def test_file_hashes_are_cached_by_stat_and_a_change_is_seen(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_HASH_CACHE", str(tmp_path / "cache.json"))
    folder = tmp_path / "ckpt"
    shutil.copytree(DEMO, folder)
    first = identity.folder_identity(folder)
    assert set(first["files"]) >= {"model.safetensors", "config.json", "tokenizer.json", "chat_template.jinja"}

    def no_reading(*args, **kwargs):
        raise AssertionError("an unchanged file was read again")

    real = identity.hashlib.file_digest
    monkeypatch.setattr(identity.hashlib, "file_digest", no_reading)
    assert identity.folder_identity(folder) == first  # one stat per file, nothing read
    (folder / "config.json").write_text((folder / "config.json").read_text() + " ")
    with pytest.raises(AssertionError, match="read again"):
        identity.folder_identity(folder)
    monkeypatch.setattr(identity.hashlib, "file_digest", real)
    second = identity.folder_identity(folder)
    assert identity.changed_files(first, second) == ["config.json"]
    (folder / "README.md").write_text("notes")  # not a file that determines outputs
    (folder / "optimizer.pt").write_bytes(b"training state")
    (folder / "eval_results.json").write_text('{"eval_loss": 1.5}')  # a trainer's metrics, not the model
    assert identity.folder_identity(folder) == second


def test_a_served_model_is_identified_by_server_name_root_and_tokenizer(fake, tmp_path, capsys, monkeypatch):
    """--backend api: the same served name behind another base URL, a server now serving another checkpoint
    under that name, and an edited local tokenizer each redo the examples (before, only the name was compared)."""
    from api_fakes import answer

    first = fake(lambda path, body, n: answer(path, " Entity"), [{"id": "default", "root": "/ckpt/a"}])
    second = fake(lambda path, body, n: answer(path, " Entity"), [{"id": "default", "root": "/ckpt/a"}])
    tokenizer = tmp_path / "tokenizer"
    shutil.copytree(DEMO, tokenizer)
    out = tmp_path / "pred"

    def run_api(server):
        assert inference.main(["--backend", "api", "-M", f"base_url={server.base_url}", "-M", "api_model=default",
                               "-M", f"tokenizer={tokenizer}", "--model-name", "m", "--datasets", "demo_trec",
                               "--limit", "2", "--out-dir", str(out)]) == 0
        return next(line for line in capsys.readouterr().out.splitlines() if line.startswith("demo_trec:"))

    assert run_api(first).startswith("demo_trec: 2 new")
    assert "0 new, 2 already done" in run_api(first)
    assert "2 made by another model (redone: the model's files or settings changed: base_url)" in run_api(second)
    second.models[0]["root"] = "/ckpt/b"  # the server now serves another checkpoint under the same name
    assert "2 made by another model (redone: the model's files or settings changed: server_model)" in \
        run_api(second)
    edit_json("tokenizer.json", halve_merges)(tokenizer)
    assert "changed: tokenizer.json" in run_api(second)
    sidecar = json.loads((out / "m" / "demo_trec.run.json").read_text(encoding="utf-8"))
    assert sidecar["model"]["server_model"] == "/ckpt/b"
    assert "tokenizer.json" in sidecar["model"]["tokenizer_files"]["files"]


def test_pickle_weights_load_only_when_allowed_and_safetensors_always(tmp_path, capsys):
    """-M allow_pickle=true meant use_safetensors=False: a safetensors checkpoint no longer loaded; a checkpoint of
    pickle weights only was refused naming just the safetensors file it lacked; a pickle adapter loaded unasked."""
    peft = needs_package("peft")
    from transformers import AutoModelForCausalLM

    argv = ["--datasets", "custom_en", "--limit", "2", "--max-new-tokens", "4", "-M", "threads=1"]
    assert inference.main(["--model", str(DEMO), "-M", "allow_pickle=true", *argv, "--out-dir", str(tmp_path)]) == 0
    pickled = tmp_path / "pickled"
    shutil.copytree(DEMO, pickled, ignore=shutil.ignore_patterns("*.safetensors"))
    model = AutoModelForCausalLM.from_pretrained(DEMO)
    torch.save(model.state_dict(), pickled / "pytorch_model.bin")
    lora = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["q_proj"]))
    lora.save_pretrained(tmp_path / "lora")
    torch.save(load_file(tmp_path / "lora" / "adapter_model.safetensors"), tmp_path / "lora" / "adapter_model.bin")
    (tmp_path / "lora" / "adapter_model.safetensors").unlink()
    capsys.readouterr()
    for model_argv, flag, found in ((["--model", str(pickled)], "--model", pickled / "pytorch_model.bin"),
                                    (["--model", str(DEMO), "-M", f"peft={tmp_path / 'lora'}"], "-M peft",
                                     tmp_path / "lora" / "adapter_model.bin")):
        assert inference.main([*model_argv, *argv, "--out-dir", str(tmp_path / "refused")]) == 2
        assert capsys.readouterr().err == (f"error: could not load model: {flag}: {found} holds pickle weights, "
                                           "which can run code when loaded; -M allow_pickle=true loads them (files "
                                           "you trust only)\n")
        assert inference.main([*model_argv, *argv, "-M", "allow_pickle=true", "--model-name", "m",
                               "--out-dir", str(tmp_path / "allowed"), "--overwrite"]) == 0
        capsys.readouterr()
    same = [json.loads(line)["pred"] for line in (tmp_path / "tiny-qwen2" / "custom_en.jsonl").open()]
    assert same == [json.loads(line)["pred"] for line in (tmp_path / "allowed" / "m" / "custom_en.jsonl").open()]


def test_a_changed_setting_is_refused_before_the_model_loads_unless_the_checkpoint_changed(tmp_path, capsys,
                                                                                          monkeypatch):
    """A rerun with another template, option or --max-length was refused only after the weights had loaded
    (minutes for a large checkpoint); the checkpoint's cached file hashes tell it before. A retrained
    checkpoint with new settings is still run: all its records are redone."""
    import transformers

    ckpt, prompts = tmp_path / "ckpt", tmp_path / "prompts"
    shutil.copytree(DEMO, ckpt)
    shutil.copytree(ROOT / "prompts", prompts)
    argv = ["--model", str(ckpt), "--datasets", "custom_en", "--limit", "2", "--out-dir", str(tmp_path / "pred"),
            "--prompt-dir", str(prompts)]
    assert inference.main(argv) == 0
    folder = tmp_path / "pred" / "ckpt"
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    with monkeypatch.context() as patch:
        for auto in (transformers.AutoModelForCausalLM, transformers.AutoTokenizer):
            patch.setattr(auto, "from_pretrained", lambda *a, **k: pytest.fail("a tokenizer or model was loaded"))
        (prompts / "custom_en.txt").write_text("Q: {input}\nA:", encoding="utf-8")
        for extra, changed in (([], "template_sha256"), (["--max-length", "999"], "max_length, template_sha256")):
            capsys.readouterr()
            assert inference.main([*argv, *extra]) == 2
            assert capsys.readouterr().err.splitlines()[-1] == (
                f"error: {folder / 'custom_en.run.json'}: the existing predictions were made with different "
                f"{changed}; rerun with --overwrite (--shard runs: delete the folder) to start afresh, or choose "
                "another --out-dir")
        shutil.copytree(ROOT / "prompts", prompts, dirs_exist_ok=True)
        assert inference.main([*argv, "-M", "system_prompt=Be brief."]) == 2
        assert "made with different options;" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    edit_json("config.json", lambda c: c.update(rms_norm_eps=1e-3))(ckpt)
    assert inference.main([*argv, "-M", "system_prompt=Be brief."]) == 0
    assert "custom_en: 0 new, 2 made by another model (redone: the model's files or settings changed: " \
        "config.json)" in capsys.readouterr().out
