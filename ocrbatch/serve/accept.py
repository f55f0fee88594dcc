"""What a conversion is answered as: the Accept header read by the HTTP rules (RFC 9110 §12.5.1), and
`?format=`.

    choose(accept, format_param) -> Choice(media, lines, format)

The offers are JSON (the default: each page's Markdown and confidence), NDJSON (the same, a line per page as it
finishes), and the document in each output format of the registry (render/) but json, by its media type: Markdown
(text/markdown), plain text (text/plain), hOCR (text/vnd.hocr+html), a searchable PDF (application/pdf). Each
media range is compared case-insensitively; an offer takes the q-value of the most specific range that matches
it (type/subtype, then type/*, then */*), q=0 meaning "not this"; the offer with the highest q wins, ties in the
order of OFFERS. No Accept header (or an empty one) is JSON. `?format=NAME` (a format's name: md, json, txt,
hocr, pdf) answers that format whatever Accept says; `format=lines` (a parameter of the chosen range, or
`?format=lines`) adds each page's lines and boxes (its page JSON) to the JSON or NDJSON answer. What cannot be
answered is refused before any work: an Accept that none of the offers satisfies (406), an unknown format (400
for the query, 406 in Accept).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..render import RENDERERS

JSON = "application/json"
MARKDOWN = RENDERERS["md"].media
NDJSON = "application/x-ndjson"
# the document answers: each format's media type → its name (json's page JSON is the JSON answer's format=lines)
DOCUMENTS = {r.media: name for name, r in RENDERERS.items() if name != "json"}
OFFERS = tuple(dict.fromkeys((JSON, MARKDOWN, NDJSON, *DOCUMENTS)))
LINES = "lines"
FORMATS = (LINES, *RENDERERS)  # the values ?format= may take; a range's format= parameter: lines only


class Refused(Exception):
    """The request asks for what the server cannot give: `status` 400 or 406, the message says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Choice:
    media: str  # one of OFFERS
    lines: bool  # format=lines
    format: str | None = None  # the document's format (a name in render.RENDERERS); None: JSON or NDJSON


@dataclass(frozen=True)
class _Range:
    media: str
    q: float
    params: dict[str, str]

    def specificity(self, offer: str) -> int:
        """3 exact, 2 type/*, 1 */*, 0 no match."""
        if self.media == offer:
            return 3
        kind, _, sub = self.media.partition("/")
        if sub == "*" and kind == offer.partition("/")[0]:
            return 2
        return 1 if self.media == "*/*" else 0


def _ranges(accept: str) -> list[_Range]:
    out = []
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        media = media.lower()
        if "/" not in media:
            continue  # not a media range: ignored, as a server may
        values: dict[str, str] = {}
        for p in params:
            key, _, value = p.partition("=")
            values[key.strip().lower()] = value.strip().strip('"').lower()
        try:
            q = float(values.pop("q", "1"))
        except ValueError:
            continue  # an invalid q-value: the range is ignored
        out.append(_Range(media, min(max(q, 0.0), 1.0), values))
    return out


def choose(accept: str | None, format_param: str | None) -> Choice:
    """The answer's media type, whether it has the lines, and its document format; Refused when it cannot be
    answered."""
    lines = False
    if format_param is not None and format_param != "":
        name = format_param.lower()
        if name not in FORMATS:
            raise Refused(400, f"format {format_param!r}: choose {', '.join(FORMATS)} (or leave format out)")
        if name == "json":
            return Choice(JSON, False)
        if name != LINES:
            return Choice(RENDERERS[name].media, False, name)
        lines = True
    if accept is None or not accept.strip():
        return Choice(JSON, lines)
    ranges = _ranges(accept)
    best: tuple[float, int, str, _Range] | None = None
    for rank, offer in enumerate(OFFERS):
        matching = [r for r in ranges if r.specificity(offer)]
        if not matching:
            continue
        top = max(r.specificity(offer) for r in matching)
        chosen = max((r for r in matching if r.specificity(offer) == top), key=lambda r: r.q)
        if chosen.q <= 0:
            continue
        if best is None or chosen.q > best[0]:
            best = (chosen.q, rank, offer, chosen)
    if best is None:
        raise Refused(406, f"Accept {accept.strip()!r}: this server answers {', '.join(OFFERS)}")
    fmt = best[3].params.get("format")
    if fmt is not None:
        if fmt != LINES:
            raise Refused(406, f"Accept {accept.strip()!r}: format {fmt!r} is unknown (the only format is lines)")
        lines = True
    return Choice(best[2], lines, DOCUMENTS.get(best[2]))
