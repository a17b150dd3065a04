"""Person names, offline: a heuristic, since Presidio finds names only with a spaCy NER model.

No NER model can be downloaded here, so a name is found from a cue: an honorific (``Dr. Ada
Lovelace``), a common given name followed by a capitalised surname (``Priya Raman``), or a phrase
that introduces one (``my name is …``, ``signed …``). Names without a cue — a lone surname, a
given name missing from the list, a name written in lower case — are missed; BENCHMARKS.md
gives the measured recall.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from bzzz.privacy.spans import PERSON, Span

# Common given names of several languages. Names that are also ordinary words or months
# (May, June, Will, Bill, Grace, Hope, Mark, Rose, Frank, Chase…) are left out on purpose.
_GIVEN_NAMES_TEXT = """
    Aaron Abigail Adam Adrian Ahmed Aisha Alan Albert Alejandro Alex Alexander Alexandra Alice
    Alicia Amanda Amelia Amir Amit Ana Andrea Andreas Andrew Angela Anna Anne Anton Antonio
    Arjun Ava Barbara Benjamin Bernard Brian Camila Carla Carlos Caroline Catherine Charles
    Charlotte Chen Chloe Christian Christina Christopher Claire Daniel David Deborah Diana
    Diego Dmitri Dorothy Edward Elena Elif Elizabeth Ella Emily Emma Eric Erik Ethan Eva
    Fatima Felix Fernando Fiona Francesca Francisco Gabriel George Giulia Hannah Hans Harry
    Hassan Heather Helen Henry Hiroshi Hugo Ian Ingrid Isabella Ivan Jack Jacob James Jane
    Jason Javier Jennifer Jessica Joanna John Jonathan Jorge Jose Joseph Joshua Juan Julia
    Kai Karen Katarina Kateryna Kenji Kevin Klaus Laura Lauren Leila Lena Leon Liam Linda
    Lisa Lucas Lucia Luis Lukas Maria Marco Margaret Marie Marta Martin Mary Mateo Matthew
    Mei Mia Michael Michelle Miguel Mohammed Muhammad Nadia Natalia Nathan Nicholas Nicole
    Nina Noah Oliver Olivia Omar Oscar Pablo Patricia Paul Pedro Peter Pierre Priya Rachel
    Rahul Rajesh Raphael Rebecca Ricardo Richard Robert Roberto Ryan Samantha Samuel Sandra
    Sara Sarah Sebastian Sergei Sofia Sophie Stefan Stephen Steven Susan Thomas Timothy
    Tomas Valentina Victor Victoria Vikram Wei William Xavier Yara Yuki Yusuf Zainab Zoe
"""
GIVEN_NAMES = frozenset(_GIVEN_NAMES_TEXT.split())

# Capitalised words, accented letters of Latin scripts included (García, Jürgen, Ólafsson).
_UPPER, _LOWER = "A-ZÀ-ÖØ-Þ", "a-zß-öø-ÿ"
_WORD = rf"[{_UPPER}][{_LOWER}]+(?:[-'][{_UPPER}]?[{_LOWER}]+)*"
_SURNAME = rf"(?:(?:van|von|de|da|del|der|di|le|la|al|bin) )?{_WORD}"
_GIVEN = re.compile(
    r"\b(?:" + "|".join(sorted(GIVEN_NAMES, key=len, reverse=True)) + r")"
    rf"(?: [A-Z]\.)? +{_SURNAME}\b"
)
_HONORIFIC = re.compile(
    rf"\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Sir|Dame|Herr|Frau|Mme|Mlle)\.? +"
    rf"(?P<name>(?:{_WORD} +){{0,2}}{_SURNAME})\b"
)
_INTRODUCED = re.compile(
    rf"(?:\b[Mm]y name is|\b[Nn]ame:|\b[Ss]igned,?|\b[Rr]egards,|\b[Cc]ontact person:)\s+"
    rf"(?P<name>{_WORD}(?: +{_SURNAME})?)\b"
)


def find_names(text: str) -> Iterator[Span]:
    """Person names that carry a cue (see the module's docstring)."""
    for match in _HONORIFIC.finditer(text):
        yield Span(match.start("name"), match.end("name"), PERSON, 0.5)
    for match in _INTRODUCED.finditer(text):
        yield Span(match.start("name"), match.end("name"), PERSON, 0.5)
    for match in _GIVEN.finditer(text):
        yield Span(match.start(), match.end(), PERSON, 0.45)
