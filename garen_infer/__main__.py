from garen_infer.cli import main

raise SystemExit(main())
