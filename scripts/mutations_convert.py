"""The convert command's promises as mutations for scripts/mutation_check.py (its CONVERT table): each breaks one
and names the test that must notice. Tests that need what a machine may lack (a mount namespace, dropping a
capability) skip there, and their mutation then survives: run this table where they run."""

from __future__ import annotations

from mutation_check import Mutation

_C, _R = "tests/test_convert.py::", "tests/test_reliability.py::"

CONVERT = [
    Mutation("names-newcomer-takes-owned", "ocrbatch/pipeline/names.py",
             "        return self.book is None or all(self.book.holder(n) in (None, source) for n in names)",
             "        return True", (_C + "test_a_source_keeps_its_output_name_and_a_newcomer_gets_another",),
             "a file added later takes the name an earlier source's text is under"),
    Mutation("names-first-record-holds", "ocrbatch/manifest.py",
             "            if earlier is None or earlier[1] == source or earlier[0] <= when:",
             "            if earlier is None or earlier[1] == source:",
             (_C + "test_resume_redoes_a_page_whose_file_another_source_wrote_over",),
             "a page is skipped while its file holds the text of the source that wrote it last"),
    Mutation("temp-name-full-length", "ocrbatch/atomic.py",
             "prefix=f\".{path.name[:TEMP_NAME_CHARS]}.{RUN_TOKEN}.\"", "prefix=f\".{path.name}.{RUN_TOKEN}.\"",
             (_R + "test_an_output_name_as_long_as_the_file_system_allows_is_written",),
             "a 242-255 byte output name cannot be written"),
    Mutation("long-names-unshortened", "ocrbatch/records.py",
             "    if len(raw) + len(ext) <= name_max:\n        return key", "    return key",
             (_R + "test_a_name_too_long_for_the_file_system_is_shortened_with_a_hash_and_the_manifest_says_so",),
             "an output name over the file system's limit fails its page"),
    Mutation("malformed-records-read", "ocrbatch/manifest.py",
             "            and all(check(rec[k]) for k, check in _FIELD_TYPES.items() if k in rec))", ")",
             (_R + "test_a_record_with_a_field_of_the_wrong_type_is_ignored_with_a_warning",),
             "a record with a field of the wrong type ends every later run with exit 1"),
    Mutation("unreadable-folders-quiet", "ocrbatch/pipeline/discover.py", "onerror=unreadable.append", "onerror=None",
             (_R + "test_a_folder_that_cannot_be_read_is_a_failed_input",),
             "a folder that cannot be read is dropped without a word"),
    Mutation("dangling-links-quiet", "ocrbatch/pipeline/discover.py",
             "            return f\"dangling symlink: it points to", "            return None and f\"",
             (_R + "test_a_dangling_symlink_in_a_walk_is_a_failed_input",),
             "a link to nothing in a walked folder is dropped without a word"),
    Mutation("empty-selection-quiet", "ocrbatch/pipeline/discover.py", "            if not selected:\n",
             "            if False:\n",
             ("tests/test_discover.py::test_a_page_selection_that_names_none_of_a_files_pages_says_so_per_file",),
             "--pages that selects nothing exits 0 with no line"),
    Mutation("compaction-disk-full-warned", "ocrbatch/manifest.py", "            if atomic.is_fatal(exc):\n",
             "            if False:\n",
             (_R + "test_a_disk_that_fills_during_the_final_manifest_rewrite_is_exit_7_and_keeps_whole_lines",),
             "a full disk at the manifest's rewrite exits 0"),
    Mutation("read-only-output-usage-error", "ocrbatch/pipeline/write.py", "        if _read_only(out):\n",
             "        if False:\n", (_R + "test_a_read_only_output_is_exit_7",),
             "a read-only output is a usage error (exit 2), not exit 7"),
    Mutation("json-quiet-on-errors", "ocrbatch/cli.py", "    if error is not None and as_json:\n",
             "    if False:\n", (_C + "test_json_prints_a_summary_with_the_error_on_every_exit",),
             "--json prints nothing when the run ends with an error"),
    Mutation("stdin-wait-unstoppable", "ocrbatch/pipeline/discover.py", "    while not stopped():\n",
             "    while True:\n", (_R + "test_paths_on_stdin_are_converted_as_they_arrive_and_sigterm_ends_the_wait",),
             "SIGTERM while stdin is quiet waits out the grace period"),
    Mutation("stdin-read-to-eof", "ocrbatch/pipeline/discover.py", "    try:\n        fd = stream.fileno()\n",
             "    try:\n        raise ValueError\n", (_R + "test_paths_on_stdin_are_converted_as_they_arrive_and_"
                                                     "sigterm_ends_the_wait",),
             "no path from stdin is converted before the pipe closes"),
    Mutation("early-signal-forgotten", "ocrbatch/pipeline/signals.py",
             "    if _installed():\n        yield\n        return\n", "",
             (_R + "test_a_sigterm_that_comes_before_the_run_starts_ends_it_with_a_summary",),
             "a SIGTERM while the command starts is lost or kills it"),
    Mutation("skip-drops-info", "ocrbatch/manifest.py", "            for kept in (\"attachments\", \"info\"):",
             "            for kept in (\"attachments\",):",
             ("tests/test_layout_textlayer.py::test_resume_keeps_the_info_of_a_skipped_page_and_redoes_pages_for_"
              "another_text_layer_or_dpi",), "a skipped page loses what the run that did it found"),
    Mutation("pdf-options-not-compared", "ocrbatch/manifest.py", "            and self._same_options(ref, rec)\n", "",
             ("tests/test_layout_textlayer.py::test_resume_keeps_the_info_of_a_skipped_page_and_redoes_pages_for_"
              "another_text_layer_or_dpi",), "a rerun with --text-layer off or another --dpi skips every page"),
    Mutation("bench-torch-unchecked", "ocrbatch/cli.py", "            import torch  # noqa: F401",
             "            import json as torch  # noqa: F401", (_C + "test_bench_without_torch_says_what_to_install",),
             "bench without torch is an internal error (exit 1)"),
]
