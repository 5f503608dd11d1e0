"""python3 -m gangsched_kuberay (the container's entry point)."""

import sys

from gangsched_kuberay.cli import main

sys.exit(main())
