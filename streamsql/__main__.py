import sys

from streamsql.surfaces.cli import main

sys.exit(main())
