from .more import *  # noqa
from .recipes import *  # noqa

__version__ = '8.7.0'
