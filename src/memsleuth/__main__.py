from memsleuth.cli import main

raise SystemExit(main())
