"""`python tests/serve_main.py serve ...`: the real CLI with the test engines registered, for the server tests
(which run the server as a subprocess, as a user would). With OCRBATCH_TEST_FAULT set to a Fault's fields as
JSON (tests/engines/faults.py), the engine `faulty` is the fake engine tripping that fault."""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ocrbatch.cli import main  # noqa: E402
from ocrbatch.engines import registry  # noqa: E402
from ocrbatch.engines.fake import FakeEngine  # noqa: E402
from tests import engines  # noqa: E402
from tests.engines.faults import Fault, faulty  # noqa: E402

for cls in (engines.GateEngine, engines.NoLoadEngine, engines.CrashOnPage, engines.CrashOnLoad, engines.BigPages):
    registry.register(cls.name, cls)
if os.environ.get("OCRBATCH_TEST_SEND_STALL_S"):  # a short bound for a client that stops reading
    from ocrbatch.serve import answer

    answer.SEND_STALL_S = float(os.environ["OCRBATCH_TEST_SEND_STALL_S"])
if os.environ.get("OCRBATCH_TEST_FAULT"):
    registry.register("faulty", faulty(FakeEngine, Fault(**json.loads(os.environ["OCRBATCH_TEST_FAULT"])),
                                       name="faulty"))

if __name__ == "__main__":
    main()
