"""What identifies a served model (--backend api, Eval/models/api.py) for inference and for the judge's verdict cache:
a /v1/models that does not answer stops the run (never "another model"), one that answers without a root keeps its
identity, request settings (-M concurrency, rpm, timeout, max_retries) redo nothing and the judge's cache follows
the served root; bad -M values of the api backend are refused before any request. Scripted servers: api_fakes.py."""
import argparse
import dataclasses
import json
import shutil

import pytest

import eval as eval_cli
import inference
from Eval.models.api import APIModel, APIOptions
from Eval.scoring.judge import judge_identity, load_judge_model
from api_fakes import DEMO, SECRET, answer
from api_fakes import fake  # noqa: F401  (pytest fixture)
from test_judge import DEMO_PRED

ROOTED = [{"id": "default", "object": "model", "root": "/ckpt/a"}]  # LMDeploy's shape: no max_model_len
NOT_READ = ("; without it what the server serves is unknown, so nothing was redone or replaced: rerun when the "
            "server answers\n")
PLUMBING = ["-M", "concurrency=1", "-M", "rpm=600", "-M", "timeout=30", "-M", "max_retries=1"]


def run_api(server, out, capsys, *extra):
    """(exit code, the demo_trec line of stdout or None, stderr) of an api run over 2 demo_trec examples."""
    code = inference.main(["--backend", "api", "-M", f"base_url={server.base_url}", "-M", "api_model=default",
                           "-M", f"tokenizer={DEMO}", "--model-name", "m", "--datasets", "demo_trec", "--limit", "2",
                           "-M", "max_retries=0", "--out-dir", str(out), *extra])
    captured = capsys.readouterr()
    line = next((x for x in captured.out.splitlines() if x.startswith("demo_trec:")), None)
    return code, line, captured.err


@pytest.mark.parametrize("outage", ["down", "503", "401", "timeout"])
def test_a_model_list_that_does_not_answer_stops_the_run_and_keeps_every_record(fake, tmp_path, capsys, outage):
    """Before: a root not read was taken for "no root": every good record was redone as another model's (and
    failed, the server being down), whether or not the server lists max_model_len or --max-length is given. A 401
    (a wrong or expired key) was taken for a server without a model list: every record redone, as an error."""
    server = fake(lambda path, body, n: answer(path, " Entity"), ROOTED)
    # with --max-length the list is first asked for the identity, without it for the context window
    extra = ["-M", "timeout=0.5", *(["--max-length", "2048"] if outage != "503" else [])]
    assert run_api(server, tmp_path, capsys, *extra)[1].startswith("demo_trec: 2 new")
    path = tmp_path / "m" / "demo_trec.jsonl"
    saved, posts = path.read_bytes(), len(server.calls)
    if outage == "down":
        server.close()
        cause = "failed after 1 attempt; last: connection error (ConnectError: All connection attempts failed)"
    elif outage == "503":
        server.models_status, cause = 503, "failed after 1 attempt; last: HTTP 503: no list here"
    elif outage == "401":  # not retried
        server.models_status, cause = 401, "HTTP 401: no list here (the key in $OPENAI_API_KEY was refused)"
    else:
        server.models_delay, cause = 1.0, "failed after 1 attempt; last: timed out after 0.5 s ("
    code, line, err = run_api(server, tmp_path, capsys, *extra)
    assert (code, line, err.count("\n")) == (2, None, 1)
    assert err.startswith(f"error: GET {server.base_url}/models: {cause}")
    assert err.endswith(NOT_READ)
    assert path.read_bytes() == saved and len(server.calls) == posts  # nothing replaced, nothing asked
    if outage != "down":  # answering again: the same model as the records'
        server.models_status, server.models_delay = 200, 0.0
        assert run_api(server, tmp_path, capsys, *extra)[1].startswith("demo_trec: 0 new, 2 already done")


@pytest.mark.parametrize("listing", ["rooted", "no root", "404"])
def test_a_model_list_that_answers_keeps_the_identity_and_request_settings_redo_nothing(fake, tmp_path, capsys,
                                                                                          listing):
    models = {"rooted": ROOTED, "no root": [{"id": "default", "object": "model"}], "404": ROOTED}[listing]
    server = fake(lambda path, body, n: answer(path, " Entity"), models)
    server.models_status = 404 if listing == "404" else 200  # a server without /v1/models
    model = APIModel(APIOptions(base_url=server.base_url, api_model="default", tokenizer=str(DEMO)))
    assert model.fingerprint()["server_model"] == ("/ckpt/a" if listing == "rooted" else None)
    model.close()
    assert run_api(server, tmp_path, capsys)[1].startswith("demo_trec: 2 new")
    assert run_api(server, tmp_path, capsys, *PLUMBING)[1].startswith("demo_trec: 0 new, 2 already done")


BAD_VALUES = {  # before: timeout<=0 failed every request, inf / nan "Out of range float values are not JSON
    # compliant", rpm=0 meant no limit, max_retries=-1 passed, and api_key_env echoed the key it was given
    "timeout=0": "-M timeout=0: must be a number of seconds above 0",
    "timeout=-1": "-M timeout=-1: must be a number of seconds above 0",
    "timeout=inf": "-M timeout=inf: must be a number of seconds above 0",
    "timeout=nan": "-M timeout=nan: must be a number of seconds above 0",
    "rpm=0": "-M rpm=0: must be at least 1 (none: no limit)",
    "rpm=-5": "-M rpm=-5: must be at least 1 (none: no limit)",
    "max_retries=-1": "-M max_retries=-1: must be at least 0",
    "concurrency=0": "-M concurrency=0: must be at least 1",
    f"api_key_env={SECRET}": "-M api_key_env= takes the name of the environment variable that holds the key (e.g. "
                             "OPENAI_API_KEY), not the key itself; the value given is no such name (letters, digits "
                             "and _) and is not shown: it may be the key",
}


def test_an_unset_key_variable_is_named_only_when_it_looks_like_one(monkeypatch, capsys):
    """A key given by mistake as -M api_key_env= passed the name check when it looked like an identifier
    (hf_..., gsk_...), then the 'not set' error printed it."""
    key = "hf_" + SECRET.replace("-", "")
    for name, shown in ((key, "(not shown)"), ("MY_API_KEY", "MY_API_KEY")):
        monkeypatch.delenv(name, raising=False)
        assert inference.main(["--backend", "api", "-M", "base_url=http://127.0.0.1:9/v1", "--datasets",
                               "demo_trec", "-M", f"api_key_env={name}"]) == 2
        out = capsys.readouterr()
        assert f"environment variable {shown} (named by -M api_key_env) is not set" in out.err
        assert key not in out.out + out.err


# ids without the random key: every xdist worker must collect the same test names
@pytest.mark.parametrize("pair", sorted(BAD_VALUES), ids=lambda pair: pair.replace(SECRET, "SECRET"))
def test_bad_api_option_values_are_one_line_before_any_request(fake, tmp_path, capsys, pair):
    server = fake(lambda path, body, n: pytest.fail("a request was sent"), ROOTED)
    assert inference.main(["--backend", "api", "-M", f"base_url={server.base_url}", "--datasets", "demo_trec",
                           "--out-dir", str(tmp_path), "-M", pair]) == 2
    assert capsys.readouterr().err == f"error: {BAD_VALUES[pair]}\n"
    assert not list(tmp_path.iterdir()) and server.model_lists == 0


def test_the_api_judge_cache_follows_the_served_root_not_request_settings(fake, tmp_path, capsys):
    """Before: the cache key held identity() as built before the root was read (a server serving another model
    answered from the cache) and every request setting (another -M concurrency asked everything again)."""
    server = fake(lambda path, body, n: answer(path, "Yes"), [dict(ROOTED[0])])
    folder = tmp_path / "demo"
    shutil.copytree(DEMO_PRED, folder)

    def judge(*extra):
        code = eval_cli.main(["judge", "--pred-dir", str(folder), "--datasets", "custom_en", "--judge", "default",
                              "--judge-backend", "api", "-M", f"base_url={server.base_url}", "-M",
                              f"tokenizer={DEMO}", "-M", "max_retries=0", *extra])
        out = capsys.readouterr()
        return code, out.out.split("(")[-1].strip() if code == 0 else out.err

    asked = "unparseable 0, failed 0, from cache 0, model calls 3)"
    assert judge() == (0, asked)
    assert judge(*PLUMBING) == (0, "unparseable 0, failed 0, from cache 3, model calls 0)")
    server.models[0]["root"] = "/ckpt/b"  # the same name now serves another checkpoint
    assert judge() == (0, asked)
    server.models_status = 503  # what it serves is unknown: stopped, not taken for another judge
    assert judge() == (2, f"error: GET {server.base_url}/models: failed after 1 attempt; last: HTTP 503: no list "
                          f"here{NOT_READ}")


def test_judge_identity_of_a_credentialed_url_is_redacted_and_stable(fake):
    server = fake(lambda path, body, n: answer(path, "Yes"), ROOTED)
    port, identities = server.server.server_address[1], []
    for secret in (SECRET, SECRET[::-1]):  # the judge cache key must not depend on the secret
        args = argparse.Namespace(judge="default", judge_backend="api",
                                  model_args=[f"base_url=http://{secret}@127.0.0.1:{port}/v1?key={secret}",
                                              f"tokenizer={DEMO}"])
        model = load_judge_model(args)
        identities.append(judge_identity(model))
        model.close()
    assert identities[0] == identities[1] and SECRET not in identities[0] and SECRET[::-1] not in identities[0]
    assert f'"base_url": "http://127.0.0.1:{port}/v1?key=***"' in identities[0]
    assert '"server_model": "/ckpt/a"' in identities[0] and "concurrency" not in identities[0]


def test_a_local_judge_keeps_its_cache_key():
    """The hf judge's key is what it was (identity() less device and size): a changed key empties every cache."""
    from Eval.models.base import BaseLLM

    class Local(BaseLLM):
        name = "local"

        def identity(self):
            return {"adapter": "local", "path": "m", "device": "cpu", "num_parameters": 7, "files": {"sha256": "f"}}

    options = json.dumps(dataclasses.asdict(Local().options), sort_keys=True)
    assert judge_identity(Local()) == \
        '{"identity": {"adapter": "local", "files": {"sha256": "f"}, "path": "m"}, "options": ' + options + "}"
