"""Generate the docs site's reference and results pages (what `make docs` runs): crdscale.docs_reference.

python scripts/gen_docs_reference.py            # writes into docs/; exit 1 if a committed results page was updated
python scripts/gen_docs_reference.py --check    # writes nothing; exit 1 if a committed page is stale
"""

import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's crdscale, whatever is installed
    from crdscale.docs_reference import main

    sys.exit(main())
