"""Is a chat message nothing but a goodbye or a thank-you? (SPEC §11)

The terminal chat ends without calling the model when the user's message is *only* a
farewell or thanks. A message that merely starts with one ("thanks, now read setup.py") is a
request and goes to the model; so does a bare "no", which answers the model's question.

The check is a tiny grammar over words, not a pattern on the raw text:

1. Normalise: Unicode NFKC, lower case, curly apostrophes made straight and then dropped
   ("that's" -> "thats"), a waving or folded-hands emoji read as "bye" or "thanks", every
   other character that is not a letter or digit made a space, and letters stretched three
   times or more squeezed to one ("byeee" -> "bye").
2. Cover the words, left to right, with known phrases. A phrase is a *signal* (a farewell,
   a thanks or a closing like "that's all") or *filler* ("ok", "so much", "for the help",
   "again"). Any word no phrase covers makes the message a request.
3. The message is a farewell when every word is covered and at least one phrase is a signal.

When in doubt the answer is "not a farewell": a needless model call costs a little, ending
the chat under the user's fingers costs more. So words that can answer a question ("no",
"yes", "sure", "done", "later", "all good") are never enough on their own.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

MAX_WORDS = 16
"""A longer message is treated as a request without looking further."""

_FAREWELLS = """
bye | byee | bye bye | goodbye | good bye | farewell | see you | see ya | see u | cya | cu
take care | good night | goodnight | night night | ttyl | talk soon | talk to you later
catch you later | have a good day | have a good one | have a nice day | have a great day
have a good night | have a good weekend | gotta go | got to go | i have to go | im off
signing off | peace out | ciao | adios | au revoir | quit | exit
"""

_THANKS = """
thanks | thank you | thankyou | thank u | thanx | thnx | thnks | thx | ty | tysm | tyvm
cheers | many thanks | much appreciated | appreciated | appreciate it | i appreciate it
thank you kindly | merci | gracias | danke
"""

_CLOSINGS = """
thats all | that is all | thats all i need | thats all i needed | that will be all
thatll be all | nothing else | that is it | thats it | thats it for now | thats all for now
"""

_FILLERS = """
ok | okay | k | kk | alright | all right | right | great | cool | perfect | awesome | nice
sweet | excellent | good | fine | wonderful | brilliant | amazing | lovely | fantastic
got it | understood | and | so | well | then | again | anyway | anyways | for now | oh | ah
a lot | so much | very much | a bunch | a ton | a million | heaps | loads | really
for everything | for your help | for the help | for all the help | for all your help
for that | for this | for all that | for today | you too | later | im done | all done
im good | all good | all set | im all set | that helped | this helped | bro | man | mate
buddy | dude | friend | pal | guys | everyone | all | again | for real | for reals
"""

_EMOJI_WORDS = {"\N{WAVING HAND SIGN}": " bye ", "\N{PERSON WITH FOLDED HANDS}": " thanks "}

_STRETCHED = re.compile(r"([a-z])\1{2,}")
_NOT_WORD = re.compile(r"[^\w]+|_")


def _words(text: str) -> tuple[str, ...]:
    text = unicodedata.normalize("NFKC", text).lower()
    for emoji, word in _EMOJI_WORDS.items():
        text = text.replace(emoji, word)
    text = text.replace("\u2019", "'").replace("'", "")
    text = _NOT_WORD.sub(" ", text)
    text = _STRETCHED.sub(r"\1", text)
    return tuple(text.split())


@lru_cache(maxsize=1)
def _phrases() -> dict[tuple[str, ...], bool]:
    """Each known phrase (as words) -> whether it is a signal (True) or filler (False)."""
    table: dict[tuple[str, ...], bool] = {}
    for block, signal in ((_FILLERS, False), (_FAREWELLS, True), (_THANKS, True), (_CLOSINGS, True)):
        for phrase in block.replace("\n", "|").split("|"):
            words = _words(phrase)
            if words:
                table[words] = signal or table.get(words, False)
    return table


def is_farewell(message: str) -> bool:
    """True when ``message`` holds nothing but farewells, thanks and harmless filler."""
    words = _words(message)
    if not words or len(words) > MAX_WORDS:
        return False
    phrases = _phrases()
    longest = max(len(p) for p in phrases)
    # reach[i] holds the signal flags of the ways to cover words[:i]: {False}, {True} or both.
    reach: list[set[bool]] = [set() for _ in range(len(words) + 1)]
    reach[0].add(False)
    for i in range(len(words)):
        if not reach[i]:
            continue
        for n in range(1, min(longest, len(words) - i) + 1):
            signal = phrases.get(words[i:i + n])
            if signal is not None:
                reach[i + n].update(seen or signal for seen in reach[i])
    return True in reach[len(words)]
