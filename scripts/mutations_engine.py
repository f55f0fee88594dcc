"""The embedded engine's cascade and int8 cache as mutations for scripts/mutation_check.py (its ENGINE table):
each breaks one promise of engines/rapid.py or engines/int8.py and names the test that must notice."""

from __future__ import annotations

from mutation_check import Mutation

_K, _Q = "tests/test_cascade.py::", "tests/test_int8.py::"

ENGINE = [
    Mutation("cascade-never-rereads", "ocrbatch/engines/rapid.py",
             "    return below >= 1 or sureness(reading) < below or _odd(reading.text)", "    return _odd(reading.text)",
             (_K + "test_a_line_the_fast_model_is_unsure_of_is_read_again_and_the_better_reading_kept",),
             "a line the fast recognizer is unsure of keeps its wrong reading"),
    Mutation("cascade-keeps-first-reading", "ocrbatch/engines/rapid.py",
             "    scale.\"\"\"\n    return second", "    scale.\"\"\"\n    return first",
             (_K + "test_a_line_the_fast_model_is_unsure_of_is_read_again_and_the_better_reading_kept",),
             "the accurate reading of an unsure line is thrown away"),
    Mutation("cascade-threshold-1-not-all", "ocrbatch/engines/rapid.py",
             "    return below >= 1 or sureness(reading) < below or _odd(reading.text)",
             "    return sureness(reading) < below or _odd(reading.text)",
             (_K + "test_at_0_no_line_is_read_again_and_at_1_every_line_even_a_sure_or_odd_one",),
             "--reread-below 1 does not read every line again"),
    Mutation("cascade-threshold-0-ignored", "ocrbatch/engines/rapid.py",
             "    if below <= 0:\n        return False\n", "",
             (_K + "test_at_0_no_line_is_read_again_and_at_1_every_line_even_a_sure_or_odd_one",),
             "--reread-below 0 still reads lines again"),
    Mutation("cascade-second-model-loaded-at-0", "ocrbatch/engines/rapid.py",
             "if reread is None or self.options.reread_below <= 0 else", "if reread is None else",
             (_K + "test_the_threshold_is_honoured_at_0_and_at_1",),
             "--reread-below 0 still loads the second recognizer (its memory and load time for nothing)"),
    Mutation("cascade-failure-fails-batch", "ocrbatch/engines/rapid.py",
             "        except Exception as exc:  # noqa: BLE001 - a failure in the second model fails only its pages\n"
             "            _fail(states, chunk, exc)\n            return []\n",
             "        except ValueError:\n            return []\n",
             (_K + "test_a_failure_in_the_second_model_fails_only_its_page",),
             "a failure in the second recognizer fails every page of the batch"),
    Mutation("cascade-count-missing", "ocrbatch/engines/rapid.py",
             "            page.reread.append(j)\n", "",
             (_K + "test_json_output_says_how_many_lines_were_read_again",),
             "the page's confidence does not say how many lines were read again"),
    Mutation("cascade-signal-is-the-mean", "ocrbatch/engines/rapid.py",
             "    return below >= 1 or sureness(reading) < below or _odd(reading.text)",
             "    return below >= 1 or reading.score < below or _odd(reading.text)",
             (_K + "test_one_doubtful_word_in_a_long_sure_line_is_enough_to_read_it_again",),
             "a long line's few doubtful characters hide in its mean: the line keeps the fast model's reading"),
    Mutation("cascade-sureness-unsorted", "ocrbatch/engines/cascade.py",
             "    probs = sorted(reading.probs)", "    probs = list(reading.probs)",
             (_K + "test_sureness_is_a_low_quantile_of_the_character_probabilities",),
             "the sureness is whichever character comes first, not the weakest ones"),
    Mutation("int8-cache-unchecked", "ocrbatch/engines/int8.py",
             "        return isinstance(want, str) and file_sha256(target) == want",
             "        return isinstance(want, str)",
             (_Q + "test_a_damaged_or_half_written_cache_file_is_rebuilt_never_loaded",),
             "a damaged int8 file in the cache is loaded"),
    Mutation("int8-built-every-time", "ocrbatch/engines/int8.py",
             "        if is_valid(target):  # built before, or by another process while this one waited\n"
             "            return target, False\n", "",
             (_Q + "test_built_once_from_the_wheels_model_and_it_reads",
              _Q + "test_two_processes_building_at_once_both_end_with_the_same_file"),
             "the int8 models are quantized again on every start, and two processes starting at once both build"),
    Mutation("int8-build-unlocked", "ocrbatch/engines/int8.py",
             "    with _locked(target.with_suffix(\".lock\")):", "    with open(os.devnull):",
             (_Q + "test_two_processes_building_at_once_both_end_with_the_same_file",),
             "two processes that start at once both build, and one's file replaces the other's under it"),
]
