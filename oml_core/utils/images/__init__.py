"""Images: reading (:mod:`~oml_core.utils.images.images`) and keep-aspect-ratio resizing
(:mod:`~oml_core.utils.images.images_resize`), at OML's module paths (``oml.utils.images.images``,
``oml.utils.images.images_resize``).

The package re-exports the readers' module, so ``from oml_core.utils.images import imread_pil`` works as
``from oml_core.utils.images.images import imread_pil`` does.
"""

from oml_core.utils.images.images import *  # noqa: F403  (the readers' module, re-exported whole)
from oml_core.utils.images.images import __all__ as __all__
