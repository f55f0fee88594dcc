"""The output formats' promises (ocrbatch/render/, the write stage's use of them, serve's Accept) as mutations for
scripts/mutation_check.py (its RENDER table): each breaks one and names the test that must notice."""

from __future__ import annotations

from mutation_check import Mutation

_T = "tests/test_render.py::"
_S = "tests/test_serve.py::"

RENDER = [
    Mutation("render-txt-keeps-furniture", "ocrbatch/render/txt.py",
             "if b.kind != FURNITURE and b.text.strip()]", "if b.text.strip()]",
             (_T + "test_txt_is_the_markdowns_text_in_reading_order",),
             "the plain text holds the page number and running heads the Markdown leaves out"),
    Mutation("render-markdown-list-loose", "ocrbatch/records.py",
             "        if kind == ITEM and prev == ITEM:", "        if False:",
             (_T + "test_markdown_is_the_records_blocks_with_a_tight_list_and_furniture_left_out",),
             "a list's items come apart by blank lines (not the Markdown the layout wrote)"),
    Mutation("render-hocr-words-unsplit", "ocrbatch/render/hocr.py",
             "(x0 + per * m.start(), y0, x0 + per * m.end(), y1)", "(x0, y0, x1, y1)",
             (_T + "test_hocr_parses_as_xhtml_and_html_and_its_boxes_are_the_records",),
             "every word of a line has the whole line's box"),
    Mutation("render-boxes-unchecked", "ocrbatch/render/base.py",
             "        if self.needs == LINES and record.boxes != LINES:", "        if False:",
             (_T + "test_deepseek_pages_are_refused_for_hocr_with_the_reason",),
             "hOCR is written from DeepSeek-OCR-2's block boxes as if they were lines"),
    Mutation("render-pdf-text-visible", "ocrbatch/render/pdf.py", 'ops = [b"BT 3 Tr"]', 'ops = [b"BT 0 Tr"]',
             (_T + "test_pdf_of_an_image_puts_each_lines_text_inside_its_box_and_every_page_renders",),
             "the PDF's text is drawn over the page image"),
    Mutation("render-pdf-width-unscaled", "ocrbatch/render/pdf.py",
             "        scale = 100.0 * (x1 - x0) / (len(units) // 2 * GLYPH_WIDTH * size)", "        scale = 100.0",
             (_T + "test_pdf_of_an_image_puts_each_lines_text_inside_its_box_and_every_page_renders",),
             "a line's text runs past its box (or stops short of it)"),
    Mutation("render-pdf-rotation-ignored", "ocrbatch/render/pdf.py", "    if rotation == 90:", "    if False:",
             (_T + "test_pdf_of_a_pdf_keeps_its_pages_and_places_the_text_on_turned_and_cropped_pages",),
             "on a page shown turned (/Rotate 90) the text is not where the words are"),
    Mutation("render-pdf-text-layer-overlaid", "ocrbatch/render/pdf.py",
             "    return rec if rec is not None and not page.text_layer and rec.boxes == LINES else None",
             "    return rec if rec is not None and rec.boxes == LINES else None",
             (_T + "test_pdf_copies_text_layer_pages_and_pages_without_line_boxes_as_they_are",),
             "a born-digital page gets its text twice"),
    Mutation("render-pdf-png-rows-unpredicted", "ocrbatch/render/pdf.py",
             '"FlateDecode", colors, predicted=True)', '"FlateDecode", colors)',
             (_T + "test_pdf_of_an_image_holds_the_image_as_decoded",),
             "an image's page in the PDF is noise (its PNG-filtered rows read as pixels)"),
    Mutation("outputs-refused-page-redone", "ocrbatch/pipeline/outputs.py",
             "            if renderer.name not in refused and not (rel in written",
             "            if not (rel in written",
             (_T + "test_a_format_the_engine_cannot_give_leaves_its_file_out_with_one_line_per_page",),
             "every rerun redoes the pages a format refused"),
    Mutation("stdout-txt-pages-run-together", "ocrbatch/render/txt.py",
             "render=render, join=join, stream=stream, between=PAGE_BREAK)", "render=render, join=join, stream=stream)",
             (_T + "test_stdout_prints_plain_text_pages_apart_by_a_form_feed",),
             "`-o - --format txt` runs the pages together with no form feed"),
    Mutation("serve-format-param-ignored", "ocrbatch/serve/accept.py",
             "        if name != LINES:\n            return Choice(RENDERERS[name].media, False, name)\n", "",
             (_S + "test_each_output_format_is_answered_by_accept_and_by_format",),
             "?format=txt (hocr, pdf) is answered as JSON"),
]
