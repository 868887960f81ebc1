"""
Regenerates the built-in sample corpus in ``elmo_plugin/sample_corpus/``:
``python scripts/generate_sample_corpus.py``, then
``allennlp elmo-vocab elmo_plugin/sample_corpus/train.txt elmo_plugin/sample_corpus/vocabulary.txt``.

The corpus is small, synthetic English from a seeded grammar with agreement (a cat *sits*,
the cats *sit*), ambiguous words (``bank``, ``bat``, ``light``) in different contexts, relative
clauses and numbers, so that a tiny biLM has something real to learn in a few CPU minutes. It is
shipped so that ``make demo`` and ``allennlp train training_configs/bilm.jsonnet`` work on a
fresh machine with no data at all. For real pretraining, point the config's ``train_data_path``
at your corpus (docs/pretraining.md).
"""
import os
import random
from typing import List

# The corpus is package data, so that an installed plugin has it too.
SAMPLE_CORPUS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "elmo_plugin", "sample_corpus"
)

NOUNS = {
    "cat": "cats", "dog": "dogs", "child": "children", "teacher": "teachers", "farmer": "farmers",
    "bird": "birds", "student": "students", "doctor": "doctors", "river": "rivers",
    "city": "cities", "bank": "banks", "bat": "bats", "light": "lights", "letter": "letters",
    "ship": "ships", "king": "kings", "queen": "queens", "garden": "gardens", "house": "houses",
    "book": "books", "song": "songs", "horse": "horses", "market": "markets", "road": "roads",
}
PLACES = ["river", "bank", "market", "garden", "house", "city", "road", "ship"]
ADJECTIVES = ["old", "young", "small", "large", "quiet", "happy", "tired", "bright", "dark",
              "green", "red", "clever", "strange", "heavy", "warm", "cold"]
# verb: (3rd singular, plural/base, past, takes object)
VERBS = [("sees", "see", "saw", True), ("likes", "like", "liked", True),
         ("finds", "find", "found", True), ("reads", "read", "read", True),
         ("sleeps", "sleep", "slept", False), ("runs", "run", "ran", False),
         ("sings", "sing", "sang", False), ("carries", "carry", "carried", True),
         ("follows", "follow", "followed", True), ("waits", "wait", "waited", False),
         ("opens", "open", "opened", True), ("visits", "visit", "visited", True)]
PREPOSITIONS = ["near", "behind", "in", "on", "beside", "under", "across"]
NUMBERS = ["two", "three", "four", "five", "ten", "twenty"]
ADVERBS = ["quickly", "slowly", "often", "never", "always", "quietly"]
CONTEXT_SENTENCES = [
    "she put the money in the bank and went home .",
    "they sat on the bank of the river and watched the ships .",
    "the boy hit the ball with a bat .",
    "a bat flew out of the dark cave at night .",
    "turn on the light because the room is dark .",
    "the bag was light enough for the child to carry .",
]


def noun_phrase(rng: random.Random, plural: bool) -> List[str]:
    noun = rng.choice(list(NOUNS))
    words = [NOUNS[noun] if plural else noun]
    if rng.random() < 0.4:
        words.insert(0, rng.choice(ADJECTIVES))
    if plural and rng.random() < 0.3:
        determiner = rng.choice(NUMBERS)
    elif plural:
        determiner = rng.choice(["the", "some", "many", "these"])
    else:
        determiner = rng.choice(["the", "a", "this", "every"])
    return [determiner] + words


def clause(rng: random.Random, depth: int = 0) -> List[str]:
    plural = rng.random() < 0.45
    subject = noun_phrase(rng, plural)
    if depth == 0 and rng.random() < 0.2:
        verb = rng.choice(VERBS)
        subject += ["that", verb[1] if plural else verb[0]] + (
            noun_phrase(rng, rng.random() < 0.5) if verb[3] else []
        )
    singular, base, past, transitive = rng.choice(VERBS)
    tense = rng.random()
    verb = [past] if tense < 0.3 else [base if plural else singular]
    if rng.random() < 0.2:
        verb = [rng.choice(ADVERBS)] + verb
    words = subject + verb
    if transitive:
        words += noun_phrase(rng, rng.random() < 0.4)
    if rng.random() < 0.4:
        words += [rng.choice(PREPOSITIONS), "the", rng.choice(PLACES)]
    return words


def sentence(rng: random.Random) -> str:
    if rng.random() < 0.05:
        return rng.choice(CONTEXT_SENTENCES)
    words = clause(rng)
    if rng.random() < 0.25:
        words += [rng.choice(["and", "but", "because", "while"])] + clause(rng, depth=1)
    return " ".join(words + ["."])


def main(train_lines: int = 4000, heldout_lines: int = 400, seed: int = 13) -> None:
    rng = random.Random(seed)
    for name, count in (("train.txt", train_lines), ("heldout.txt", heldout_lines)):
        with open(os.path.join(SAMPLE_CORPUS, name), "w", encoding="utf-8") as out:
            for _ in range(count):
                out.write(sentence(rng) + "\n")


if __name__ == "__main__":
    main()
