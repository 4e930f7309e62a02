"""Hook implementations of oml-postprocessors.

No hook is implemented yet: the pairwise re-rankers land with the re-ranking issue and will be registered
here with ``oml_register_postprocessors``. The entry point exists so that installing the distribution is
already visible in ``oml plugins``.
"""
