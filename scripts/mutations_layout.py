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
    _m("stage-lines-split-merged", "lines.py", "    lines = split_merged(lines, body_height(lines), p)\n", "",
       "lines run across a gutter stay whole"),
    _m("stage-lines-join-spaced", "lines.py", "    return join_spaced(lines, body_height(lines), p)",
       "    return lines", "widely set type stays in pieces"),
    _m("stage-lines-stamps", "lines.py", "        lines = [l for l in lines if not is_margin_stamp(l, width, p)]",
       "        pass", "stamps up the margins are kept"),
    _m("stage-furniture-margins", "page.py", "    head, foot = margin_bands(lines, h, height, p)",
       "    head, foot = [], []", "running heads and feet are read as text"),
    _m("stage-furniture-pages", "page.py", "    if several and is_prose_page(region, h, p):", "    if False:",
       "the heads and feet of pages on one sheet are read as text"),
    _m("stage-regions", "page.py", "    regions = page_regions(body, h, p) if body else []",
       "    regions = [body] if body else []", "pages on one sheet are not read page by page"),
    _m("stage-columns", "page.py", "find_separators(region, h, p) + grid", "grid",
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
       "    tables = {start: (end, table) for start, end, table in find_tables(rows, h, p)}", "    tables = {}",
       "no pipe tables"),
    # -- named rules -------------------------------------------------------------------------------
    _m("rule-flow-evidence", "columns.py", "            if why and not any(_same(sep, f, h) for f in found):",
       "            if True and not any(_same(sep, f, h) for f in found):",
       "a strip with no evidence of two flows (label ... value rows) parts columns"),
    _m("rule-flow-offsets", "columns.py", "    if _off_rows(left, beside, p) or _off_rows(beside, left, p):",
       "    if False:", "rows off each other's are no evidence of two flows"),
    _m("rule-flow-prose", "columns.py", "    if _prose_side(left, p) and _prose_side(beside, p):", "    if False:",
       "two columns of prose on one baseline grid are read row by row"),
    _m("rule-flow-beside-strip", "columns.py", "              and y0 <= (k.box[1] + k.box[3]) / 2 <= y1]", "]",
       "a side's leading is measured down the whole page"),
    _m("rule-white-bands", "columns.py", "    return sorted(blocked + bands)", "    return sorted(blocked)",
       "a tab stop's lines far apart across a white band are weighed as one stretch"),
    _m("rule-white-bands-both-sides", "columns.py",
       " \\\n                and not (any(c < bottom for c in lefts) and any(c > y0 for c in lefts)):", ":",
       "a card's columns are cut at a white band across them"),
    _m("rule-markers", "columns.py",
       "    if median(len(l.text.strip()) for l in left) <= p.marker_chars:\n        return \"\"",
       "    if False:\n        return \"\"", "bullets and line numbers are a column of their own"),
    _m("rule-amounts", "columns.py",
       "    if sum(1 for r in right if not _wordy(r.text, p)) >= p.cell_numeric * len(right):", "    if False:",
       "a column of amounts or codes parts columns"),
    _m("rule-card-gutter", "columns.py", "    if _widest(pairs, inks, p) >= p.gutter_ratio:", "    if False:",
       "a reference card's gutter between short pairs is a table's gap"),
    _m("rule-sections", "columns.py", "                found += _sections(replace(sep, why=f\"{sep.why}: {why}\"), left, right, inks, h, p)",
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
    _m("rule-tab-lead", "columns.py",
       "            x = min((l.box[0] for l in ordered[i:j] if _prose([l], h, p)), default=x)\n", "",
       "an equation's piece before a column's edge carries the separator through the equation"),
    _m("rule-gutter-start", "columns.py", "            if l.box[0] >= inner:\n                continue\n", "",
       "a column's line whose box starts inside the gutter breaks the columns"),
    _m("rule-sections-gutter-start", "columns.py", "min(sep.x0, sep.x1 - sep.slack) < l.box[0]",
       "sep.x1 - sep.slack <= l.box[0]", "a line starting inside the gutter hides a section break"),
    _m("rule-cut-merged-narrow", "columns.py", " or sep.x1 - sep.x0 > p.merged_gutter * h:", ":",
       "a line over a wide gap is cut back as if run across a gutter"),
    _m("rule-cut-merged-edge", "columns.py", "abs(l.box[0] - x0) <= h and l.box[2] >= x1 - 2 * h",
       "l.box[0] <= x0 + h and l.box[2] >= x1 - 2 * h", "a title across several columns is cut back at a gutter"),
    _m("stage-extend", "page.py",
       "    seps = extend_separators(region, find_separators(region, h, p) + grid, h, p)",
       "    seps = find_separators(region, h, p) + grid",
       "separators stop at their lines: a table atop a column beside a figure is read first"),
    _m("rule-extend-across", "columns.py",
       "        if a is not None and min((k for k in right if _level(k, a, p)), key=lambda l: l.box[0]) is b \\\n"
       "                and _reads_across(a, b, beyond, p):",
       "        if False:",
       "a separator runs on up through a table set across the columns"),
    _m("rule-lines-white-gutter", "lines.py",
       "    if not 0 <= b - a <= p.merged_gutter * h or any(\n            l.box[0] < min(a, b) - p.across_reach * h",
       "    if not -h <= b - a <= p.merged_gutter * h or any(\n            l.box[0] < min(a, b) - p.across_reach * h",
       "a line is cut at a river of word spaces"),
    _m("rule-lines-left-edge", "lines.py", "[l.box[2] for l in left if l.box[2] <= b + edge] or [x1]",
       "[l.box[2] for l in left] or [x1]", "a merged line's gutter is taken from a line run across it too"),
    _m("rule-lines-run-on", "lines.py",
       "abs(run_on(l, lines, p.word_gap * h, p.row_centre, x1 + edge) - x1) <= edge", "abs(l.box[2] - x1) <= edge",
       "a merged line boxed in two pieces keeps the one above it whole"),
    _m("rule-row-size-jump", "blocks.py", "            jump = max(prev.height", "            jump = False and max(prev.height",
       "type of very different sizes on one row is read as one line"),
    _m("rule-tick-labels", "blocks.py", "            label = _figure_label(prev.text, p) and", "            label = False and",
       "a chart's tick value joins the table row beside it"),
    _m("rule-figure-labels", "blocks.py",
       "    return _TICK.match(text) is not None or len(text) <= p.figure_label_chars and not _wordy(text, p)",
       "    return _TICK.match(text) is not None", "a figure's short label joins the table row beside it"),
    _m("rule-labels-across-white", "blocks.py",
       "                and not any(prev.box[2] < k.box[2] and k.box[0] < line.box[0] and core(k)[0] < core(prev)[1]\n"
       "                            and core(k)[1] > core(prev)[0] for k in lines if k is not prev and k is not line)\n",
       "\n", "a formula's short piece is taken for a figure's label"),
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
    _m("rule-table-columns", "params.py", "    table_columns: int = 3", "    table_columns: int = 2",
       "label ... value rows are written as pipe tables"),
    _m("rule-table-evidence", "tables.py", "    if not _has_table_evidence(table_rows, p):", "    if False:",
       "prose set in aligned columns is a table"),
]
