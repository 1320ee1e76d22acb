"""The lm-eval bridge gives lm-eval's own numbers: the same local tasks of all four output types run through lm-eval's
HF model (HFLM) and through BridgeLM on our HFModel, both on the demo model with a 64-token window, offline. Requests
whose context/continuation cut falls inside a token, an empty context, an over-long pair and rolling texts of more
than two windows are among them. Also: each encoding convention against a plain forward pass, the request lm-eval
itself cannot score, the text path for adapters without score_ids."""
import copy
import json
import os

import pytest

from conftest import ROOT, needs_package

needs_package("lm_eval")
from test_lm_eval_bridge import TEXTS as SHORT_TEXTS, full_forward, pair_forward, request  # noqa: E402
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # local JSONL tasks only; never reach for the Hub
os.environ.setdefault("HF_HUB_OFFLINE", "1")
DEMO = ROOT / "demo" / "tiny-qwen2"
WINDOW = 64
LONG = "Frozen water is called ice. " * 12  # 84 tokens: pairs after it are cut on the left to 65 tokens
CUTS = [  # loglikelihood (context, continuation): the first four cut inside a token of the joined text
    ("Frozen water is ca", "lled ice."), ("Question: Which team wo", "n the first FIFA World Cup?"),
    ("Question: How much does an adult African elephant weigh?\nTy", "pe: Human"),  # lm-eval scores " Human"
    (LONG + "Two people were hu", "rt in a fire."), ("", "Two people were hurt in a fire."),
    ("Question: How much does an adult African elephant weigh?\nType:", " Human"), (LONG + "Answer:", " Water"),
]
CHOICES = [  # multiple_choice with target_delimiter "": (context, choices, label)
    ("Frozen water is ca", ["lled ice.", "me back.", "used ice."], 0),
    ("Question: Which team won the first FIFA World Cup in 1930?\nType:", [" Human", " Location", " Entity"], 0),
    (LONG + "Question: What is frozen water called?\nAnswer: wa", ["ter.", "ice.", "x."], 1),
]
TEXTS = ["Frozen water is called ice. Two people were hurt in a fire. " * 7,
         "小镇的名字是青石镇。人民币57081.86元。" * 9, "The shop was opened in 1974 by Ada Whitlock. " * 9]
QUESTIONS = ["How many sides does a hexagon have?", "What is the hardest natural substance?"]
TASKS = {  # task -> (YAML body, docs)
    "p_mc": ('output_type: multiple_choice\ndoc_to_text: "{{context}}"\ndoc_to_choice: "{{choices}}"\n'
             'doc_to_target: label\ntarget_delimiter: ""\nmetric_list: [{metric: acc}, {metric: acc_norm}]\n',
             [{"context": c, "choices": ch, "label": y} for c, ch, y in CHOICES]),
    "p_ll": ('output_type: loglikelihood\ndoc_to_text: "{{context}}"\ndoc_to_target: "{{continuation}}"\n'
             'metric_list: [{metric: acc}, {metric: perplexity}]\n',
             [{"context": c, "continuation": x} for c, x in CUTS]),
    "p_ppl": ('output_type: loglikelihood_rolling\ndoc_to_text: ""\ndoc_to_target: "{{text}}"\n'
              'metric_list: [{metric: word_perplexity}, {metric: byte_perplexity}, {metric: bits_per_byte}]\n',
              [{"text": t} for t in TEXTS]),
    "p_gen": ('output_type: generate_until\ndoc_to_text: "Question: {{question}}\\nAnswer:"\n'
              'doc_to_target: "{{question}}"\ngeneration_kwargs: {until: ["\\n"], max_gen_toks: 8, do_sample: false}\n'
              "metric_list: [{metric: exact_match}]\n", [{"question": q} for q in QUESTIONS]),
}


@pytest.fixture(scope="module")
def model():
    from Eval.models.hf import HFModel

    return HFModel(str(DEMO), threads=1)


@pytest.fixture(scope="module")
def hflm():
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=str(DEMO), device="cpu", batch_size=4, max_length=WINDOW)


@pytest.fixture(scope="module")
def manager(tmp_path_factory):
    from lm_eval.tasks import TaskManager

    root = tmp_path_factory.mktemp("parity_tasks")
    for task, (body, docs) in TASKS.items():
        data = root / f"{task}.jsonl"
        data.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), "utf-8")
        header = (f"task: {task}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\n"
                  f"  cache_dir: {root / 'hf_cache'}\ntest_split: test\n")
        (root / f"{task}.yaml").write_text(header + body, encoding="utf-8")
    return TaskManager(include_path=str(root), include_defaults=False)


def evaluate(lm, manager) -> dict:
    from lm_eval import simple_evaluate

    return simple_evaluate(model=lm, tasks=list(TASKS), task_manager=manager, bootstrap_iters=0, log_samples=True)


@pytest.fixture(scope="module")
def runs(model, hflm, manager):
    """(lm-eval's results, the bridge's results, the bridge) on the same tasks."""
    from Eval.inference.lm_eval_bridge import BridgeLM

    bridge = BridgeLM(model, batch_size=4, max_length=WINDOW)
    return evaluate(hflm, manager), evaluate(bridge, manager), bridge


def responses(results: dict, task: str) -> list:
    return [response for row in results["samples"][task] for response in row["resps"]]


def test_every_loglikelihood_matches_lm_evals_own_hf_model(runs):
    want, got, bridge = runs
    for task in ("p_mc", "p_ll"):
        theirs, ours = responses(want, task), responses(got, task)
        assert len(ours) == len(theirs) == {"p_mc": 9, "p_ll": 7}[task]
        for (their_ll, their_greedy), (our_ll, our_greedy) in zip([r[0] for r in theirs], [r[0] for r in ours]):
            assert our_ll == pytest.approx(their_ll, abs=1e-4) and our_greedy == their_greedy
    assert any(greedy for (_, greedy), in responses(got, "p_ll"))  # (greedy flags of both values are compared)
    # cuts inside a token: 4 pairs, the 3 choices after "ca" and "ter." after "wa"; the two long pairs and the
    # long question's three choices are cut on the left as lm-eval cuts them
    assert dict(+bridge.stats) == {"boundary_merges": 8, "left_truncated_inputs": 5}


def test_rolling_windows_and_generations_match_lm_eval(runs, model):
    want, got, _ = runs
    lengths = [len(model.tokenize(t)) for t in TEXTS]
    assert min(lengths) > 2 * WINDOW  # three windows or more each
    theirs, ours = [r[0] for r in responses(want, "p_ppl")], [r[0] for r in responses(got, "p_ppl")]
    assert ours == pytest.approx(theirs, abs=1e-4)
    assert max(abs(a - b) for a, b in zip(ours, theirs)) > 0  # lm-eval sums float32, the bridge float64
    assert responses(got, "p_gen") == responses(want, "p_gen") and any(r[0].strip() for r in responses(got, "p_gen"))


def test_aggregate_metrics_print_the_same(runs):
    """make_table's lines are equal, but for perplexities over 1e6 (the demo model's is ~1e11 a word): their 4th
    decimal is the 16th digit, and a log-likelihood d nats off scales a perplexity by e^d, so with the
    per-request tolerance of 1e-4 nats they agree to a relative 1e-4."""
    from lm_eval.utils import make_table

    want, got, _ = runs
    huge = []
    for mine, theirs in zip(make_table(got).splitlines(), make_table(want).splitlines(), strict=True):
        mine, theirs = mine.split("|"), theirs.split("|")
        if theirs[5].strip().endswith("perplexity") and float(theirs[7]) > 1e6:
            huge.append(theirs[5].strip())
            assert float(mine[7]) == pytest.approx(float(theirs[7]), rel=1e-4)
            mine[7] = theirs[7]
        assert mine == theirs
    assert huge == ["perplexity", "word_perplexity"]
    assert got["results"]["p_mc"]["acc,none"] == want["results"]["p_mc"]["acc,none"] == 1 / 3


def test_a_request_lm_eval_cannot_score_is_scored_apart_and_counted(model, hflm):
    from Eval.inference.lm_eval_bridge import BridgeLM

    pair = ("Achterberg, 49, joi", "ned the credit")  # " joined" swallows the cut: no continuation token is left
    with pytest.raises(AssertionError):
        hflm.loglikelihood([request("loglikelihood", *pair)])
    # beside a one-token continuation of the same context, lm-eval's logits cache answers it: certain, greedy
    assert hflm.loglikelihood([request("loglikelihood", *pair), request("loglikelihood", pair[0], ".")])[0] \
        == (0.0, True)
    bridge = BridgeLM(model, max_length=WINDOW)
    (got, greedy), = bridge.loglikelihood([request("loglikelihood", *pair)])
    assert got == pytest.approx(sum(model.score([pair])[0].logprobs), abs=1e-6) and got < -1
    assert dict(bridge.stats) == {"boundary_merges": 1, "unscorable_in_lm_eval_encoding": 1}


def test_adapters_without_score_ids_are_scored_as_text_and_say_so(model, caplog):
    from Eval.inference.lm_eval_bridge import BridgeLM

    text_only = copy.copy(model)
    text_only.capabilities = model.capabilities - {"score_ids"}
    bridge = BridgeLM(text_only, max_length=WINDOW)
    assert "requests are scored as text (score(): the adapter has no score_ids" in caplog.text
    assert bridge.report()["request_encoding"] == "separate" and bridge.report()["scoring"].startswith("text")
    (got, _), = bridge.loglikelihood([request("loglikelihood", *CUTS[0])])
    assert got == pytest.approx(sum(model.score([CUTS[0]])[0].logprobs), abs=1e-6)
    ids_path = BridgeLM(model, max_length=WINDOW)
    assert [len(w[1]) for w in ids_path.rolling(TEXTS[0])] == [64, 64, 13]  # 141 tokens
    assert [len(model.tokenize(w[1])) for w in bridge.rolling(TEXTS[0])] == [63, 63, 15]


def test_rolling_windows_are_lm_evals_disjoint_windows(model):
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
    from Eval.inference.lm_eval_bridge import BridgeLM

    bridge = BridgeLM(model, max_length=8)  # each window: 8 tokens fed, 8 predicted after 1 context token
    eos = model.tokenizer.eos_token_id
    for text in SHORT_TEXTS:
        ids = model.tokenize(text)
        windows = [make_disjoint_window(w) for w in get_rolling_token_windows(ids, eos, max_seq_len=8, context_len=1)]
        assert len(windows) > 2 and len(windows[-1][0]) > 1  # (the last window gets as much context as fits)
        assert [(ctx, piece) for ctx, piece, _ in bridge.rolling(text)] == windows
        want = sum(full_forward(model, ctx + pred, len(ctx))[0] for ctx, pred in windows)
        got = bridge.loglikelihood_rolling([request("loglikelihood_rolling", text)])[0]
        assert got == pytest.approx(want, abs=1e-4)


def test_text_path_windows_re_tokenize_exactly(model):
    """An adapter without score_ids gets text windows; score() feeds a whole window, so 7 predicted of 8."""
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
    from Eval.inference.lm_eval_bridge import BridgeLM

    text_only = copy.copy(model)
    text_only.capabilities = model.capabilities - {"score_ids"}
    bridge = BridgeLM(text_only, max_length=8)
    for text in SHORT_TEXTS:
        ids = model.tokenize(text)
        eos = model.tokenizer.eos_token_id
        windows = [make_disjoint_window(w) for w in get_rolling_token_windows(ids, eos, max_seq_len=7, context_len=1)]
        want = sum(full_forward(model, ctx + pred, len(ctx))[0] for ctx, pred in windows)
        got = bridge.loglikelihood_rolling([request("loglikelihood_rolling", text)])[0]
        assert got == pytest.approx(want, abs=1e-4)
    assert not bridge.stats["inexact_windows"]
    text = "naïve café — 😀 ok"  # cuts inside a character move back until both texts re-tokenize exactly
    windows = bridge.rolling(text)
    assert [t for _, piece, _ in windows for t in model.tokenize(piece)] == model.tokenize(text)
    assert not bridge.stats["inexact_windows"] and len(windows) > 2
    tight = BridgeLM(text_only, max_length=5)  # a 4-token character plus its 4-token context cannot fit 5 tokens
    tight.rolling("😀😀😀")
    assert tight.stats["inexact_windows"] > 0  # reported, not hidden


def test_loglikelihood_conventions(model):
    from Eval.inference.lm_eval_bridge import BridgeLM

    bridge = BridgeLM(model)
    ll = lambda *pair: bridge.loglikelihood([request("loglikelihood", *pair)])[0][0]  # noqa: E731
    context = "Question: Who was the first woman to win a Nobel Prize?\nType:"
    assert ll(context + " ", "Human") == ll(context, " Human")  # trailing space moves to the continuation
    eos = model.tokenizer.eos_token_id
    assert ll("", " Paris") == pytest.approx(full_forward(model, [eos] + model.tokenize(" Paris"), 1)[0], abs=1e-4)
    assert ll("", "<|im_end|> Paris") == pytest.approx(ll("", " Paris"), abs=1e-6)  # lm-eval's own-first-token case
    assert not bridge.stats["boundary_merges"]
    whole, alone = model.tokenize("hello"), model.tokenize("hel")  # ["he", "ll", "o"] and ["he", "l"]
    # lm-eval feeds the context's own tokens, then the joined encoding's tokens past as many: "he", "l" | "o"
    assert ll("hel", "lo") == pytest.approx(full_forward(model, alone + whole[len(alone):], len(alone))[0], abs=1e-6)
    assert bridge.stats["boundary_merges"] == 1  # "hello" merges across the cut: counted
    text_only = copy.copy(model)  # the text path: score() tokenizes the two texts apart
    text_only.capabilities = model.capabilities - {"score_ids"}
    separate = BridgeLM(text_only)
    assert separate.loglikelihood([request("loglikelihood", "hel", "lo")])[0][0] \
        == pytest.approx(sum(model.score([("hel", "lo")])[0].logprobs), abs=1e-6)
    long_context = " ".join(["word"] * 40) + "\nType:"  # a pair over the window: lm-eval keeps its last 17 tokens
    ids = model.tokenize(long_context + " Human")
    got = BridgeLM(model, max_length=16).loglikelihood([request("loglikelihood", long_context, " Human")])[0][0]
    assert got == pytest.approx(full_forward(model, ids[-17:], 16)[0], abs=1e-4)
    short = BridgeLM(text_only, max_length=16)  # the text path: cut in the middle, as inference
    cut = model.build_prompt(long_context, chat=False, max_new_tokens=len(model.tokenize(" Human")), max_length=16)
    got = short.loglikelihood([request("loglikelihood", long_context, " Human")])[0][0]
    assert got == pytest.approx(pair_forward(model, cut.text, " Human")[0], abs=1e-4)
    assert short.stats["truncated_contexts"] == 1


def test_chat_histories_render_as_lm_evals_own_hf_model(model, hflm):
    """A task's gen_prefix ends the chat with an assistant turn for the model to continue: the bridge closed that
    turn (<|im_end|>), so every answer followed a finished turn where HFLM's continues it."""
    from Eval.inference.lm_eval_bridge import BridgeLM

    bridge = BridgeLM(model, batch_size=4, max_length=WINDOW)
    user = [{"role": "user", "content": "Question: Who wrote Hamlet?"}]
    for history, generation in ((user, True), (user + [{"role": "assistant", "content": "Type:"}], False)):
        assert bridge.apply_chat_template(history, generation) == hflm.apply_chat_template(history, generation)


def test_a_chat_prompt_cut_to_the_window_keeps_its_template(model, monkeypatch):
    """A rendered chat prompt longer than the window was cut with its special tokens decoded away: the model got
    'user\\nQuestion: ...assistant\\n' without one <|im_start|> or <|im_end|>."""
    from types import SimpleNamespace

    from Eval.inference.lm_eval_bridge import BridgeLM

    bridge = BridgeLM(model, batch_size=4, max_length=24)
    text = bridge.apply_chat_template([{"role": "user", "content": "Question: " + "what is it? " * 20}])
    sent = []
    monkeypatch.setattr(model, "generate", lambda prompts, *a: sent.extend(prompts) or [
        SimpleNamespace(text="x", error=None) for _ in prompts])
    assert bridge.generate_until([SimpleNamespace(args=(text, {"until": ["\n"], "max_gen_toks": 4}))]) == ["x"]
    [prompt] = sent
    assert prompt.text.startswith("<|im_start|>") and prompt.text.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert prompt.truncated_tokens and not prompt.add_special_tokens
    assert prompt.n_tokens == len(model.tokenize(prompt.text)) <= 24 - 4
