from garen_infer.doors.cli import main

raise SystemExit(main())
