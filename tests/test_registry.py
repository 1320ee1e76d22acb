"""One registry helper (Eval/registry.py) behind every named concept: each refuses a second registration, names
the closest known names for an unknown one, and finds what its package defines without a list kept by hand."""
import pytest

from Eval.extract import EXTRACTORS
from Eval.metrics import METRICS
from Eval.models import MODELS
from Eval.registry import Registry
from Eval.tasks import TASKS

REGISTRIES = {"metric": (METRICS, "qa_f1"), "dataset": (TASKS, "trec"), "extraction step": (EXTRACTORS, "first_line"),
              "model backend": (MODELS, "echo")}


@pytest.mark.parametrize("kind", sorted(REGISTRIES))
def test_each_registry_refuses_a_second_registration_and_suggests_close_names(kind):
    registry, name = REGISTRIES[kind]
    assert registry.kind == kind and name in registry and registry[name] is registry[name]
    with pytest.raises(ValueError, match=f"{kind} {name!r} is registered twice"):
        registry.register(name, object())
    with pytest.raises(KeyError) as err:
        registry[name + "x"]
    assert err.value.args[0].startswith(f"unknown {kind} {name + 'x'!r}. Did you mean: {name}")
    assert registry.get(name + "x") is None  # a Mapping: .get answers None, [] explains


def test_a_registry_as_a_decorator_and_in_a_fresh_instance():
    colours = Registry("colour", hint="Add one with @colour.")
    colour = colours.register

    @colour("red")
    def red():
        return "#f00"

    assert colours["red"] is red and list(colours) == ["red"] and len(colours) == 1
    assert colours.unknown("blue") == "unknown colour 'blue'. Known: red. Add one with @colour."


def test_model_backends_are_listed_without_importing_them():
    import subprocess
    import sys
    code = ("import sys; from Eval.models import MODELS; print(MODELS.names(), "
            "sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(
        __import__("conftest").ROOT))
    assert done.stdout.strip() == "['api', 'echo', 'hf', 'masked'] []", done.stderr
