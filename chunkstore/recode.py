"""Re-encoding plans (the documented path: ``chunkstore.recode.create_kwargs_like``,
``RecodeError``), from :mod:`chunkstore.hierarchy.recode`."""

from chunkstore.hierarchy.recode import *  # noqa: F401,F403
from chunkstore.hierarchy.recode import __all__  # noqa: F401
