"""Quick start: tune a matrix multiply for this CPU, build it, check it, time it.

Run with ``python3 scripts/examples/quickstart.py`` from a checkout. The quick start ships with
the package as :mod:`autotune.quickstart`, so an installed package runs the same with
``python3 -m autotune.quickstart`` (``--help`` lists its options).
"""

from autotune.quickstart import main

if __name__ == "__main__":
    main()
