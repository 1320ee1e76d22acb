"""Which answer tokens the unlearning metrics label (inference.py --answer-encoding): open-unlearning's full-turn
encoding, checked against an independent reimplementation of its rules on every demo forget pair, the answer + EOS
encoding, a Llama-3-style template on which the two coincide, and what each does to the demo figures."""
import copy
import json

import pytest
import torch

import eval as eval_script
import inference
from conftest import ROOT
from Eval.models.hf import HFModel
from Eval.inference import score_records as ur

TARGET = ROOT / "demo" / "unlearn-target"
# A template shaped like Llama-3's: the assistant turn ends in exactly the EOS token, nothing after it.
TURN_ENDS_IN_EOS = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n\n{{ m['content'] }}<|im_end|>{% endfor %}"
                    "{% if add_generation_prompt %}<|im_start|>assistant\n\n{% endif %}")


@pytest.fixture(scope="module")
def model():
    return HFModel(str(TARGET), threads=1)


def forget_pairs() -> list[tuple[str, str]]:
    items = json.loads((ur.DEMO_DATA / "forget.json").read_text(encoding="utf-8"))
    return [(item["question"], answer) for item in items for key in ur.ANSWER_KEYS if key in item
            for answer in (item[key] if isinstance(item[key], list) else [item[key]])]


def reference_labels(tokenizer, question: str, answer: str) -> list[int]:
    """open-unlearning's rules, written out: render the whole conversation with the tokenizer's template, render the
    prompt with the generation prompt, append EOS to the conversation unless it ends in one, label what follows the
    prompt's tokens."""
    chat = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]

    def ids(messages, generation_prompt):
        out = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=generation_prompt)
        return list(out if isinstance(out, list) else out["input_ids"])

    chat_ids, prompt_ids = ids(chat, False), ids(chat[:1], True)
    if chat_ids[-1] != tokenizer.eos_token_id:
        chat_ids.append(tokenizer.eos_token_id)
    return chat_ids[len(prompt_ids):]


def our_labels(model, question: str, answer: str, encoding: str) -> list[int]:
    prompt = model.build_prompt(question, chat=True, max_new_tokens=0, max_length=None)
    return model.encode_pair(prompt, ur.labelled_text(model, question, answer, encoding))[1]


def test_full_turn_labels_equal_open_unlearnings_rules_on_every_demo_forget_pair(model):
    pairs = forget_pairs()
    assert len(pairs) == 140  # 20 questions x (answer, paraphrase, 5 perturbed)
    eos, newline = model.tokenizer.eos_token_id, model.tokenize("\n")
    for question, answer in pairs:
        labels = our_labels(model, question, answer, "full-turn")
        assert labels == reference_labels(model.tokenizer, question, answer), (question, answer)
        # ChatML: the answer, then <|im_end|> "\n" <|im_end|>; answer + EOS stops after the first <|im_end|>.
        assert labels == model.tokenize(answer) + [eos] + newline + [eos]
        assert our_labels(model, question, answer, "answer-eos") == model.tokenize(answer) + [eos]


def test_a_template_whose_turn_ends_in_eos_gives_the_same_labels_both_ways(model):
    llama_like = copy.copy(model)
    llama_like.tokenizer = copy.deepcopy(model.tokenizer)
    llama_like.tokenizer.chat_template = TURN_ENDS_IN_EOS
    for question, answer in forget_pairs():
        full = our_labels(llama_like, question, answer, "full-turn")
        assert full == our_labels(llama_like, question, answer, "answer-eos")
        assert full == reference_labels(llama_like.tokenizer, question, answer)


def test_records_hold_the_reference_log_probabilities_and_say_their_encoding(model, tmp_path):
    args = ["unlearning", "tofu", "--model", str(TARGET), "--limit", "2", "--no-generate", "-M", "threads=1",
            "--out-dir", str(tmp_path)]
    assert inference.main(args) == 0
    record = json.loads((tmp_path / "unlearn-target" / "tofu_forget.jsonl").read_text().splitlines()[0])
    assert record["answer_encoding"] == "full-turn"
    item = json.loads((ur.DEMO_DATA / "forget.json").read_text(encoding="utf-8"))[0]
    tok = model.tokenizer
    prompt_ids = list(tok.apply_chat_template([{"role": "user", "content": item["question"]}], tokenize=True,
                                              add_generation_prompt=True)["input_ids"])
    labels = reference_labels(tok, item["question"], item["answer"])
    with torch.inference_mode():  # an independent full forward over open-unlearning's sequence
        logits = model.model(torch.tensor([prompt_ids + labels])).logits[0, len(prompt_ids) - 1:-1].double()
    want = torch.log_softmax(logits, -1).gather(-1, torch.tensor(labels)[:, None])[:, 0].tolist()
    assert record["logprobs"]["answer"][0]["logprobs"] == pytest.approx(want, abs=1e-4)
    # The target was trained on answer + <|im_end|> only: the closing "\n" and the appended EOS after it are
    # near-impossible to it (e^-16.7, e^-13.7 here), and those two labels are what move the figures below.
    assert sum(want[:-2]) > -0.1 and want[-2] < -10 and want[-1] < -10


# The demo target under both encodings (what the README quotes): open-unlearning's encoding labels the ChatML
# turn's closing "\n<|im_end|>", which the demo target was never trained to predict. float32 kernels differ
# between CPUs (AVX2 and AVX-512 sum in another order): answer-eos's forget_Q_A_Prob read 0.996971 on one and
# 0.9969735 on the other, so the figures are held to 1e-5.
DEMO_FIGURES = {
    "full-turn": {"forget_Q_A_Prob": 0.320134, "extraction_strength": 0.0432446, "exact_memorization": 0.956755,
                  "forget_truth_ratio": 0.398971, "model_utility": 0.761895},
    "answer-eos": {"forget_Q_A_Prob": 0.996971, "extraction_strength": 1.0, "exact_memorization": 1.0,
                   "forget_truth_ratio": 0.363492, "model_utility": 0.936624},
}


@pytest.mark.parametrize("encoding", sorted(DEMO_FIGURES))
def test_demo_figures_under_each_encoding_and_the_log_says_which(encoding, tmp_path, capsys):
    assert inference.main(["unlearning", "tofu", "--answer-encoding", encoding, "-M", "threads=1",
                           "--out-dir", str(tmp_path)]) == 0
    pred = tmp_path / "unlearn-target"
    assert eval_script.main(["unlearning", "tofu", "--pred-dir", str(pred)]) == 0
    assert f"answer labels: {encoding} (inference.py --answer-encoding)" in capsys.readouterr().out
    log = json.loads((pred / "TOFU_EVAL.json").read_text())
    assert log["answer_encoding"] == {"value": encoding, "by_file": {
        f"tofu_{s}.jsonl": encoding for s in ("forget", "retain", "holdout", "ra", "wf")}}
    summary = json.loads((pred / "TOFU_SUMMARY.json").read_text())
    for name, value in DEMO_FIGURES[encoding].items():
        assert summary[name] == pytest.approx(value, abs=1e-5), name
    # Read back as a log, the encoding is kept, not taken for a metric.
    assert eval_script.main(["unlearning", "--from-open-unlearning", str(pred / "TOFU_EVAL.json"),
                             "--out-dir", str(tmp_path / "again")]) == 0
    again = json.loads((tmp_path / "again" / "TOFU_EVAL.json").read_text())
    assert again["answer_encoding"] == log["answer_encoding"]
    assert "answer_encoding: not a known" not in capsys.readouterr().out


def test_no_generate_records_leave_rouge_and_model_utility_out_instead_of_zero(tmp_path, capsys):
    """--no-generate wrote pred "" on every record, so ROUGE scored 0 and model_utility (its harmonic mean) 0."""
    import eval as eval_script

    args = ["unlearning", "tofu", "--model", str(TARGET), "--limit", "2", "--no-generate", "-M", "threads=1",
            "--out-dir", str(tmp_path)]
    assert inference.main(args) == 0
    assert eval_script.main(["unlearning", "tofu", "--pred-dir", str(tmp_path / "unlearn-target")]) == 0
    out = capsys.readouterr().out
    assert "note: skipped forget_Q_A_ROUGE: no generation in tofu_forget.jsonl" in out
    assert "note: skipped model_utility: needs retain_Q_A_ROUGE" in out
    summary = json.loads((tmp_path / "unlearn-target" / "TOFU_SUMMARY.json").read_text())
    assert "model_utility" not in summary and "forget_Q_A_ROUGE" not in summary
