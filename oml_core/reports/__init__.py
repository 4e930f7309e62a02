"""What each ``oml`` command shows, computed in one place: every command's answer built as data, with its text
(``as_text()``) and its JSON (``as_data()``, ``as_json()``: the same data) renderings, so that the command line,
the service (``oml serve``) and a Python program give the same answer from the same function.

One module per command or group of commands, each importing only what its answers need (no module imports
Lightning but :mod:`~oml_core.reports.pipelines`, whose reports are those of the pipelines' results):

- :mod:`~oml_core.reports.answer`: :class:`~oml_core.reports.answer.Answer`, the base of every answer;
- :mod:`~oml_core.reports.pipelines`: the end-of-run report of each pipeline (``oml train`` ...) from its result;
- :mod:`~oml_core.reports.config`: a composed config as ``--show-config`` prints it;
- :mod:`~oml_core.reports.version`, :mod:`~oml_core.reports.plugins`, :mod:`~oml_core.reports.registry`,
  :mod:`~oml_core.reports.datasets`, :mod:`~oml_core.reports.index`, :mod:`~oml_core.reports.search`,
  :mod:`~oml_core.reports.export`: ``oml --version``, ``oml plugins`` and ``oml plugin new``, ``oml registry``,
  ``oml mock-dataset`` and ``oml check-dataframe``, ``oml index build|add|remove|calibrate``, ``oml search`` (and
  the service's search), ``oml export``.

Nothing here prints, logs or reads the command line: :mod:`oml_core.cli` prints these answers.
"""
