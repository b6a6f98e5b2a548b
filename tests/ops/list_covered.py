"""Write tests/ops/COVERED_OPS.txt: the OpInfo ops test_opinfo.py checks, with sample counts.

Run it after changing which ops are mapped: ``python tests/ops/list_covered.py``.
"""
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import test_opinfo  # noqa: E402

if __name__ == "__main__":
    warnings.simplefilter("ignore")
    text = test_opinfo.write_covered()
    print(text.splitlines()[2].lstrip("# "))
    print(f"written to {test_opinfo.COVERED_FILE}")
