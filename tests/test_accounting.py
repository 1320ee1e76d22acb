"""Token, time and cost accounting (Eval/pricing.py) on the demo model: the records, the run sidecar, the printed
lines and eval.py's result files agree to the token; --price arithmetic and its errors; --max-total-tokens stops
before the budget is overshot and a rerun finishes without redoing or duplicating anything; the dry run's cost
bound; the API backend keeps the server's own counts."""
import contextlib
import io
import json

import pytest

import eval as eval_cli
import inference
from api_fakes import DEMO, answer
from api_fakes import fake  # noqa: F401  (pytest fixture)
from Eval.pricing import Price, PriceError, cost_text, price_for, usage_of, usage_text

PRICE = {"tiny-qwen2": {"input": 0.15, "output": 0.60}, "*": {"input": 1.0, "output": 3.0}}
RUN = ["--datasets", "custom_en,demo_trec", "--limit", "8", "--batch-size", "4", "--max-new-tokens", "16"]


def lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def spent(records):
    return sum(r["prompt_tokens"] + r["gen_tokens"] for r in records)


@pytest.fixture
def prices(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(PRICE), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """(folder, printed output) of an uninterrupted run of RUN with a price."""
    out = tmp_path_factory.mktemp("full")
    (out / "prices.json").write_text(json.dumps(PRICE), encoding="utf-8")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):  # capsys is per test; this run is shared by the module
        assert inference.main([*RUN, "--out-dir", str(out), "--price", str(out / "prices.json")]) == 0
    return out / "tiny-qwen2", printed.getvalue()


def test_cost_arithmetic_is_exact():
    price = Price("m", 0.15, 0.60, "p.json")
    assert price.cost(1234, 567) == 0.0005253  # (1234 x 0.15 + 567 x 0.60) / 1e6
    assert price.cost(1_000_000, 1_000_000) == 0.75
    assert [cost_text(c) for c in (0.0123, 0.0005253, 0.0, 0.0000123)] == ["$0.0123", "$0.0005", "$0.0000",
                                                                           "$0.000012"]
    usage = {"prompt_tokens": 1234, "gen_tokens": 567, "truncated_tokens": 8, "seconds": 2.25,
             "tokens_per_s": 252.0}
    assert usage_text(usage, price.cost(1234, 567)) == \
        "1234 prompt + 567 generated tokens, 8 cut, 2.2 s, 252.0 gen tok/s, $0.0005"


@pytest.mark.parametrize("content, message", [
    ("{not json", "not JSON"),
    ("[1, 2]", 'must be a JSON object of model name -> {"input": USD, "output": USD} per million tokens'),
    ('{"tiny-qwen2": 0.15}', "entry 'tiny-qwen2' must be an object"),
    ('{"tiny-qwen2": {"input": 0.15}}', "entry 'tiny-qwen2' has no 'output' price"),
    ('{"tiny-qwen2": {"input": -1, "output": 1}}', "entry 'tiny-qwen2': 'input' must be a number >= 0"),
    ('{"tiny-qwen2": {"input": 1, "output": "0.6"}}', "entry 'tiny-qwen2': 'output' must be a number >= 0"),
    ('{"tiny-qwen2": {"input": true, "output": 1}}', "entry 'tiny-qwen2': 'input' must be a number >= 0"),
    ('{"other": {"input": 1, "output": 1}}', "no entry for model 'tiny-qwen2' and no \"*\" default (entries: other)"),
])
def test_bad_price_files_stop_both_commands_before_anything_is_written(tmp_path, capsys, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(PriceError, match=f"^{path}: ") as err:
        price_for(path, "tiny-qwen2")
    assert message in str(err.value)
    folder = tmp_path / "pred" / "tiny-qwen2"
    folder.mkdir(parents=True)
    (folder / "trec.jsonl").write_text('{"pred": "Human", "answers": ["Human"], "all_classes": ["Human"]}\n')
    assert eval_cli.main(["--pred-dir", str(folder), "--price", str(path)]) == 2
    assert inference.main(["--datasets", "custom_en", "--out-dir", str(tmp_path / "pred"), "--price", str(path)]) == 2
    assert capsys.readouterr().err.count(f"error: --price: {path}: ") == 2
    assert sorted(p.name for p in folder.iterdir()) == ["trec.jsonl"]  # no result file, no prediction file


def test_records_sidecar_printed_lines_and_result_files_agree(full_run, tmp_path, capsys):
    folder, printed = full_run
    price = Price("tiny-qwen2", 0.15, 0.60, "")
    totals = {"prompt_tokens": 0, "gen_tokens": 0}
    for name in ("custom_en", "demo_trec"):
        records = lines(folder / f"{name}.jsonl")
        summary = json.loads((folder / f"{name}.run.json").read_text())["summary"]
        want = {k: sum(r[k] for r in records) for k in ("prompt_tokens", "gen_tokens", "truncated_tokens")}
        assert {k: summary[k] for k in want} == want and summary["examples"] == 8
        assert summary["tokens_per_s"] == round(want["gen_tokens"] / summary["seconds"], 2)
        cost = cost_text(price.cost(want["prompt_tokens"], want["gen_tokens"]))
        assert (f"{name}: 8 new, 0 already done; {want['prompt_tokens']} prompt + {want['gen_tokens']} generated "
                f"tokens, 0 cut, {summary['seconds']:.1f} s, ") in printed and f"gen tok/s, {cost}\n" in printed
        for k in totals:
            totals[k] += want[k]
    assert f"0 failed; {totals['prompt_tokens']} prompt + {totals['gen_tokens']} generated tokens, 0 cut" in printed
    assert eval_cli.main(["--pred-root", str(folder.parent), "--model", "tiny-qwen2", "--price",
                          str(folder.parent / "prices.json")]) == 0
    out = capsys.readouterr().out
    detail = json.loads((folder / "result_detail.json").read_text())
    usage = json.loads((folder / "result_usage.json").read_text())
    for name in ("custom_en", "demo_trec"):
        records = lines(folder / f"{name}.jsonl")
        entry = detail[name]["usage"]
        assert entry["prompt_tokens"] == sum(r["prompt_tokens"] for r in records)
        assert entry["seconds"] == round(sum(r["latency_s"] for r in records), 4) and entry["examples"] == 8
        assert entry["cost_usd"] == price.cost(entry["prompt_tokens"], entry["gen_tokens"])
        assert entry["price"]["entry"] == "tiny-qwen2" and entry["price"]["input_per_million"] == 0.15
        assert usage["datasets"][name] == {k: v for k, v in entry.items() if k != "price"}
    assert {k: usage["total"][k] for k in totals} == totals and usage["total"]["examples"] == 16
    assert usage["total"]["cost_usd"] == price.cost(totals["prompt_tokens"], totals["gen_tokens"])
    total = ["tiny-qwen2", "total", "16", str(totals["prompt_tokens"]), str(totals["gen_tokens"]), "0",
             f"{usage['total']['seconds']:.1f}"]
    assert [line.split()[:7] for line in out.splitlines() if " total " in line] == [total]  # the terminal's table
    table = (folder.parent / "results.md").read_text(encoding="utf-8")
    assert "| " + " | ".join(total) + " |" in table and cost_text(usage["total"]["cost_usd"]) in table
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0  # no --price: no cost anywhere
    assert "cost_usd" not in (folder / "result_detail.json").read_text()


def test_token_budget_stops_cleanly_and_a_rerun_matches_an_uninterrupted_run(full_run, tmp_path, capsys):
    folder = tmp_path / "tiny-qwen2"
    assert inference.main([*RUN, "--out-dir", str(tmp_path), "--max-total-tokens", "10"]) == 3
    err = capsys.readouterr().err
    assert ("stopped at the token budget: 0 of 10 tokens used (nothing generated: the first example alone could "
            "exceed it), 0 of 16 examples done; rerun with a larger budget to continue") in err
    assert not (folder / "custom_en.jsonl").exists() and not (folder / "demo_trec.run.json").exists()

    assert inference.main([*RUN, "--out-dir", str(tmp_path), "--max-total-tokens", "300"]) == 3
    partial = lines(folder / "custom_en.jsonl")
    summary = json.loads((folder / "custom_en.run.json").read_text())["summary"]
    used = spent(partial)
    assert 0 < len(partial) < 8 and used <= 300
    assert summary["stopped"] == "token budget" and summary["token_budget"] == {"max_total_tokens": 300,
                                                                                 "spent": used}
    assert summary["complete"] is False and summary["examples"] == len(partial)
    assert not (folder / "demo_trec.jsonl").exists()  # the datasets after the stop are not started
    assert (f"stopped at the token budget: {used} of 300 tokens used, {len(partial)} of 16 examples done; "
            "rerun to continue (the budget is per run)" in capsys.readouterr().err)

    # 150 tokens hold no batch of 4 (their bounds: 4 prompts + 4 x 16 new tokens), but some examples:
    # the same command goes on with as much of a batch as fits, each run
    assert inference.main([*RUN, "--out-dir", str(tmp_path), "--max-total-tokens", "150"]) == 3
    more = lines(folder / "custom_en.jsonl")
    assert len(more) > len(partial) and spent(more) - used <= 150
    assert inference.main([*RUN, "--out-dir", str(tmp_path)]) == 0  # no budget: resume
    assert f"custom_en: {8 - len(more)} new, {len(more)} already done" in capsys.readouterr().out
    reference, _ = full_run
    for name in ("custom_en", "demo_trec"):
        done, want = lines(folder / f"{name}.jsonl"), lines(reference / f"{name}.jsonl")
        assert [r["id"] for r in done] == [r["id"] for r in want]  # each example once, in data order
        assert [(r["pred"], r["prompt_tokens"], r["gen_tokens"]) for r in done] == \
            [(r["pred"], r["prompt_tokens"], r["gen_tokens"]) for r in want]


def test_dry_run_states_the_most_the_run_can_cost(tmp_path, prices, capsys):
    assert inference.main(["dry-run", "--datasets", "custom_en,demo_trec", "--limit", "8", "--out-dir",
                           str(tmp_path), "--price", str(prices)]) == 0
    summary = json.loads((tmp_path / "tiny-qwen2" / "dry_run.json").read_text())
    total = summary["total"]
    assert total["estimated_cost_usd"] == Price("", 0.15, 0.60, "").cost(total["prompt_tokens"],
                                                                        total["max_gen_tokens"])
    assert total["max_gen_tokens"] == 8 * 512 + 8 * 64  # custom_en 512 and demo_trec 64 new tokens at most
    assert summary["price"]["entry"] == "tiny-qwen2"
    assert summary["datasets"]["custom_en"]["estimated_cost_usd"] + \
        summary["datasets"]["demo_trec"]["estimated_cost_usd"] == pytest.approx(total["estimated_cost_usd"])
    assert (f"estimated cost: at most {cost_text(total['estimated_cost_usd'])} at price entry 'tiny-qwen2' "
            "($0.15 / $0.6 per million input / output tokens): prompt tokens exact, generated tokens at their "
            "upper bound") in capsys.readouterr().out


def test_api_server_usage_is_kept_beside_our_counts(fake, tmp_path, capsys):  # noqa: F811
    def reply(path, body, n):
        status, data, headers, delay = answer(path, " Entity", completion_tokens=2)
        data["usage"].update(prompt_tokens=100, total_tokens=102, details={"cached": 5})
        return status, data, headers, delay

    server = fake(reply)
    argv = ["--backend", "api", "-M", f"base_url={server.base_url}", "--model", "demo", "-M", f"tokenizer={DEMO}",
            "--datasets", "demo_trec", "--limit", "3", "--out-dir", str(tmp_path)]
    assert inference.main(argv) == 0
    folder = tmp_path / "demo"
    records = lines(folder / "demo_trec.jsonl")
    assert [r["server_usage"] for r in records] == [{"completion_tokens": 2, "prompt_tokens": 100,
                                                     "total_tokens": 102}] * 3
    assert [r["gen_tokens"] for r in records] == [2, 2, 2]  # completion_tokens is the count of record
    summary = json.loads((folder / "demo_trec.run.json").read_text())["summary"]
    assert summary["server_usage"] == {"completion_tokens": 6, "prompt_tokens": 300, "total_tokens": 306,
                                       "records": 3}
    assert summary["prompt_tokens"] == sum(r["prompt_tokens"] for r in records)  # ours, not the server's
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0
    detail = json.loads((folder / "result_detail.json").read_text())["demo_trec"]["usage"]
    assert detail["server_usage"] == summary["server_usage"] and detail["gen_tokens"] == 6
    assert usage_of(records) == detail
