"""Stop strings: one output's text, cut before the first stop string found.

While stop strings are being looked for, the last ``len(longest stop) - 1`` characters are
held back from a stream (they may be the start of a stop string), as vLLM does; they are
sent once the next piece shows they are not, or at the end. A stop string is looked for
only in text that arrived once ``min_tokens`` tokens were out (vLLM's rule)::

    s = StopText(("\\n\\n",))
    s.add("ab\\n", final=False, looking=True)   # ("ab", False): "\\n" held back
    s.add("\\ncd", final=False, looking=True)   # ("", True): the output is "ab"
"""

from __future__ import annotations


class StopText:
    """The text of one output so far; see the module docstring."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = stops
        self.hold = max((len(s) for s in stops), default=1) - 1
        self.text = ""  # the output so far (cut at the stop string once found)
        self.sent = 0  # characters of ``text`` already handed out
        self.checked = 0  # stop strings were looked for in text[:checked]

    def add(self, piece: str, *, final: bool, looking: bool) -> tuple[str, bool]:
        """Text now safe to send and whether a stop string ended the output."""
        self.text += piece
        if looking and self.stops:
            start = max(0, self.checked - self.hold)
            hits = [i for s in self.stops if (i := self.text.find(s, start)) >= 0]
            if hits:
                cut = max(min(hits), self.sent)
                out, self.text = self.text[self.sent:cut], self.text[:cut]
                self.sent = self.checked = cut
                return out, True
            self.checked = len(self.text)
        else:
            self.checked = len(self.text)  # before min_tokens: never looked at again
        upto = len(self.text) if final or not self.stops else max(
            self.sent, len(self.text) - self.hold)
        out, self.sent = self.text[self.sent:upto], upto
        return out, False
