"""The command line: ``bindery`` (:mod:`.main`), ``kubectl bindery why`` (:mod:`.why`), and the
exit codes both return (:mod:`.exits`). The top layer: it may import every other package."""
