"""The layout's mutations for scripts/mutation_check.py (its LAYOUT table): each switches off one stage of
ocrbatch/layout/page.py or one named rule, and the layout tests must notice.

    python scripts/mutation_check.py --table layout
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:  # the fields of mutation_check.Mutation (kept apart: that script imports this one)
    name: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    breaks: str
    timeout: float | None = None


TESTS = ("tests/test_layout_stages.py", "tests/test_layout.py", "tests/test_layout_furniture.py",
         "-k", "not scanned_book")  # (the book spread there is read by the real engine: seconds each)
L = "ocrbatch/layout/"


def _m(name: str, file: str, old: str, new: str, breaks: str) -> Mutation:
    return Mutation(f"layout-{name}", L + file, old, new, TESTS, breaks)


LAYOUT = [
    # -- stages ------------------------------------------------------------------------------------
    _m("stage-lines-split-merged", "lines.py", "    lines = split_merged(lines, body_height(lines))\n", "",
       "lines run across a gutter stay whole"),
    _m("stage-lines-join-spaced", "lines.py", "    return join_spaced(lines, body_height(lines))",
       "    return lines", "widely set type stays in pieces"),
    _m("stage-lines-stamps", "lines.py", "        lines = [l for l in lines if not is_margin_stamp(l, width, p)]",
       "        pass", "stamps up the margins are kept"),
    _m("stage-furniture-margins", "page.py", "    head, foot = margin_bands(lines, h, height, p)",
       "    head, foot = [], []", "running heads and feet are read as text"),
    _m("stage-furniture-pages", "page.py", "    if several and is_prose_page(region, h, p):", "    if False:",
       "the heads and feet of pages on one sheet are read as text"),
    _m("stage-regions", "page.py", "    regions = page_regions(body, h, p) if body else []",
       "    regions = [body] if body else []", "pages on one sheet are not read page by page"),
    _m("stage-columns", "page.py", "[s for s in find_separators(region, h, p) if not _in_grid(s, grid)]", "[]",
       "no column separators: columns are read row by row"),
    _m("stage-grids", "page.py", "    grid = grid_separators(region, h, p)", "    grid = []",
       "a grid of centred author blocks is read row by row"),
    _m("stage-cut-merged", "page.py", "    region, seps = cut_merged(region, seps, h, p)\n", "",
       "lines run across a gutter where its separator stops stay whole"),
    _m("stage-ornaments", "page.py", "    region = drop_ornaments(region, seps, h, p)\n", "",
       "a rule of circles down a gutter is read as text"),
    _m("stage-blocks", "blocks.py",
       "        if home is not None and joins(home, row, p) and _same_columns(home.rows[-1], row, seps, h, p):",
       "        if False:", "every row is a block of its own"),
    _m("stage-order", "order.py", "    return [blocks[i] for i in done]",
       "    return sorted(blocks, key=lambda b: (b.box[1], b.box[0]))", "blocks are read top to bottom"),
    _m("stage-tables", "paragraphs.py",
       "    tables = {start: (end, table) for start, end, table in find_tables(rows, h)}", "    tables = {}",
       "no pipe tables"),
    # -- named rules -------------------------------------------------------------------------------
    _m("rule-cell-gap", "columns.py", "            if not _cell_gap(left, right, inks, p) and", "            if True and",
       "gaps between a table's cells part columns"),
    _m("rule-markers", "columns.py",
       "    if median(len(l.text.strip()) for l in left) <= p.marker_chars:\n        return True",
       "    if False:\n        return True", "bullets and line numbers are a column of their own"),
    _m("rule-amounts", "columns.py",
       "    if sum(1 for r in right if not _wordy(r.text)) >= p.cell_numeric * len(right):", "    if False:",
       "a column of amounts or codes parts columns"),
    _m("rule-card-gutter", "columns.py", " or _widest(pairs, inks, p) >= p.gutter_ratio:", ":",
       "a reference card's gutter between short pairs is a table's gap"),
    _m("rule-sections", "columns.py", "                found += _sections(sep, left, right, inks, h, p)",
       "                found.append(sep)", "balanced two-column sections run together"),
    _m("rule-seam", "columns.py", " and not _seam(left, right, x, h, p):", ":",
       "columns whose padded boxes touch are read row by row"),
    _m("rule-hug", "columns.py",
       "        y0, y1 = min([y0] + [l.box[1] for l in hug]), max([y1] + [l.box[3] for l in hug])\n", "",
       "a separator stops at the tab stop's own lines"),
    _m("rule-wide-gutter", "columns.py", "        if slack and x - edges[len(edges) // 2] > 2 * slack:",
       "        if False:", "a line may cross a wide gutter"),
    _m("rule-short-column", "columns.py", "        if j - i >= p.tab_min_lines - 1:", "        if j - i >= p.tab_min_lines:",
       "a column of two lines beside a long one is not seen"),
    _m("rule-grid-over-tabs", "page.py", " if not _in_grid(s, grid)]", "]",
       "chance tab stops inside a grid of centred blocks part it"),
    _m("rule-row-size-jump", "blocks.py", "            jump = max(prev.height", "            jump = False and max(prev.height",
       "type of very different sizes on one row is read as one line"),
    _m("rule-tick-labels", "blocks.py", "            label = _TICK.match(prev.text.strip()) is not None and",
       "            label = False and", "a chart's tick value joins the table row beside it"),
    _m("rule-block-mates", "blocks.py", "        if home is not None and any(_x_overlap(",
       "        if home is not None and False and any(_x_overlap(", "a title across columns joins one column's block"),
    _m("rule-block-between", "blocks.py", "        if home is not None and _between(",
       "        if home is not None and False and _between(", "a block skips rows lying between its rows"),
    _m("rule-figure-kind", "blocks.py", '        block.kind = "figure" if is_figure_text(block, p) else "text"',
       '        block.kind = "text"', "a chart's labels are no figure block"),
    _m("rule-side-by-side", "order.py", "    if shared > p.y_overlap * min(a.size, b.size) or any(", "    if any(",
       "blocks side by side are read top first"),
    _m("rule-order-separators", "order.py", " or any(s.between(left.box, right.box) for s in seps):", ":",
       "columns across a separator are read row by row"),
    _m("rule-region-rows", "order.py", "    rows = _cut_rows(lines, h, p)", "    rows = [lines]",
       "pages in rows on a sheet are read column by column through them"),
    _m("rule-region-sides", "order.py", "    sides = _cut_sides(lines, h, p)", "    sides = [lines]",
       "pages side by side are not read one after the other"),
    _m("rule-table-evidence", "tables.py", "    if not _has_table_evidence(table_rows):", "    if False:",
       "prose set in aligned columns is a table"),
]
