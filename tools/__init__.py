"""The project's own tooling, not shipped in the wheel: benchmarks (``tools.bench``), the generated blocks of the docs
(``tools.docs_blocks``) and the headless-Chromium check of the built report (``tools.report_browser``)."""
