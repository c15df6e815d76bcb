import sys

from rocm_build_backend.cli import main

sys.exit(main())
