"""English perturbations: typo, extra_space, lowercase, contraction, filler, synonym. The word
tables are small lists of our own; the synonym list is NOT WordNet, so it needs no download.
"""
from __future__ import annotations

import random
import re

from Eval.perturbations import apply, perturbation, swap_chars  # noqa: F401  (apply: the cards)

RATE = ((0.0, 1.0),)

# QWERTY rows with their offsets in key widths; keys less than one key width apart on the same or
# an adjacent row are neighbours ("a" neighbours q, w, s, z).
_ROWS = (("qwertyuiop", 0.0), ("asdfghjkl", 0.25), ("zxcvbnm", 0.75))
_POSITIONS = {key: (row, col + offset)
              for row, (keys, offset) in enumerate(_ROWS) for col, key in enumerate(keys)}
NEIGHBOURS = {key: "".join(other for other, (r2, x2) in _POSITIONS.items() if other != key
                           and abs(r2 - r) <= 1 and abs(x2 - x) <= (1.0 if r2 == r else 0.99))
              for key, (r, x) in _POSITIONS.items()}


@perturbation("typo", languages=("en",), default_args=(0.05,), bounds=RATE)
def typo(text: str, rng: random.Random, rate: float) -> str:
    """Each letter, with probability `rate`, replaced by a QWERTY keyboard neighbour (case kept).

    >>> apply("typo", "The quick brown fox jumps over the lazy dog", "doc", 0.2)
    'Tue quock broen fox humps ober the lszg eog'
    """
    return swap_chars(text, rng, rate, NEIGHBOURS)


@perturbation("extra_space", languages=("en",), default_args=(3,), bounds=((1, 10),))
def extra_space(text: str, rng: random.Random, max_spaces: int) -> str:
    """Each space becomes 1 to `max_spaces` spaces, drawn uniformly (newlines and tabs are kept).

    >>> apply("extra_space", "The quick brown fox", "doc")
    'The  quick  brown fox'
    """
    return re.sub(" ", lambda _: " " * rng.randint(1, max_spaces), text)


@perturbation("lowercase", languages=("en",))
def lowercase(text: str, rng: random.Random) -> str:
    """The whole text in lower case (deterministic: the seed is not used).

    >>> apply("lowercase", "Who wrote Hamlet? Answer in ONE word.", "doc")
    'who wrote hamlet? answer in one word.'
    """
    return text.lower()


_CONTRACTIONS = """do not|don't does not|doesn't did not|didn't is not|isn't are not|aren't
was not|wasn't were not|weren't have not|haven't has not|hasn't had not|hadn't will not|won't
would not|wouldn't cannot|can't could not|couldn't should not|shouldn't must not|mustn't I am|I'm
you are|you're we are|we're they are|they're it is|it's he is|he's she is|she's that is|that's
there is|there's what is|what's who is|who's I have|I've you have|you've we have|we've
they have|they've I will|I'll you will|you'll we will|we'll they will|they'll let us|let's"""
_PAIRS = [pair.split("|")
          for pair in re.findall(r"[A-Za-z' ]+?\|[A-Za-z']+", _CONTRACTIONS.replace("\n", " "))]
# Both directions in one table: each form maps to its counterpart ("it's" is "it is", not "it has").
SWAP = {long.strip().lower(): short for long, short in _PAIRS}
SWAP.update({short.lower(): long.strip() for long, short in _PAIRS})
# Longest first: the first alternative that matches wins, so a form precedes those it begins.
_FORMS = sorted(SWAP, key=len, reverse=True)
_SWAP_RE = re.compile(r"\b(?:" + "|".join(map(re.escape, _FORMS)) + r")\b", re.IGNORECASE)


def _same_case(source: str, target: str) -> str:
    return target[0].upper() + target[1:] if source[0].isupper() else target


@perturbation("contraction", languages=("en",))
def contraction(text: str, rng: random.Random) -> str:
    """Every form in our table swapped for its counterpart ("do not" -> "don't", "can't" ->
    "cannot"; the case kept: "IT IS" -> "IT'S", "It is" -> "It's").

    >>> apply("contraction", "I am sure it is fine, but we cannot stay and don't know why.", "doc")
    "I'm sure it's fine, but we can't stay and do not know why."
    """
    def swap(match: re.Match) -> str:
        form = match.group(0)
        counterpart = SWAP[form.lower()]
        # all caps stays all caps; else only a capital first letter is kept ("i am" -> "I'm")
        return counterpart.upper() if form.isupper() else _same_case(form, counterpart)
    return _SWAP_RE.sub(swap, text)


FILLERS = ("uh", "um", "like", "you know", "I mean", "well", "so", "basically")


@perturbation("filler", languages=("en",), default_args=(0.1,), bounds=RATE)
def filler(text: str, rng: random.Random, rate: float) -> str:
    """Between two words (a single space), with probability `rate`, a filler (uh, um, like, ...).

    >>> apply("filler", "I think the answer is probably forty two", "doc", 0.3)
    'I uh think well the uh answer is probably forty two'
    """
    def space(_: re.Match) -> str:
        return f" {rng.choice(FILLERS)} " if rng.random() < rate else " "
    return re.sub(r"(?<=\S) (?=\S)", space, text)


# Our own list (not WordNet): common words with near-synonyms that fit most contexts.
_SYNONYMS = """big: large huge | small: little tiny | good: fine nice | bad: poor awful
| fast: quick rapid | slow: sluggish unhurried | happy: glad cheerful | sad: unhappy gloomy
| begin: start commence | start: begin | finish: complete end | buy: purchase | help: assist aid
| show: display reveal | choose: pick select | ask: inquire | say: state | tell: inform
| think: believe suppose | find: discover locate | get: obtain | make: create produce
| use: employ utilise | need: require | want: desire | try: attempt | keep: retain | give: provide
| smart: clever bright | easy: simple | hard: difficult tough | important: significant key
| often: frequently | maybe: perhaps possibly | almost: nearly | quickly: rapidly swiftly
| usually: typically | enough: sufficient | old: aged elderly | new: fresh novel | rich: wealthy
| strange: odd weird | angry: mad furious | afraid: scared frightened | house: home
| car: automobile | child: kid | problem: issue | idea: notion thought | job: occupation
| road: street | shop: store | movie: film | gift: present | error: mistake | area: region
| reason: cause | result: outcome | correct: right | wrong: incorrect | whole: entire | also: too"""
SYNONYMS = {word.strip(): tuple(others.split()) for word, others in
            (entry.split(":") for entry in _SYNONYMS.replace("\n", " ").split("|"))}


@perturbation("synonym", languages=("en",), default_args=(0.5,), bounds=RATE)
def synonym(text: str, rng: random.Random, rate: float) -> str:
    """Each word of our synonym list (about 60 common words), with probability `rate`, replaced by
    one of its synonyms (a capital first letter kept).

    >>> apply("synonym", "The old house had a big problem", "doc")
    'The old house had a huge issue'
    """
    def swap(match: re.Match) -> str:
        word = match.group(0)
        options = SYNONYMS.get(word.lower())
        if not options or rng.random() >= rate:
            return word
        return _same_case(word, rng.choice(options))
    return re.sub(r"[A-Za-z]+", swap, text)
