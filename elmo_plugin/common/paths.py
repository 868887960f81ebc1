"""
Small definitions that every layer of the plugin shares.
"""
import os
from typing import Union

# A file system path as the plugin's functions accept it: a string or any `os.PathLike`.
PathLike = Union[str, "os.PathLike[str]"]
