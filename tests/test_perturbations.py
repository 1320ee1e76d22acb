"""The PERTURBATIONS registry (issue 14): fixed outputs for fixed inputs and seed keys (computed once, each
checked by eye against what the perturbation promises), identity on "", determinism, the rate honoured,
argument parsing and its errors, and every card's >>> example run."""
import doctest
import sys

import pytest

from Eval.perturbations import INPUT_FIELDS, PERTURBATIONS, Perturbation, parse_perturbations, perturbation

# (name, text, args, output for seed key "k1", output for seed key "k2")
CASES = [
    # letters swapped for a QWERTY neighbour: s->a, s->w; h->u, e->s; a->w; e->r
    ("typo", "Please answer the question below.", (0.1,),
     "Pleaae anwwer the question below.", "Please answer tus question below."),
    ("typo", "Please answer the question below.", (),
     "Please wnswer the question below.", "Please answrr the question below."),
    # each space becomes 1..3 (or 1..5) spaces
    ("extra_space", "What is the capital of France?", (),
     "What  is  the   capital of France?", "What   is   the capital   of  France?"),
    ("extra_space", "What is the capital of France?", (5,),
     "What    is  the     capital of  France?", "What  is     the     capital  of    France?"),
    ("lowercase", "Paris Is The Capital.", (), "paris is the capital.", "paris is the capital."),
    # both directions, capital first letters kept, "it's" expands to "it is"
    ("contraction", "Do not worry: It's what we will do, and I'm sure they are right. Can't stop.", (),
     "Don't worry: It is what we'll do, and I am sure they're right. Cannot stop.",
     "Don't worry: It is what we'll do, and I am sure they're right. Cannot stop."),
    # the case of what is replaced kept: all caps, a capital first letter, lower case
    ("contraction", "IT IS FINE, I'M SURE. It is, we CANNOT stop; it is", (),
     "IT'S FINE, I AM SURE. It's, we CAN'T stop; it's", "IT'S FINE, I AM SURE. It's, we CAN'T stop; it's"),
    ("filler", "We should read the whole passage first", (0.5,),
     "We should so read the well whole passage I mean first",
     "We should read I mean the whole passage I mean first"),
    # big->huge (capital kept), often->frequently, problem->issue; at rate 1 every listed word changes
    ("synonym", "Big ideas often begin as a small problem", (),
     "Huge ideas frequently begin as a small issue", "Huge ideas often begin as a small issue"),
    ("synonym", "Big ideas often begin as a small problem", (1.0,),
     "Large ideas frequently start as a tiny issue", "Large ideas frequently commence as a little issue"),
    ("fullwidth", "问题:什么是AI?(简答)", (), "问题：什么是AI？（简答）", "问题：什么是AI？（简答）"),
    # marks inside numbers (10:30, 1,000) stay; the full-width ，and 。become half-width
    ("fullwidth", "时间是10:30，价格1,000元。", (), "时间是10:30,价格1,000元.", "时间是10:30,价格1,000元."),
    ("traditional", "我们认为这个问题很简单，请给出答案。", (),
     "我們認為這個問題很簡單，請給出答案。", "我們認為這個問題很簡單，請給出答案。"),
    # 在->再, 公->功, 工->功, 到->倒; 的->地, 已->意, 到->道
    ("homophone", "我的朋友在公司工作，他已经到家了。", (0.5,),
     "我的朋友再功司功作，他已经倒家了。", "我地朋友再公司功作，他意经道家了。"),
]
RANDOM = {"typo", "extra_space", "filler", "synonym", "homophone"}


@pytest.mark.parametrize("name, text, args, first, second", CASES)
def test_fixed_outputs_for_fixed_seed_keys(name, text, args, first, second):
    p = PERTURBATIONS[name]
    assert p.apply(text, "k1", *args) == first
    assert p.apply(text, "k1", *args) == first  # pure: a second call gives the same text
    assert p.apply(text, "k2", *args) == second


def test_random_perturbations_depend_on_the_seed_key_and_the_others_do_not():
    text = {"en": "The quick brown fox jumps over the lazy dog and then it is big", "zh": "他在家里做作业，明天再去公园"}
    for name in PERTURBATIONS:
        p = PERTURBATIONS[name]
        rate = (0.5,) if p.default_args and isinstance(p.default_args[0], float) else ()
        outputs = {p.apply(text[p.languages[0]], f"key{i}", *rate) for i in range(5)}
        assert (len(outputs) > 1) == (name in RANDOM), name


def test_identity_on_empty_text_and_at_rate_zero():
    for name in PERTURBATIONS:
        assert PERTURBATIONS[name].apply("", "k1") == ""
    assert PERTURBATIONS["typo"].apply("Please answer the question below.", "k1", 0) == \
        "Please answer the question below."
    assert PERTURBATIONS["filler"].apply("We should read the whole passage first", "k1", 0.0) == \
        "We should read the whole passage first"
    assert PERTURBATIONS["synonym"].apply("Big ideas often begin as a small problem", "k1", 0) == \
        "Big ideas often begin as a small problem"
    assert PERTURBATIONS["homophone"].apply("我的朋友在公司工作", "k1", 0) == "我的朋友在公司工作"
    assert PERTURBATIONS["extra_space"].apply("a b c", "k1", 1) == "a b c"  # at most one space: unchanged


def test_typo_at_rate_one_changes_every_letter_to_a_keyboard_neighbour():
    out = PERTURBATIONS["typo"].apply("Aq zm, 7!", "k1", 1.0)
    assert out == "Wa an, 7!"  # A->W (case kept), q->a, z->a, m->n; digits and punctuation untouched


def test_the_seed_is_sha256_of_name_args_and_key():
    import hashlib
    import random
    digest = hashlib.sha256("typo|(0.05,)|k1".encode()).digest()
    assert PERTURBATIONS["typo"].rng("k1", (0.05,)).random() == \
        random.Random(int.from_bytes(digest[:8], "big")).random()


def test_registry_declarations_and_cards():
    names = sorted(PERTURBATIONS)
    assert names == ["contraction", "extra_space", "filler", "fullwidth", "homophone", "lowercase", "synonym",
                     "traditional", "typo"]
    for name in names:
        p = PERTURBATIONS[name]
        assert isinstance(p, Perturbation) and p.name == name
        assert p.languages == (("zh",) if name in ("fullwidth", "traditional", "homophone") else ("en",))
        assert set(p.fields) <= set(INPUT_FIELDS) and p.fields
        module = sys.modules[p.fn.__module__]
        tests = doctest.DocTestFinder().find(p.fn, name, globs=vars(module))
        assert tests and tests[0].examples, f"{name}: no >>> example in its docstring"
        result = doctest.DocTestRunner().run(tests[0])
        assert result.failed == 0 and result.attempted >= 1, name


def test_labels_fill_in_defaults():
    assert PERTURBATIONS["typo"].label((0.05,)) == "typo:0.05"
    assert PERTURBATIONS["typo"].label(()) == "typo:0.05"
    assert PERTURBATIONS["typo"].label(("0.2",)) == "typo:0.2"
    assert PERTURBATIONS["extra_space"].label(()) == "extra_space:3"
    assert PERTURBATIONS["lowercase"].label(()) == "lowercase"
    # the defaults are what apply uses when no argument is given
    assert PERTURBATIONS["typo"].apply("Please answer the question below.", "k1") == \
        PERTURBATIONS["typo"].apply("Please answer the question below.", "k1", 0.05)


def test_parse_perturbations():
    assert parse_perturbations("typo:0.05,extra_space") == [("typo", (0.05,)), ("extra_space", ())]
    assert parse_perturbations(" typo , filler:0.2 , extra_space:2 ") == \
        [("typo", ()), ("filler", (0.2,)), ("extra_space", (2,))]
    assert parse_perturbations("typo:0.05,typo:0.1") == [("typo", (0.05,)), ("typo", (0.1,))]
    assert parse_perturbations("") == [] and parse_perturbations(None) == []


@pytest.mark.parametrize("spec, message", [
    ("typoo", "unknown perturbation 'typoo'. Did you mean: typo?"),
    ("typo,extra_spaces", "'extra_spaces': unknown perturbation 'extra_spaces'. Did you mean: extra_space?"),
    ("typo:abc", "'typo:abc': typo: argument 1 must be float, got 'abc'"),
    ("typo:1.5", "'typo:1.5': typo: argument 1 must be within [0.0, 1.0], got 1.5"),
    ("typo:0.1:2", "'typo:0.1:2': typo takes at most 1 argument(s), got 2"),
    ("lowercase:1", "'lowercase:1': lowercase takes at most 0 argument(s), got 1"),
    ("extra_space:0", "'extra_space:0': extra_space: argument 1 must be within [1, 10], got 0"),
    ("typo,,lowercase", "empty perturbation name in part ''"),
    ("typo,typo:0.05", "'typo:0.05' repeats 'typo' (both are typo:0.05)"),
])
def test_parse_errors_name_the_bad_part(spec, message):
    with pytest.raises(ValueError) as error:
        parse_perturbations(spec)
    assert message in str(error.value)


def test_a_name_is_registered_once_and_languages_are_required():
    assert PERTURBATIONS["typo"].name == "typo"  # discovery done, so the second registration below is the bug
    with pytest.raises(ValueError, match="registered twice"):
        perturbation("typo", languages=("en",))(lambda text, rng: text)
    with pytest.raises(ValueError, match="must declare the languages"):
        perturbation("nothing", languages=())


@pytest.mark.parametrize("argv, message", [
    (["--perturb", "nope"], "error: argument --perturb: 'nope': unknown perturbation 'nope'."),  # named once
    (["--perturb-seed", "3"], "error: --perturb-seed and --perturb-references shape --perturb's copies"),
    (["--perturb-references"], "error: --perturb-seed and --perturb-references shape --perturb's copies"),
], ids=["usage error", "seed alone", "references alone"])
def test_perturb_options_are_refused_where_they_would_do_nothing(tmp_path, capsys, argv, message):
    """The option was named twice in its errors ("argument --perturb: --perturb: ..."), and --perturb-seed or
    --perturb-references without --perturb was silently ignored."""
    import inference

    argv = ["--backend", "echo", "--datasets", "custom_en", "--limit", "1", "--out-dir", str(tmp_path), *argv]
    try:
        code = inference.main(argv)
    except SystemExit as stop:
        code = stop.code
    assert code == 2 and message in capsys.readouterr().err and not any(tmp_path.iterdir())
