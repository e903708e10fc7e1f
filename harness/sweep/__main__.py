"""``python -m harness.sweep --cell CONFIG.json --runs-dir DIR``: run one sweep cell."""

import sys

from harness.sweep.command import cell_main

if __name__ == "__main__":
    sys.exit(cell_main(sys.argv[1:]))
